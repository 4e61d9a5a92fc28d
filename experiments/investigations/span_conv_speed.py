r"""Speed of ConvBERT's k-tap span convolution sum: banded blocks vs slices.

  python -m experiments.investigations.span_conv_speed \
      [--shapes=1x128,1x512,8x128,8x512] \
      [--num_heads=6] [--head_size=64] [--kernel_size=9] [--iterations=30] \
      [--output_markdown=report.md] [--output_json=report.json]

Times step 5 of `span_dynamic_conv` (each position's window combined with its
own k-tap kernel) on `values [B, T, N, H]` and kernels `[B, T, N, k]`: `banded`
(the layer's `apply_dynamic_kernel`) against `slices` (the form it replaced),
forward and with gradients, with and without XLA; medians of alternating
calls, with the outputs' largest difference as a check. It decided the
layer's banded form (README of this folder).
"""

import statistics
import time
from typing import Callable, Dict, List, Sequence, Tuple

from absl import app
from absl import flags
import tensorflow as tf

from experiments import provenance
from official_repro.common import cli
from official_repro.common import json_files
from official_repro.common import markdown
from official_repro.modeling.layers import span_dynamic_conv

FORMULATIONS = ('slices', 'banded')


def shifted_slices_sum(
    values: tf.Tensor, kernel: tf.Tensor, causal: bool = False
) -> tf.Tensor:
  """The k-tap sum of `[B, T, N, H]` values as k shifted slices.

  `kernel` is `[B, T, N, k]`; the earlier `apply_dynamic_kernel`.
  """
  kernel_size = kernel.shape[-1]
  left, right = span_dynamic_conv.window_padding(kernel_size, causal)
  padded = tf.pad(values, [[0, 0], [left, right], [0, 0], [0, 0]])
  seq_length = tf.shape(values)[1]
  output = tf.zeros_like(values)
  for tap in range(kernel_size):
    output += padded[:, tap : tap + seq_length] * kernel[..., tap : tap + 1]
  return output


_FUNCTIONS = {
    'slices': shifted_slices_sum,
    'banded': span_dynamic_conv.apply_dynamic_kernel,
}


def _compiled(
    formulation: str, backward: bool, jit_compile: bool
) -> Callable[[tf.Tensor, tf.Tensor], object]:
  function = _FUNCTIONS[formulation]
  if not backward:
    return tf.function(function, jit_compile=jit_compile)

  def forward_backward(values, kernel):
    with tf.GradientTape() as tape:
      tape.watch([values, kernel])
      output = function(values, kernel)
      loss = tf.reduce_sum(output * output)
    return tape.gradient(loss, [values, kernel])

  return tf.function(forward_backward, jit_compile=jit_compile)


def _call_ms(function, values: tf.Tensor, kernel: tf.Tensor) -> float:
  """Milliseconds of one call, its outputs copied to the host."""
  start = time.perf_counter()
  tf.nest.map_structure(lambda t: t.numpy(), function(values, kernel))
  return 1e3 * (time.perf_counter() - start)


def _alternating_ms(functions, values, kernel, iterations: int):
  """{formulation: ms of each timed call}, after one untimed call each."""
  times = {name: [] for name in FORMULATIONS}
  for name in FORMULATIONS:
    _call_ms(functions[name], values, kernel)
  for iteration in range(iterations):
    order = FORMULATIONS if iteration % 2 == 0 else FORMULATIONS[::-1]
    for name in order:
      times[name].append(_call_ms(functions[name], values, kernel))
  return times


def measure(
    shapes: Sequence[Tuple[int, int]],
    num_heads: int,
    head_size: int,
    kernel_size: int,
    iterations: int,
    seed: int = 0,
) -> List[Dict]:
  """One row per ((B, T) shape, XLA, pass): median ms of each formulation.

  Rows also hold `speedup` (slices / banded) and `max_abs_difference`.
  """
  rows = []
  for batch_size, seq_length in shapes:
    values = tf.random.stateless_normal(
        [batch_size, seq_length, num_heads, head_size], [seed, 0]
    )
    kernel = tf.nn.softmax(
        tf.random.stateless_normal(
            [batch_size, seq_length, num_heads, kernel_size], [seed, 1]
        )
    )
    slices = shifted_slices_sum(values, kernel)
    banded = span_dynamic_conv.apply_dynamic_kernel(values, kernel)
    difference = float(tf.reduce_max(tf.abs(slices - banded)))
    for jit_compile in (False, True):
      for backward in (False, True):
        functions = {
            name: _compiled(name, backward, jit_compile)
            for name in FORMULATIONS
        }
        times = _alternating_ms(functions, values, kernel, iterations)
        row = dict(
            batch_size=batch_size,
            seq_length=seq_length,
            jit_compile=jit_compile,
            backward=backward,
            max_abs_difference=difference,
        )
        for name in FORMULATIONS:
          row[f'{name}_ms'] = statistics.median(times[name])
        row['speedup'] = row['slices_ms'] / row['banded_ms']
        rows.append(row)
  return rows


def format_rows(rows: Sequence[Dict]) -> str:
  """A markdown table of `measure`'s rows."""
  return '\n'.join(
      markdown.table(
          (
              'B x T | XLA | pass | slices ms | banded ms | slices / banded '
              '| max abs diff'
          ).split(' | '),
          [
              [
                  f'{row["batch_size"]} x {row["seq_length"]}',
                  'yes' if row['jit_compile'] else 'no',
                  'fwd+bwd' if row['backward'] else 'fwd',
                  f'{row["slices_ms"]:.3f}',
                  f'{row["banded_ms"]:.3f}',
                  f'{row["speedup"]:.2f}',
                  f'{row["max_abs_difference"]:.1e}',
              ]
              for row in rows
          ],
      )
  )


def format_summary(rows: Sequence[Dict]) -> str:
  """The range of slices / banded over the shapes, per mode and pass."""
  speedups = {}
  for row in rows:
    mode = ('XLA ' if row['jit_compile'] else '') + (
        'fwd+bwd' if row['backward'] else 'fwd'
    )
    speedups.setdefault(mode, []).append(row['speedup'])
  ranges = '; '.join(
      f'{mode} {min(values):.2f}-{max(values):.2f}'
      for mode, values in speedups.items()
  )
  return (
      f'Slices / banded over the shapes (above 1: banded is faster): '
      f'{ranges}.'
  )


def render_markdown(rows: Sequence[Dict], settings: Dict, header: str) -> str:
  """The report: provenance, load, settings, the table and its summary."""
  lines = [
      "# ConvBERT's k-tap span convolution: banded blocks against slices",
      '',
      header,
      '',
      provenance.load_line(settings['load_average_before']),
      '',
      f"N' = {settings['num_heads']} heads of H = {settings['head_size']}, "
      f'k = {settings["kernel_size"]}; milliseconds per call, the median '
      f'of {settings["iterations"]} calls after a tracing call, the two '
      'formulations alternating; load average (1 min) at the end '
      f'{settings["load_average_after"]:.2f}.',
      '',
      format_rows(rows),
      '',
      format_summary(rows),
  ]
  return '\n'.join(lines) + '\n'


def _parse_shapes(items: Sequence[str]) -> List[Tuple[int, int]]:
  shapes = []
  for item in items:
    try:
      batch_size, seq_length = (int(part) for part in item.split('x'))
    except ValueError as error:
      raise app.UsageError(
          f'--shapes item {item!r}: expected BxT, e.g. 8x128.'
      ) from error
    shapes.append((batch_size, seq_length))
  return shapes


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  load_before = provenance.load_average()
  rows = measure(
      _parse_shapes(FLAGS.shapes),
      FLAGS.num_heads,
      FLAGS.head_size,
      FLAGS.kernel_size,
      FLAGS.iterations,
  )
  settings = dict(
      num_heads=FLAGS.num_heads,
      head_size=FLAGS.head_size,
      kernel_size=FLAGS.kernel_size,
      iterations=FLAGS.iterations,
      load_average_before=load_before,
      load_average_after=provenance.load_average(),
  )
  header = provenance.provenance('experiments.investigations.span_conv_speed')
  markdown = render_markdown(rows, settings, header)
  if FLAGS.output_json:
    json_files.write_json(
        FLAGS.output_json,
        dict(provenance=header, **settings, rows=rows),
        sort_keys=False,
    )
  if FLAGS.output_markdown:
    json_files.write_text(FLAGS.output_markdown, markdown)
  print(markdown)


FLAGS = flags.FLAGS

if __name__ == '__main__':
  flags.DEFINE_list(
      'shapes',
      ['1x128', '1x512', '8x128', '8x512'],
      'Batch x sequence length pairs.',
  )
  flags.DEFINE_integer('num_heads', 6, "Convolution heads N' (base: 6).")
  flags.DEFINE_integer('head_size', 64, 'Head size H.')
  flags.DEFINE_integer('kernel_size', 9, 'Window k.')
  flags.DEFINE_integer('iterations', 30, 'Timed calls per formulation.')
  flags.DEFINE_string('output_markdown', None, 'Write the report here.')
  flags.DEFINE_string('output_json', None, 'Write the measurements here.')
  cli.run(main)
