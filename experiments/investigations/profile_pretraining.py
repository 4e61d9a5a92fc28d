r"""Per-op time breakdown of pretraining steps, ours beside Model Garden's.

  python -m experiments.investigations.profile_pretraining \
    --gin_file=gin/papers/001_ale/electra_small.gin \
    --gin_param=pretrain_data.train_batch_size=32 \
    --gin_param=electra.temperature=1.0 \
    --gin_param=electra.tie_embedding_block=False \
    --vocab_file=../shared/data/vocab/bert_uncased_vocab.txt \
    --steps=5 --output_dir=/tmp/profile_electra_small

Builds each variant's trainer as `experiments.benchmark_pretraining` does, in
its own subprocess, and traces `--steps` steps after warm-up. The XSpace is read
directly: host op events `<op name>:<op type>` are summed per op type, category
and op, per step (shares are of op time, over threads). A trace with device
planes is refused (use TensorBoard's profiler there). Writes
`<output_dir>/<variant>.json` and `<output_dir>/profile.md`.
"""

import collections
import os
import re
import tempfile
import time
from typing import Dict, Iterable, Sequence, Tuple

from absl import flags
from absl import logging
import tensorflow as tf
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=g-direct-tensorflow-import

from official_repro.common import cli
from official_repro.common import json_files
from official_repro.common import markdown
from experiments import benchmark_pretraining
from experiments import commands

FLAGS = flags.FLAGS

# Op type (oneDNN's `_Mkl` prefix and `_Fused` variants stripped first) ->
# category; types not listed are 'element-wise'.
_CATEGORY_PATTERNS = (
    (
        'matmul',
        r'^(MatMul|BatchMatMul.*|Einsum|Conv.*|DepthwiseConv.*|'
        r'FusedMatMul)$',
    ),
    (
        'softmax and cross-entropy',
        r'^(Softmax|LogSoftmax|.*SoftmaxCrossEntropyWithLogits)$',
    ),
    (
        'gather and scatter',
        r'^(GatherV2|ResourceGather|GatherNd|'
        r'UnsortedSegmentSum|.*Scatter.*|'
        r'SparseSegment.*|OneHot)$',
    ),
    ('random', r'^(Random.*|Stateless.*|Multinomial|Truncated.*)$'),
    (
        'reduction',
        r'^(Sum|Mean|Max|Min|Prod|ArgMax|ArgMin|All|Any|'
        r'SquaredDifference|L2Loss)$',
    ),
    (
        'layout',
        r'^(Transpose|Reshape|ConcatV2|Concat|Pad|PadV2|Slice|'
        r'StridedSlice|StridedSliceGrad|Tile|Pack|Unpack|Split|'
        r'SplitV|ExpandDims|Squeeze|Identity|BroadcastTo|'
        r'Select|SelectV2|Fill|ZerosLike|OnesLike|Range|Shape|'
        r'Cast|Where|TensorListFromTensor|TensorListStack)$',
    ),
    (
        'input pipeline',
        r'^(IteratorGetNext.*|.*Dataset.*|MultiDeviceIterator.*)$',
    ),
    (
        'variables',
        r'^(ReadVariableOp|AssignVariableOp|AssignAddVariableOp|'
        r'AssignSubVariableOp|VarHandleOp|VarIsInitializedOp)$',
    ),
)
# Ops under these name scopes are the optimizer's update, whatever their
# type (Model Garden's LAMB and AdamW are written as element-wise ops).
_OPTIMIZER_SCOPES = re.compile(
    r'(^|/)(LAMB|Lamb|lamb|AdamWeightDecay|Adam|adam|AdamW|adamw|'
    r'clip_by_global_norm|global_norm)(/|_|$)'
)
CATEGORIES = tuple(name for name, _ in _CATEGORY_PATTERNS) + (
    'optimizer',
    'element-wise',
)


def base_op_type(op_type: str) -> str:
  """`_MklMatMul` -> `MatMul`, `_MklFusedMatMul` -> `FusedMatMul`."""
  for prefix in ('_MklNative', '_Mkl', '_'):
    if op_type.startswith(prefix):
      return op_type[len(prefix) :]
  return op_type


def type_category(op_type: str) -> str:
  """The category of an op type (see the module doc)."""
  base = base_op_type(op_type)
  for name, pattern in _CATEGORY_PATTERNS:
    if re.match(pattern, base):
      return name
  return 'element-wise'


def category(op_name: str, op_type: str) -> str:
  """'optimizer' under an optimizer's name scope, else the op type's."""
  if _OPTIMIZER_SCOPES.search(op_name):
    return 'optimizer'
  return type_category(op_type)


def op_events(space: xplane_pb2.XSpace) -> Iterable[Tuple[str, str, int]]:
  """(op name, op type, ps) of each host op event named `<name>:<type>`."""
  for plane in space.planes:
    if plane.name.startswith('/device:') and plane.lines:
      raise ValueError(
          f'The trace has device plane {plane.name!r}: host op times would be '
          'kernel launches there, not kernel times.'
      )
    if not plane.name.startswith('/host:'):
      continue
    for line in plane.lines:
      for event in line.events:
        name = plane.event_metadata[event.metadata_id].name
        if '::' in name or ':' not in name:
          continue
        op_name, op_type = name.rsplit(':', 1)
        if not op_type or not op_type[0].isalpha() and op_type[0] != '_':
          continue
        yield op_name, op_type, event.duration_ps


def training_pass(op_name: str) -> str:
  """'optimizer' (its scopes), 'backward' (gradient tape) or 'forward'."""
  if _OPTIMIZER_SCOPES.search(op_name):
    return 'optimizer'
  if 'gradient_tape/' in op_name:
    return 'backward'
  return 'forward'


def summarize(events: Iterable[Tuple[str, str, int]], steps: int) -> Dict:
  """Milliseconds per step per op type, category and op name.

  Returns:
    `op_ms_per_step`, and `by_pass`, `by_category`, `by_type`, `by_op`:
    lists of `{name, category, ms_per_step, share, calls_per_step}`, largest
    first.
  """
  by_type, by_op, by_category, by_pass = (
      collections.defaultdict(lambda: [0, 0]) for _ in range(4)
  )
  for op_name, op_type, duration in events:
    op_category = category(op_name, op_type)
    for table, key in (
        (by_type, (base_op_type(op_type), type_category(op_type))),
        (by_op, (op_name, op_category)),
        (by_category, (op_category, op_category)),
        (by_pass, (training_pass(op_name), '')),
    ):
      table[key][0] += duration
      table[key][1] += 1
  total_ps = sum(duration for duration, _ in by_category.values())

  def rows(table):
    return [
        dict(
            name=name,
            category=cat,
            ms_per_step=ps / 1e9 / steps,
            share=ps / total_ps if total_ps else 0.0,
            calls_per_step=calls / steps,
        )
        for (name, cat), (ps, calls) in sorted(
            table.items(), key=lambda item: -item[1][0]
        )
    ]

  return dict(
      op_ms_per_step=total_ps / 1e9 / steps,
      by_pass=rows(by_pass),
      by_category=rows(by_category),
      by_type=rows(by_type),
      by_op=rows(by_op),
  )


def read_xspace(logdir: str) -> xplane_pb2.XSpace:
  """The newest `*.xplane.pb` under `logdir`."""
  paths = sorted(
      tf.io.gfile.glob(
          os.path.join(logdir, 'plugins', 'profile', '*', '*.xplane.pb')
      )
  )
  if not paths:
    raise FileNotFoundError(f'No *.xplane.pb under {logdir}/plugins/profile.')
  space = xplane_pb2.XSpace()
  with tf.io.gfile.GFile(paths[-1], 'rb') as f:
    space.ParseFromString(f.read())
  return space


def profile_variant(variant: str, logdir: str) -> Dict:
  """Traces `--steps` steps of one variant's trainer and summarizes them."""
  trainer, _, _ = benchmark_pretraining.build_trainer(variant)
  trainer.train(tf.constant(1, tf.int32))
  if FLAGS.warmup_steps:
    trainer.train(tf.constant(FLAGS.warmup_steps, tf.int32))
  tf.profiler.experimental.start(logdir)
  start = time.perf_counter()
  trainer.train(tf.constant(FLAGS.steps, tf.int32))
  seconds = time.perf_counter() - start
  tf.profiler.experimental.stop()
  summary = summarize(op_events(read_xspace(logdir)), FLAGS.steps)
  train_data = trainer.config.task.train_data
  summary.update(
      variant=variant,
      steps=FLAGS.steps,
      step_ms=1e3 * seconds / FLAGS.steps,
      batch_size=train_data.global_batch_size,
  )
  return summary


def _run_isolated(variant: str, output_dir: str) -> Dict:
  """`profile_variant`'s summary of `variant`, profiled in a subprocess."""
  path = os.path.join(output_dir, f'{variant}.json')
  commands.run_module(
      'experiments.investigations.profile_pretraining',
      [
          f'--profile_variant={variant}',
          f'--output_dir={output_dir}',
          *benchmark_pretraining.configuration_args(),
      ],
  )
  return json_files.read_json(path)


def format_report(summaries: Sequence[Dict], top: int) -> str:
  """Markdown: step time, passes, categories and top op types side by side."""
  names = [s['variant'] for s in summaries]
  shares = [f'{n} ms/step (share)' for n in names]

  def cells(table, name):
    found = [
        next((r for r in s[table] if r['name'] == name), None)
        for s in summaries
    ]
    return [
        f'{r["ms_per_step"]:.2f} ({100 * r["share"]:.1f}%)' if r else '-'
        for r in found
    ]

  present = {r['name'] for s in summaries for r in s['by_category']}
  lines = [
      *markdown.table(
          ['', *names],
          [
              ['step ms (wall)', *(f'{s["step_ms"]:.1f}' for s in summaries)],
              [
                  'op ms per step (summed over threads)',
                  *(f'{s["op_ms_per_step"]:.1f}' for s in summaries),
              ],
          ],
      ),
      '',
      *markdown.table(
          ['pass', *shares],
          [
              [name, *cells('by_pass', name)]
              for name in ('forward', 'backward', 'optimizer')
          ],
      ),
      '',
      *markdown.table(
          ['category', *shares],
          [
              [name, *cells('by_category', name)]
              for name in CATEGORIES
              if name in present
          ],
      ),
      '',
      f'Top {top} op types by time in {names[0]}:',
      '',
      *markdown.table(
          ['op type', 'category', *shares],
          [
              [row['name'], row['category'], *cells('by_type', row['name'])]
              for row in summaries[0]['by_type'][:top]
          ],
      ),
  ]
  return '\n'.join(lines)


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  logging.set_verbosity(logging.WARNING)
  tf.io.gfile.makedirs(FLAGS.output_dir)
  if FLAGS.profile_variant:
    with tempfile.TemporaryDirectory() as logdir:
      summary = profile_variant(FLAGS.profile_variant, logdir)
    json_files.write_json(
        os.path.join(FLAGS.output_dir, f'{FLAGS.profile_variant}.json'),
        summary,
        sort_keys=False,
    )
    return
  summaries = [
      _run_isolated(variant, FLAGS.output_dir) for variant in FLAGS.variants
  ]
  report = (
      f'gin: {" ".join(FLAGS.gin_file)} '
      f'{" ".join(FLAGS.gin_param)}; {FLAGS.steps} traced steps after '
      f'{FLAGS.warmup_steps} warm-up steps.\n\n'
      + format_report(summaries, FLAGS.top)
  )
  json_files.write_text(
      os.path.join(FLAGS.output_dir, 'profile.md'), report + '\n'
  )
  print(report)


if __name__ == '__main__':
  benchmark_pretraining.define_flags()
  flags.DEFINE_string('output_dir', None, 'Where the JSON and report go.')
  flags.DEFINE_integer('top', 25, 'Op types listed in the report.')
  flags.DEFINE_string(
      'profile_variant',
      None,
      'Profile this one variant in this process (used by '
      'the parent process for isolation).',
  )
  cli.require_flags('output_dir')
  cli.run(main)
