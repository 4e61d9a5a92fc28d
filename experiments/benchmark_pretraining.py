r"""Pretraining throughput of our task against Model Garden's stock task.

  python -m experiments.benchmark_pretraining \
    --gin_file=gin/papers/001_ale/bert_small.gin \
    --gin_param=pretrain_data.train_batch_size=32 --steps=20
  python -m experiments.benchmark_pretraining --sweep \
    --gin_file=gin/papers/001_ale/electra_small.gin --steps=10 \
    --gin_param=electra.tie_embedding_block=False \
    --output_json=/tmp/sweep.json --output_png=/tmp/sweep.png

Per variant: first-step time, steps/s, examples/s, tokens/s, peak memory and
model FLOPs utilisation (3 x profiled forward FLOPs over a measured matmul
peak). `ours` is our task and trainer; `stock` Model Garden's task for the
objective (`Objective.stock_task_config`) on the same model and statically
masked records. Each variant runs in its own subprocess so memory and
compilation caches do not leak. `--sweep` measures over batch sizes and
sequence lengths, writing `--output_json` and a plot.
"""

import functools
import hashlib
import json
import os
import resource
import time
from typing import Dict, List, Optional, Sequence, Tuple

from absl import app
from absl import flags
from absl import logging
import gin
import tensorflow as tf
import tf_keras

from official.core import base_trainer
from official.core import config_definitions as cfg
from official.core import task_factory
from official.core import train_utils
from official.nlp.data import pretrain_dataloader as stock_dataloader
from experiments import commands
from experiments.regeneration import report
from official_repro.common import cli
from official_repro.common import json_files
from official_repro.common import markdown
from official_repro.data import builtin_corpus
from official_repro.data import create_pretraining_data
from official_repro.data import masking as masking_lib
from official_repro.data import pretrain_dataloader
from official_repro.data import records
from official_repro.metrics import flops as flops_lib
from official_repro.tasks import objectives
from official_repro.training import experiment
from official_repro.training import gin_utils
from official_repro.training import precision
from official_repro.training import trainer as trainer_lib

FLAGS = flags.FLAGS


def define_flags() -> None:
  """Defines this script's flags (profile_pretraining's too), on demand."""
  flags.DEFINE_multi_string('gin_file', [], 'Gin files of the configuration.')
  flags.DEFINE_multi_string('gin_param', [], 'Extra gin bindings.')
  flags.DEFINE_list('variants', ['ours', 'stock'], 'Variants to measure.')
  flags.DEFINE_integer('steps', 20, 'Timed steps per variant.')
  precision.define_flags()
  flags.DEFINE_integer('warmup_steps', 3, 'Untimed steps after the first.')
  flags.DEFINE_string(
      'work_dir',
      '/tmp/official_repro_benchmark',
      'Where records are built (reused when present).',
  )
  flags.DEFINE_string(
      'corpus', None, 'Text corpus for the records (default: built-in).'
  )
  flags.DEFINE_string(
      'vocab_file',
      None,
      'WordPiece vocab (default: learn --vocab_size tokens).',
  )
  flags.DEFINE_integer('vocab_size', 8000, 'Size of a learned vocab.')
  flags.DEFINE_string('output_json', None, 'Also write the results here.')
  flags.DEFINE_boolean(
      'sweep',
      False,
      'Measure every variant over --sweep_batch_sizes and '
      '--sweep_seq_lengths instead of the configuration once.',
  )
  flags.DEFINE_list(
      'sweep_batch_sizes',
      ['8', '16', '32', '64', '128'],
      'Sweep: batch sizes, at the configured sequence length.',
  )
  flags.DEFINE_list(
      'sweep_seq_lengths',
      ['128', '256', '512'],
      'Sweep: sequence lengths, at --sweep_batch_size.',
  )
  flags.DEFINE_integer(
      'sweep_batch_size',
      16,
      'Sweep: the batch size of the sequence-length sweep.',
  )
  flags.DEFINE_string(
      'output_png', None, 'Sweep: the plot (default: --output_json with .png).'
  )
  flags.DEFINE_string(
      'run_variant',
      None,
      'Measure this one variant in this process and print its '
      'JSON (used by the parent process for isolation).',
  )


def matmul_peak_flops(n: int = 2048, repeats: int = 10) -> float:
  """Measured dense-matmul FLOP/s (float32 on CPU, bfloat16 on GPU)."""
  dtype = tf.bfloat16 if tf.config.list_physical_devices('GPU') else tf.float32
  a = tf.random.normal([n, n], dtype=tf.float32)
  a = tf.cast(a, dtype)

  @tf.function
  def chain(x):
    for _ in range(repeats):
      x = tf.matmul(x, a) * tf.cast(1.0 / n**0.5, dtype)
    return tf.reduce_sum(tf.cast(x, tf.float32))

  chain(a).numpy()
  best = float('inf')
  for _ in range(3):
    start = time.perf_counter()
    chain(a).numpy()
    best = min(best, time.perf_counter() - start)
  return 2.0 * n**3 * repeats / best


def records_text_key(
    corpus: str, vocab_file: Optional[str], vocab_size: int
) -> str:
  """8 hex digits naming the records' text and vocabulary.

  Reused records are then never another corpus's or vocabulary's.
  """
  vocab = (
      os.path.abspath(vocab_file)
      if vocab_file and '://' not in vocab_file
      else vocab_file
  ) or f'learned:{vocab_size}'
  if '://' not in corpus:
    corpus = os.path.abspath(corpus)
  return hashlib.sha256(f'{corpus}\n{vocab}'.encode()).hexdigest()[:8]


def _record_dirs(seq_length: int, max_predictions: int) -> dict:
  """Builds (or reuses) static and dynamic records of the same text."""
  corpus = FLAGS.corpus
  if corpus is None:
    corpus_dir = os.path.join(FLAGS.work_dir, 'builtin_corpus')
    if not tf.io.gfile.exists(corpus_dir):
      builtin_corpus.write_builtin_corpus(corpus_dir)
    corpus = corpus_dir
  dirs = {}
  text_key = records_text_key(corpus, FLAGS.vocab_file, FLAGS.vocab_size)
  for mode in ('static', 'dynamic'):
    output_dir = os.path.join(
        FLAGS.work_dir,
        f'records_{mode}_len{seq_length}_p{max_predictions}_{text_key}',
    )
    if not tf.io.gfile.exists(
        os.path.join(output_dir, records.METADATA_FILENAME)
    ):
      if FLAGS.vocab_file or dirs:
        vocab = dict(vocab_file=FLAGS.vocab_file or _shared_vocab(dirs))
      else:
        vocab = dict(vocab_size=FLAGS.vocab_size)
      create_pretraining_data.prepare_pretraining_data(
          [corpus],
          output_dir,
          max_seq_length=seq_length,
          masking=mode,
          max_predictions_per_seq=max_predictions,
          **vocab,
      )
    dirs[mode] = output_dir
  return dirs


def _shared_vocab(dirs: dict) -> str:
  """The vocabulary learned for the first record set built."""
  first = next(iter(dirs.values()))
  return os.path.join(first, records.VOCAB_FILENAME)


def _record_shape() -> Tuple[int, int]:
  """(sequence length, masked positions per sequence) of the parsed gin."""
  seq_length = gin.query_parameter('pretrain_data.max_seq_length')
  mask_rate = _mask_rate()
  max_predictions = _query_or(
      'pretrain_data.max_predictions_per_seq', None
  ) or (masking_lib.default_max_predictions(seq_length, mask_rate))
  return seq_length, max_predictions


def _mask_rate() -> float:
  """The parsed gin's mask rate (the data config's default when unbound)."""
  default = pretrain_dataloader.PretrainDataConfig().mask_rate
  return _query_or('pretrain_data.mask_rate', default)


def _configure() -> tuple:
  """Parses the gin flags onto the records; (params, settings, dirs, P)."""
  gin_utils.parse_config(FLAGS.gin_file, FLAGS.gin_param)
  seq_length, max_predictions = _record_shape()
  dirs = _record_dirs(seq_length, max_predictions)
  masking = _query_or(
      'pretrain_data.masking', pretrain_dataloader.PretrainDataConfig().masking
  )
  with gin.unlock_config():
    gin.bind_parameter('pretrain_data.input_path', dirs[masking])
    gin.bind_parameter('pretrain_data.max_predictions_per_seq', max_predictions)
    gin.bind_parameter('experiment.steps_per_loop', 1)
    gin.bind_parameter('experiment.checkpoint_interval', 1)
    params, settings = experiment.experiment_config()
  return params, settings, dirs, max_predictions


def _query_or(name, default):
  """The gin parameter `name`'s value, or `default` when it is not bound."""
  try:
    return gin.query_parameter(name)
  except ValueError:
    return default


def stock_params(
    params: cfg.ExperimentConfig,
    static_dir: str,
    max_predictions: int,
    seed: Optional[int] = None,
    shuffle_buffer_size: Optional[int] = None,
) -> cfg.ExperimentConfig:
  """`params` with Model Garden's task reading `static_dir`'s training split.

  `max_predictions` are the records' masked positions per sequence; `seed`
  and `shuffle_buffer_size` set Model Garden's input pipeline (None: its
  defaults). ValueError when the objective has no Model Garden counterpart.
  """
  metadata = records.load_metadata(static_dir)
  ours = params.task.train_data
  train_data = stock_dataloader.BertPretrainDataConfig(
      input_path=','.join(
          os.path.join(static_dir, name)
          for name in metadata['splits']['train']['files']
      ),
      seq_length=ours.max_seq_length,
      max_predictions_per_seq=max_predictions,
      global_batch_size=ours.global_batch_size,
      use_next_sentence_label=ours.use_next_sentence_label,
      is_training=True,
      seed=seed,
  )
  if shuffle_buffer_size is not None:
    train_data = train_data.replace(shuffle_buffer_size=shuffle_buffer_size)
  objective = objectives.for_task_config(params.task)
  if objective.stock_task_config is None:
    raise ValueError(
        f'Objective {objective.name!r} has no Model Garden '
        'counterpart; measure it with --variants=ours.'
    )
  task = objective.stock_task_config(params.task, train_data, max_predictions)
  return cfg.ExperimentConfig(
      task=task, trainer=params.trainer, runtime=params.runtime
  )


def build_trainer(variant: str) -> tuple:
  """(trainer, settings, masked positions) of one variant from the gin flags.

  In --mixed_precision's resolved precision, seeded by `experiment.seed`.
  """
  params, settings, dirs, max_predictions = _configure()
  dtype = precision.resolve(FLAGS.mixed_precision, tf.distribute.get_strategy())
  params.runtime = precision.runtime_config(dtype)
  if settings.seed is not None:
    tf_keras.utils.set_random_seed(settings.seed)
  if variant == 'stock':
    params = stock_params(params, dirs['static'], max_predictions)
    trainer_cls = base_trainer.Trainer
  else:
    trainer_cls = functools.partial(
        trainer_lib.Trainer, jit_compile=settings.jit_compile
    )

  task = task_factory.get_task(params.task)
  with precision.policy(dtype):
    trainer = train_utils.create_trainer(
        params, task, train=True, evaluate=False, trainer_cls=trainer_cls
    )
  return trainer, settings, max_predictions


def measure_variant(variant: str) -> dict:
  """Builds one variant's trainer and times its steps."""
  trainer, settings, max_predictions = build_trainer(variant)
  batch_size = trainer.config.task.train_data.global_batch_size
  seq_length = _seq_length(trainer.config.task.train_data)

  start = time.perf_counter()
  first_logs = trainer.train(tf.constant(1, tf.int32))
  first_step_seconds = time.perf_counter() - start
  first_loss = float(first_logs['training_loss'])
  trainer.train(tf.constant(FLAGS.warmup_steps, tf.int32))
  start = time.perf_counter()
  trainer.train(tf.constant(FLAGS.steps, tf.int32))
  seconds = time.perf_counter() - start

  forward = flops_lib.profiled_forward_flops(
      trainer.model,
      flops_lib.pretraining_input_specs(seq_length, max_predictions),
  )
  result = dict(
      variant=variant,
      jit_compile=bool(settings.jit_compile and variant == 'ours'),
      mixed_precision=trainer.config.runtime.mixed_precision_dtype or 'float32',
      first_step_loss=first_loss,
      batch_size=batch_size,
      seq_length=seq_length,
      first_step_seconds=first_step_seconds,
      steps_per_second=FLAGS.steps / seconds,
      examples_per_second=FLAGS.steps * batch_size / seconds,
      tokens_per_second=FLAGS.steps * batch_size * seq_length / seconds,
      train_flops_per_step=3.0 * forward * batch_size,
      peak_host_memory_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
      / 1024.0,
      num_params=int(
          sum(v.shape.num_elements() for v in trainer.model.trainable_variables)
      ),
  )
  if tf.config.list_physical_devices('GPU'):
    result['peak_gpu_memory_mb'] = (
        tf.config.experimental.get_memory_info('GPU:0')['peak'] / 2**20
    )
  return result


def _seq_length(train_data) -> int:
  """Sequence length of our data config or the stock one."""
  return getattr(train_data, 'max_seq_length', None) or train_data.seq_length


def prepare_records(extra_bindings: Sequence[str] = ()) -> None:
  """Builds the records here, so a child's peak memory is its training's."""
  gin_utils.parse_config(FLAGS.gin_file, [*FLAGS.gin_param, *extra_bindings])
  seq_length, max_predictions = _record_shape()
  gin.clear_config()
  _record_dirs(seq_length, max_predictions)


def _run_isolated(variant: str, extra_bindings: Sequence[str] = ()) -> dict:
  """`variant` measured in a subprocess (configuration + `extra_bindings`)."""
  stdout = commands.run_module(
      'experiments.benchmark_pretraining',
      [f'--run_variant={variant}', *configuration_args(extra_bindings)],
      stdout_only=True,
  )
  return json.loads(stdout.strip().splitlines()[-1])


def configuration_args(extra_bindings: Sequence[str] = ()) -> List[str]:
  """This process's configuration flags for a child, then `extra_bindings`."""
  args = [
      f'--steps={FLAGS.steps}',
      f'--warmup_steps={FLAGS.warmup_steps}',
      f'--work_dir={FLAGS.work_dir}',
      f'--vocab_size={FLAGS.vocab_size}',
      f'--mixed_precision={FLAGS.mixed_precision}',
      *(f'--gin_file={f}' for f in FLAGS.gin_file),
      *(f'--gin_param={p}' for p in (*FLAGS.gin_param, *extra_bindings)),
  ]
  if FLAGS.corpus:
    args.append(f'--corpus={FLAGS.corpus}')
  if FLAGS.vocab_file:
    args.append(f'--vocab_file={FLAGS.vocab_file}')
  return args


def _mfu_percent(result: Dict, peak: float) -> float:
  """A measured result's model FLOPs utilisation of the matmul `peak`."""
  return (
      100.0 * result['train_flops_per_step'] * result['steps_per_second'] / peak
  )


def _print_table(results: list, peak: float) -> None:
  """Prints the matmul peak and the results' table (adds `mfu_percent`)."""
  print(f'matmul peak: {peak / 1e9:.1f} GFLOP/s')
  header = (
      'variant | xla | precision | first step s | first loss | steps/s | '
      'examples/s | tokens/s | MFU % | peak RSS MB'
  ).split(' | ')
  rows = []
  for r in results:
    mfu = r['mfu_percent'] = _mfu_percent(r, peak)
    rows.append(
        [r['variant'], r['jit_compile'], r['mixed_precision']]
        + [f'{r["first_step_seconds"]:.1f}', f'{r["first_step_loss"]:.5f}']
        + [f'{r["steps_per_second"]:.3f}', f'{r["examples_per_second"]:.1f}']
        + [f'{r["tokens_per_second"]:.0f}', f'{mfu:.1f}']
        + [f'{r["peak_host_memory_mb"]:.0f}']
    )
  print('\n'.join(markdown.table(header, rows)))
  rate = {r['variant']: r['examples_per_second'] for r in results}
  if 'ours' in rate and 'stock' in rate:
    print(f'ours / stock examples/s: {rate["ours"] / rate["stock"]:.3f}')


def sweep_points(
    seq_length: int,
    batch_sizes: Sequence[int],
    seq_lengths: Sequence[int],
    length_batch_size: int,
) -> List[Dict]:
  """`{axis, batch_size, seq_length}`: batches at `seq_length`, then lengths.

  The lengths at `length_batch_size`.
  """
  points = [
      dict(axis='batch_size', batch_size=batch, seq_length=seq_length)
      for batch in batch_sizes
  ]
  points += [
      dict(axis='seq_length', batch_size=length_batch_size, seq_length=length)
      for length in seq_lengths
  ]
  return points


def point_bindings(
    point: Dict,
    configured_seq_length: int,
    mask_rate: float,
    max_positions: int,
) -> List[str]:
  """Gin bindings of one sweep point: batch, length, masks, positions."""
  bindings = [
      f'pretrain_data.train_batch_size = {point["batch_size"]}',
      f'pretrain_data.max_seq_length = {point["seq_length"]}',
  ]
  if point['seq_length'] != configured_seq_length:
    bindings.append(
        'pretrain_data.max_predictions_per_seq = '
        f'{masking_lib.default_max_predictions(point["seq_length"], mask_rate)}'
    )
  if point['seq_length'] > max_positions:
    bindings.append(f'encoder.max_position_embeddings = {point["seq_length"]}')
  return bindings


def run_sweep(
    gin_files: Sequence[str],
    gin_params: Sequence[str],
    variants: Sequence[str],
    batch_sizes: Sequence[int],
    seq_lengths: Sequence[int],
    length_batch_size: int,
    measure=None,
) -> Dict:
  """Measures every variant at every sweep point.

  `measure(variant, extra_bindings) -> result` defaults to a subprocess
  (`_run_isolated`) after the point's records are built here.

  Returns:
    {matmul_peak_flops, points: [point + {variant: result}], variants,
    gin_files, gin_params}.
  """
  gin_utils.parse_config(gin_files, gin_params)
  seq_length = gin.query_parameter('pretrain_data.max_seq_length')
  mask_rate = _mask_rate()
  max_positions = _query_or('encoder.max_position_embeddings', 512)
  gin.clear_config()
  points = sweep_points(seq_length, batch_sizes, seq_lengths, length_batch_size)
  for index, point in enumerate(points, start=1):
    bindings = point_bindings(point, seq_length, mask_rate, max_positions)
    if measure is None:
      prepare_records(bindings)
    for variant in variants:
      result = (measure or _run_isolated)(variant, bindings)
      point[variant] = result
      print(
          f'[{index}/{len(points)}] {variant} batch {point["batch_size"]} '
          f'length {point["seq_length"]}: '
          f'{result["examples_per_second"]:.1f} examples/s, '
          f'{result["tokens_per_second"]:.0f} tokens/s, '
          f'{result["peak_host_memory_mb"]:.0f} MB',
          flush=True,
      )
  return dict(
      matmul_peak_flops=matmul_peak_flops(),
      points=points,
      variants=list(variants),
      gin_files=list(gin_files),
      gin_params=list(gin_params),
  )


def plot_sweep(sweep: Dict, path: str) -> None:
  """Writes the sweep's four panels as a PNG, one line per variant."""
  pyplot = report.pyplot_module()
  panels = [
      ('batch_size', 'examples_per_second', 'examples/s'),
      ('batch_size', 'peak_host_memory_mb', 'peak host memory (MB)'),
      ('seq_length', 'tokens_per_second', 'tokens/s'),
      ('seq_length', 'flops_per_token', 'training FLOPs per token'),
  ]
  figure, axes = pyplot.subplots(2, 2, figsize=(10, 7))
  for ax, (axis, key, label) in zip(axes.flat, panels):
    points = [p for p in sweep['points'] if p['axis'] == axis]
    xs = [p[axis] for p in points]
    for variant in sweep['variants']:
      ys = [_sweep_value(p[variant], key) for p in points]
      ax.plot(xs, ys, marker='o', label=variant)
    ax.set_xscale('log', base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([str(x) for x in xs])
    fixed = 'seq_length' if axis == 'batch_size' else 'batch_size'
    fixed_name = 'length' if axis == 'batch_size' else 'batch'
    ax.set_xlabel(f'{axis.replace("_", " ")} ({fixed_name} {points[0][fixed]})')
    ax.set_ylabel(label)
    ax.grid(True, alpha=0.3)
    ax.legend()
  figure.suptitle(' + '.join(os.path.basename(f) for f in sweep['gin_files']))
  report.save_png(pyplot, figure, path, dpi=100)


def _sweep_value(result: Dict, key: str) -> float:
  """A result's `key`, or its training FLOPs per token."""
  if key == 'flops_per_token':
    return result['train_flops_per_step'] / (
        result['batch_size'] * result['seq_length']
    )
  return result[key]


def _print_sweep(sweep: Dict) -> None:
  """Prints every sweep point's measurements, one line per variant."""
  print(
      'axis | batch | length | variant | examples/s | tokens/s | '
      'train FLOPs/token | MFU % | peak RSS MB'
  )
  for point in sweep['points']:
    for variant in sweep['variants']:
      r = point[variant]
      mfu = _mfu_percent(r, sweep['matmul_peak_flops'])
      print(
          f'{point["axis"]} | {point["batch_size"]} | '
          f'{point["seq_length"]} | {variant} | '
          f'{r["examples_per_second"]:.1f} | {r["tokens_per_second"]:.0f} | '
          f'{_sweep_value(r, "flops_per_token") / 1e6:.1f}M | {mfu:.1f} | '
          f'{r["peak_host_memory_mb"]:.0f}'
      )


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  logging.set_verbosity(logging.WARNING)
  if FLAGS.run_variant:
    print(json.dumps(measure_variant(FLAGS.run_variant)))
    return
  unknown = set(FLAGS.variants) - {'ours', 'stock'}
  if unknown:
    raise app.UsageError(
        f'--variants: unknown {sorted(unknown)}; expected ours and/or stock.'
    )
  if FLAGS.sweep:
    if not FLAGS.output_json:
      raise app.UsageError('--sweep writes its points to --output_json.')
    sweep = run_sweep(
        FLAGS.gin_file,
        FLAGS.gin_param,
        FLAGS.variants,
        [int(b) for b in FLAGS.sweep_batch_sizes],
        [int(t) for t in FLAGS.sweep_seq_lengths],
        FLAGS.sweep_batch_size,
    )
    _print_sweep(sweep)
    json_files.write_json(FLAGS.output_json, sweep, sort_keys=False)
    plot_sweep(
        sweep,
        FLAGS.output_png or os.path.splitext(FLAGS.output_json)[0] + '.png',
    )
    return
  peak = matmul_peak_flops()
  prepare_records()
  results = [_run_isolated(variant) for variant in FLAGS.variants]
  _print_table(results, peak)
  summary = dict(
      matmul_peak_flops=peak,
      results=results,
      gin_files=FLAGS.gin_file,
      gin_params=FLAGS.gin_param,
  )
  if FLAGS.output_json:
    json_files.write_json(FLAGS.output_json, summary, sort_keys=False)


if __name__ == '__main__':
  define_flags()
  cli.run(main)
