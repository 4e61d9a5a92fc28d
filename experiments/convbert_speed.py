r"""002 (ConvBERT rebuttal) Table 2: FLOPs and CPU speed of one base block.

  python -m experiments.convbert_speed [--seq_lengths=128,256,512] \
      [--batch_size=1] [--iterations=20] [--warmup=3] [--xla] [--threads=0] \
      [--output_markdown=report.md] [--output_json=report.json]

The rebuttal states no sequence length or batch size, so this measures
several lengths and prints where our FLOPs formula reaches each paper figure.
Model Garden's `TransformerEncoderBlock` against our `ConvBertBlock`, same
GELU, initializer and input, in inference mode; the formula's matmul FLOPs
beside XLA's count of the compiled block's (a check that the formula describes
the code); median latency, the blocks timed alternately so background load
hits both alike. Reports: `experiments/reports/convbert_speed_cpu.md` and
`convbert_speed_cpu_xla.md`.
"""

import bisect
import dataclasses
import functools
import os
import platform
import statistics
import time
from typing import Any, Dict, List, Sequence, Tuple

from absl import flags
import tensorflow as tf
import tf_keras

from experiments import paper_tables
from experiments import provenance
from official_repro.common import cli
from official_repro.common import dataclass_flags
from official.modeling import tf_utils
from official.nlp.modeling import layers
from official_repro.common import json_files
from official_repro.common import markdown
from official_repro.metrics import flops
from official_repro.modeling import activations
from official_repro.modeling.layers import mixed_attention
from official_repro.modeling.networks.backbones import convbert

SELF_ATTENTION = 'self-attention'
MIXED_ATTENTION = 'mixed-attention'
BLOCKS = (SELF_ATTENTION, MIXED_ATTENTION)


def paper_figures() -> Dict[str, Tuple[float, float]]:
  """002 Table 2's (FLOPs, ms/sample) per block (its rows named as `BLOCKS`)."""
  table = paper_tables.load('002').table('2')
  return {
      name: (
          table.cell(name, 'Flops').value,
          table.cell(name, 'Speed (ms/sample)').value,
      )
      for name in BLOCKS
  }


_option = dataclass_flags.option


@dataclasses.dataclass(frozen=True)
class BlockSizes:
  """Sizes both blocks share, each a flag; N heads of size hidden / N."""

  hidden_size: int = _option(768, 'Hidden width (base: 768).')
  num_heads: int = _option(12, 'Configured attention heads N.')
  intermediate_size: int = _option(3072, 'Feed-forward width.')
  head_ratio: int = _option(
      2, "Mixed: N' = max(1, N // ratio) attention heads."
  )
  kernel_size: int = _option(9, 'Convolution window k.')
  num_groups: int = _option(1, 'Feed-forward groups G (mixed).')

  def shape(self, block: str, seq_length: int) -> flops.NetworkShape:
    """The one-block `NetworkShape` of `block` at `seq_length`."""
    terms = flops.BlockFlops()
    if block == MIXED_ATTENTION:
      terms = convbert.ConvBertFlops(
          head_ratio=self.head_ratio,
          kernel_size=self.kernel_size,
          groups=self.num_groups,
      )
    return flops.NetworkShape(
        hidden=self.hidden_size,
        layers=1,
        embedding=self.hidden_size,
        intermediate=self.intermediate_size,
        heads=self.num_heads,
        seq_length=seq_length,
        vocab_size=1,
        block=terms,
    )

  def sequence_flops(self, block: str, seq_length: int) -> float:
    """Forward FLOPs of one block on one sequence (the formula)."""
    return seq_length * flops.block_flops(self.shape(block, seq_length))


def build_block(sizes: BlockSizes, block: str) -> tf_keras.layers.Layer:
  """The Keras layer of `block` ('self-attention' or 'mixed-attention')."""
  initializer = tf_keras.initializers.TruncatedNormal(stddev=0.02)
  if block == SELF_ATTENTION:
    return layers.TransformerEncoderBlock(
        num_attention_heads=sizes.num_heads,
        inner_dim=sizes.intermediate_size,
        inner_activation=activations.gelu_erf,
        kernel_initializer=tf_utils.clone_initializer(initializer),
        name='self_attention',
    )
  if block == MIXED_ATTENTION:
    return mixed_attention.ConvBertBlock(
        hidden_size=sizes.hidden_size,
        num_attention_heads=sizes.num_heads,
        intermediate_size=sizes.intermediate_size,
        head_ratio=sizes.head_ratio,
        kernel_size=sizes.kernel_size,
        num_groups=sizes.num_groups,
        activation='gelu_erf',
        kernel_initializer=tf_utils.clone_initializer(initializer),
        name='mixed_attention',
    )
  raise ValueError(f'block must be one of {BLOCKS}, got {block!r}.')


def seq_length_for_flops(sizes: BlockSizes, block: str, target: float) -> int:
  """The smallest T at which `block`'s formula FLOPs reach `target`."""
  low, high = 1, 1
  while sizes.sequence_flops(block, high) < target:
    low, high = high, 2 * high
  return bisect.bisect_left(
      range(high + 1),
      target,
      lo=low,
      key=functools.partial(sizes.sequence_flops, block),
  )


def _forward(layer: tf_keras.layers.Layer):
  """`(inputs, mask) -> layer([inputs, mask])` in inference mode."""

  def forward(inputs, mask):
    return layer([inputs, mask], training=False)

  return forward


def _timed_call(function, *args) -> float:
  start = time.perf_counter()
  function(*args).numpy()
  return time.perf_counter() - start


def measure(
    sizes: BlockSizes,
    seq_lengths: Sequence[int],
    batch_size: int,
    iterations: int,
    warmup: int,
    jit_compile: bool,
    seed: int = 0,
) -> List[Dict[str, Any]]:
  """Both blocks at every length: `iterations` timed calls after `warmup`.

  Returns:
    One dict per (T, block): `seq_length`, `block`, `parameters`, `flops`,
    `matmul_flops`, `compiled_matmul_flops` (plus the banded k-tap
    contraction), `xla_matmul_flops` (all per sample), `ms_per_sample`
    (median) and `ms_per_sample_all`.

  Raises:
    ValueError: a batch size, iterations or length < 1, or warmup < 0.
  """
  if batch_size < 1 or iterations < 1 or warmup < 0:
    raise ValueError(
        f'batch_size and iterations must be >= 1 and warmup >= 0, got '
        f'batch_size={batch_size}, iterations={iterations}, warmup={warmup}.'
    )
  if not seq_lengths or min(seq_lengths) < 1:
    raise ValueError(f'seq_lengths must be positive, got {list(seq_lengths)}.')
  tf_keras.utils.set_random_seed(seed)
  blocks = {name: build_block(sizes, name) for name in BLOCKS}
  functions = {
      name: tf.function(_forward(layer), jit_compile=jit_compile)
      for name, layer in blocks.items()
  }
  rows = []
  for seq_length in seq_lengths:
    inputs = tf.random.normal(
        [batch_size, seq_length, sizes.hidden_size], seed=seed
    )
    mask = tf.ones([batch_size, seq_length, seq_length])
    seconds = _time_blocks(functions, inputs, mask, iterations, warmup)
    for name in BLOCKS:
      rows.append(_row(sizes, name, blocks[name], inputs, mask, seconds[name]))
  return rows


def _row(sizes: BlockSizes, name: str, block, inputs, mask, seconds):
  """`measure`'s row of one block at the inputs' length."""
  batch_size, seq_length = inputs.shape[0], inputs.shape[1]
  shape = sizes.shape(name, seq_length)
  xla_count = flops.xla_matmul_flops(_forward(block), inputs, mask)
  per_sample_ms = [1e3 * s / batch_size for s in seconds]
  return dict(
      seq_length=seq_length,
      block=name,
      parameters=flops.count_parameters(block.trainable_variables),
      flops=seq_length * flops.block_flops(shape),
      matmul_flops=seq_length * flops.matmul_flops(shape),
      compiled_matmul_flops=flops.compiled_matmul_flops(shape),
      xla_matmul_flops=xla_count / batch_size,
      ms_per_sample=statistics.median(per_sample_ms),
      ms_per_sample_all=per_sample_ms,
  )


def _time_blocks(functions, inputs, mask, iterations: int, warmup: int):
  """{block: seconds of each timed call}, the blocks in alternating order."""
  for name in BLOCKS:
    for _ in range(warmup + 1):
      functions[name](inputs, mask).numpy()
  seconds = {name: [] for name in BLOCKS}
  for iteration in range(iterations):
    order = BLOCKS if iteration % 2 == 0 else BLOCKS[::-1]
    for name in order:
      seconds[name].append(_timed_call(functions[name], inputs, mask))
  return seconds


def paper_matches(sizes: BlockSizes) -> Dict[str, Dict[str, float]]:
  """Per block: the T reaching the paper's FLOPs, both blocks' FLOPs there."""
  paper = paper_figures()
  result = {}
  for name in BLOCKS:
    seq_length = seq_length_for_flops(sizes, name, paper[name][0])
    result[name] = dict(
        seq_length=seq_length,
        **{
            f'{other}_flops': sizes.sequence_flops(other, seq_length)
            for other in BLOCKS
        },
    )
  return result


# A row's matrix-product FLOPs: the formula's, the compiled block's, XLA's.
_MATMUL_COUNTS = ('matmul_flops', 'compiled_matmul_flops', 'xla_matmul_flops')


def _ratio(rows: Dict[str, Dict[str, Any]], key: str) -> float:
  return rows[MIXED_ATTENTION][key] / rows[SELF_ATTENTION][key]


def format_table(rows: Sequence[Dict[str, Any]]) -> str:
  """The markdown table: both blocks and their ratio per sequence length."""
  header = (
      'T|block|params|GFLOPs (formula)|matmul GFLOPs (formula / compiled / '
      'XLA)|ms/sample (median)|paper GFLOPs|paper ms/sample'
  ).split('|')
  cells = []
  paper_values = paper_figures()
  paper = {
      name: dict(flops=flops_value, ms=ms)
      for name, (flops_value, ms) in paper_values.items()
  }
  by_length = {}
  for row in rows:
    by_length.setdefault(row['seq_length'], {})[row['block']] = row
  for seq_length, pair in by_length.items():
    for name in BLOCKS:
      row = pair[name]
      paper_flops, paper_ms = paper_values[name]
      cells.append(
          [seq_length, name, f'{row["parameters"] / 1e6:.3f}M']
          + [f'{row["flops"] / 1e9:.4g}']
          + [' / '.join(f'{row[key] / 1e9:.4g}' for key in _MATMUL_COUNTS)]
          + [f'{row["ms_per_sample"]:.3f}', f'{paper_flops / 1e9:.1f}']
          + [f'{paper_ms:.2f}']
      )
    cells.append(
        [seq_length, 'mixed / self']
        + [f'{_ratio(pair, key):.3f}' for key in ('parameters', 'flops')]
        + [' / '.join(f'{_ratio(pair, key):.3f}' for key in _MATMUL_COUNTS)]
        + [f'{_ratio(pair, "ms_per_sample"):.3f}']
        + [f'{_ratio(paper, key):.3f}' for key in ('flops', 'ms')]
    )
  return '\n'.join(markdown.table(header, cells))


def format_matches(matches: Dict[str, Dict[str, float]]) -> str:
  """Where the formula meets each of the paper's FLOPs figures."""
  paper = paper_figures()
  paper_ratio = paper[MIXED_ATTENTION][0] / paper[SELF_ATTENTION][0]
  lines = []
  for name, match in matches.items():
    self_flops = match[SELF_ATTENTION + '_flops']
    mixed_flops = match[MIXED_ATTENTION + '_flops']
    lines.append(
        f"The formula reaches the paper's {name} {paper[name][0] / 1e9:.1f}G "
        f'at T={match["seq_length"]}; there self-attention costs '
        f'{self_flops / 1e9:.2f}G and mixed attention {mixed_flops / 1e9:.2f}G '
        f'(ratio {mixed_flops / self_flops:.3f}; paper {paper_ratio:.3f}).'
    )
  return '\n'.join(lines)


def render_markdown(
    rows: Sequence[Dict[str, Any]],
    matches: Dict[str, Dict[str, float]],
    settings: Dict[str, Any],
    header: str,
) -> str:
  """The report: provenance `header`, load, settings, table and matches."""
  threads = settings['threads'] or 'TensorFlow default'
  lines = [
      '# 002 Table 2: a self-attention block against a mixed-attention block',
      '',
      header,
      '',
      provenance.load_line(settings['load_average_before']),
      '',
      f'{settings["cpu"]} ({settings["cpu_count"]} logical CPUs); batch '
      f'{settings["batch_size"]}; {"XLA" if settings["xla"] else "no XLA"}; '
      f'threads: {threads}; {settings["iterations"]} timed iterations after '
      f'{settings["warmup"]} warmup; load average (1 min) at the end '
      f'{settings["load_average_after"]:.2f}. Per sample: FLOPs of the '
      "formula (ELECTRA's conventions, forward only), its matrix products "
      "beside the compiled block's (formula plus the banded k-tap "
      "contraction) and XLA's count of them, and the median latency.",
      '',
      format_table(rows),
      '',
      format_matches(matches),
  ]
  return '\n'.join(lines) + '\n'


def _cpu_name() -> str:
  try:
    with tf.io.gfile.GFile('/proc/cpuinfo') as f:
      for line in f:
        if line.startswith('model name'):
          return line.split(':', 1)[1].strip()
  except (OSError, tf.errors.OpError):
    pass
  return platform.processor() or 'unknown CPU'


def _settings(flag_values, sizes: BlockSizes, load_before, load_after):
  """What the report says the measurement ran under."""
  return dict(
      sizes=dataclasses.asdict(sizes),
      batch_size=flag_values.batch_size,
      iterations=flag_values.iterations,
      warmup=flag_values.warmup,
      xla=flag_values.xla,
      threads=flag_values.threads,
      cpu=_cpu_name(),
      cpu_count=os.cpu_count(),
      tensorflow=tf.__version__,
      load_average_before=load_before,
      load_average_after=load_after,
  )


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  flag_values = flags.FLAGS
  if flag_values.threads:
    tf.config.threading.set_intra_op_parallelism_threads(flag_values.threads)
    tf.config.threading.set_inter_op_parallelism_threads(flag_values.threads)
  sizes = dataclass_flags.from_flags(BlockSizes)
  seq_lengths = [int(value) for value in flag_values.seq_lengths]
  load_before = provenance.load_average()
  rows = measure(
      sizes,
      seq_lengths,
      flag_values.batch_size,
      flag_values.iterations,
      flag_values.warmup,
      flag_values.xla,
      seed=flag_values.seed,
  )
  settings = _settings(
      flag_values, sizes, load_before, provenance.load_average()
  )
  matches = paper_matches(sizes)
  header = provenance.provenance('experiments.convbert_speed')
  text = render_markdown(rows, matches, settings, header)
  if flag_values.output_json:
    json_files.write_json(
        flag_values.output_json,
        dict(
            provenance=header,
            settings=settings,
            rows=rows,
            paper_matches=matches,
            paper={
                name: dict(flops=value[0], ms_per_sample=value[1])
                for name, value in paper_figures().items()
            },
        ),
        sort_keys=False,
    )
  if flag_values.output_markdown:
    json_files.write_text(flag_values.output_markdown, text)
  print(text)


def define_flags():
  """Defines the CLI's flags (on demand: importing this module defines none)."""
  dataclass_flags.define_flags(BlockSizes)
  flags.DEFINE_integer('batch_size', 1, 'Sequences per call.')
  flags.DEFINE_list(
      'seq_lengths',
      ['128', '256', '512'],
      'Sequence lengths to measure (002 does not state its own).',
  )
  flags.DEFINE_integer('iterations', 20, 'Timed calls per block and length.')
  flags.DEFINE_integer('warmup', 3, 'Untimed calls before timing.')
  flags.DEFINE_boolean('xla', False, 'Time the blocks compiled with XLA.')
  flags.DEFINE_integer(
      'threads', 0, 'Intra- and inter-op threads (0: TensorFlow default).'
  )
  flags.DEFINE_integer('seed', 0, 'Seed of the input and the weights.')
  flags.DEFINE_string('output_markdown', None, 'Write the report here.')
  flags.DEFINE_string('output_json', None, 'Write the measurements here.')


if __name__ == '__main__':
  define_flags()
  cli.run(main)
