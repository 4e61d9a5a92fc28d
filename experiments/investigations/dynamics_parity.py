r"""Training dynamics of ours against Model Garden's stock tasks, by curve.

  python -m experiments.investigations.dynamics_parity \
    --corpus=../shared/data/corpus/gutenberg --runs_dir=/tmp/parity \
    --output_dir=experiments/reports [--seeds=1,2,3] [--report_only] \
    [--prior_report=experiments/reports/dynamics_parity_cpu.json]

Masked LM, ELECTRA and TEAMS at the cpu scale: each variant (`VARIANTS`:
ours and Model Garden's task on the same static records, and diagnostics)
trains on the same text, config and schedule per seed and is scored here on
the same held-out batches. A setting the stock task lacks is made the stock
one for every variant (`Objective.bindings`); gaps get `aggregation.compare`'s
verdict with Welch's p-value. Runs live in `--runs_dir` and resume. Writes
`dynamics_parity_cpu.md`, `.json` (for `--prior_report`) and `.png`s.
"""

from concurrent import futures
import dataclasses
import hashlib
import math
import os
import re
import statistics
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from absl import flags
import gin
import numpy as np
import orbit
from scipy import stats as scipy_stats
import tensorflow as tf
import tf_keras

from experiments import benchmark_pretraining
from experiments import commands
from experiments import provenance
from experiments.investigations import discriminator_probe_lib
from experiments.regeneration import registry
from experiments.regeneration import report as plots
from experiments.regeneration import runner
from official.core import base_trainer
from official.core import config_definitions as cfg
from official.core import task_factory
from official.core import train_utils
from official_repro.common import cli
from official_repro.common import json_files
from official_repro.common import markdown as md
from official_repro.data import create_pretraining_data
from official_repro.data import pretrain_dataloader
from official_repro.data import records
from official_repro.metrics import aggregation
from official_repro.metrics import context_free
from official_repro.training import experiment
from official_repro.training import gin_utils
from official_repro.training import trainer as trainer_lib

FLAGS = flags.FLAGS

# The records every run reads, under --runs_dir: (static, mask, random).
RECORDS = {
    'dynamic': (False, 0.8, 0.1),
    'static': (True, 0.8, 0.1),
    'static_85015': (True, 0.85, 0.0),
}

# The cpu scale's eval batch (gin/regenerate/cpu.gin), which every run's
# held-out batches have.
HELD_OUT_BATCH_SIZE = 128


@dataclasses.dataclass(frozen=True)
class Schedule:
  """Steps per run (warmup a tenth), between evaluations; batches per eval."""

  train_steps: int = 2000
  eval_every: int = 500
  eval_batches: int = 20


@dataclasses.dataclass(frozen=True)
class Variant:
  """One way of training an objective.

  Model Garden's task (`stock`) or ours, on `RECORDS[records]`, with gin
  `bindings` after the objective's; `stock_shuffles_as_ours`: our loader's
  shuffle buffer, not `cfg.DataConfig`'s 100.
  """

  name: str
  stock: bool
  records: str
  bindings: Tuple[str, ...] = ()
  stock_shuffles_as_ours: bool = False


_STATIC = "pretrain_data.masking='static'"
_801010 = (
    'pretrain_data.mask_token_fraction=0.8',
    'pretrain_data.random_token_fraction=0.1',
)
_WORD_TIED = (_STATIC, 'teams.tie_embedding_block = False')

VARIANTS = {
    v.name: v
    for v in (
        Variant('ours_static', False, 'static', (_STATIC,)),
        Variant('stock_static', True, 'static', (_STATIC,)),
        Variant('ours_dynamic', False, 'dynamic'),
        Variant('ours_dynamic_801010', False, 'dynamic', _801010),
        Variant('ours_static_85015', False, 'static_85015', (_STATIC,)),
        Variant('stock_static_our_shuffle', True, 'static', (_STATIC,), True),
        Variant('ours_static_word_tied', False, 'static', _WORD_TIED),
    )
}


_MLM_METRICS = ('masked_lm_accuracy', 'mask_token_accuracy')
_DISCRIMINATOR_METRICS = tuple(
    f'discriminator_{m}' for m in ('auc', 'accuracy', 'recall', 'loss')
)
# Our models' output names for (MLM logits, RTD logits, RTD labels, MWS
# logits); `Objective.stock_outputs` are Model Garden's.
OUR_OUTPUTS = ('mlm_logits', 'rtd_logits', 'rtd_labels', 'mws_logits')


@dataclasses.dataclass(frozen=True)
class Objective:
  """An objective's gin file, variants, stock settings (why) and metrics."""

  name: str
  gin_file: str
  variants: Tuple[str, ...]
  stock_outputs: Tuple[Optional[str], ...]
  bindings: Tuple[Tuple[str, str], ...] = ()
  metrics: Tuple[str, ...] = _MLM_METRICS


_MAIN_VARIANTS = ('ours_static', 'stock_static', 'ours_dynamic')

OBJECTIVES = {
    o.name: o
    for o in (
        Objective(
            'masked_lm',
            'gin/papers/001_ale/bert_small.gin',
            _MAIN_VARIANTS,
            ('mlm_logits', None, None, None),
        ),
        Objective(
            'electra',
            'gin/papers/001_ale/electra_small.gin',
            (
                *_MAIN_VARIANTS,
                'ours_dynamic_801010',
                'ours_static_85015',
                'stock_static_our_shuffle',
            ),
            ('lm_outputs', 'disc_logits', 'disc_label', None),
            bindings=(
                (
                    'electra.temperature = 1.0',
                    "Model Garden's ElectraPretrainer samples at temperature "
                    "1.0 only; 001's 0.8 is tested against the formula "
                    '(tests/tasks/test_reference_losses.py)',
                ),
                (
                    'electra.tie_embedding_block = False',
                    "Model Garden's ElectraPretrainTask ties the word table "
                    "only; 001's code also ties the position and type "
                    'tables and the embedding LayerNorm (the paper gin '
                    "file's setting)",
                ),
            ),
            metrics=_MLM_METRICS + _DISCRIMINATOR_METRICS,
        ),
        Objective(
            'teams',
            'gin/papers/003_teams/small.gin',
            ('ours_static', 'stock_static', 'ours_static_word_tied'),
            (
                'lm_outputs',
                'disc_rtd_logits',
                'disc_rtd_label',
                'disc_mws_logits',
            ),
            metrics=(*_MLM_METRICS, *_DISCRIMINATOR_METRICS, 'mws_accuracy'),
        ),
    )
}


def define_flags() -> None:
  """Defines the command's flags."""
  flags.DEFINE_string(
      'corpus', None, 'Books to build the records from (when missing).'
  )
  flags.DEFINE_string('runs_dir', None, 'Records and runs (resumed).')
  flags.DEFINE_string(
      'output_dir', None, 'Where the report goes (default: --runs_dir).'
  )
  flags.DEFINE_list('objectives', list(OBJECTIVES), 'Objectives to run.')
  flags.DEFINE_list('seeds', ['1', '2', '3'], 'Seeds of every variant.')
  flags.DEFINE_list(
      'variants',
      None,
      'Variants to train (default: every variant of each objective); the '
      'report covers every finished run.',
  )
  flags.DEFINE_integer(
      'train_steps', 2000, 'Steps of every run.', lower_bound=1
  )
  flags.DEFINE_integer(
      'eval_every', 500, 'Steps between evaluations.', lower_bound=1
  )
  flags.DEFINE_integer('eval_batches', 20, 'Held-out batches per evaluation.')
  flags.DEFINE_integer(
      'parallel', 1, 'Runs trained at once, one thread each when > 1.'
  )
  flags.DEFINE_boolean(
      'report_only', False, 'Write the report from the finished runs only.'
  )
  flags.DEFINE_string(
      'prior_report',
      None,
      "An earlier report's JSON: each run it holds (its `runs`) counts as "
      'finished and is not trained again, so a grid goes on where another '
      'machine left it.',
  )
  flags.DEFINE_string(
      'run', None, 'objective:variant:seed: train that run in this process.'
  )
  flags.DEFINE_integer(
      'threads', 0, 'With --run: TensorFlow threads (0: its default).'
  )
  cli.require_flags('runs_dir')


def records_dir(runs_dir: str, key: str) -> str:
  """The record set `key` of `RECORDS` under the runs directory."""
  return os.path.join(runs_dir, f'records_{key}')


def prepare_records(corpus: Optional[str], runs_dir: str) -> None:
  """Builds the record sets; the others reuse the dynamic set's vocabulary."""
  for key, (static, mask, random) in RECORDS.items():
    output_dir = records_dir(runs_dir, key)
    if tf.io.gfile.exists(os.path.join(output_dir, records.METADATA_FILENAME)):
      continue
    if not corpus:
      raise cli.UserError(
          f'--corpus: {output_dir} holds no records; give the books to '
          'build them from.'
      )
    vocabulary = dict(vocab_size=4096)
    if key != 'dynamic':
      vocab = os.path.join(
          records_dir(runs_dir, 'dynamic'), records.VOCAB_FILENAME
      )
      vocabulary = dict(vocab_file=vocab)
    create_pretraining_data.prepare_pretraining_data(
        [corpus],
        output_dir,
        lower_case=True,
        document_mode='file',
        strip_gutenberg=True,
        max_seq_length=runner.scale_max_seq_length('cpu'),
        masking='static' if static else 'dynamic',
        mask_token_fraction=mask,
        random_token_fraction=random,
        eval_fraction=0.1,
        **vocabulary,
    )


def run_name(objective: str, variant: str, seed: int) -> str:
  """The directory name of one run."""
  return f'{objective}-{variant}-seed{seed}'


def _held_out(
    runs_dir: str, count: int, batch_size: int = HELD_OUT_BATCH_SIZE
) -> List[Dict[str, tf.Tensor]]:
  """The first `count` batches of the static records' eval split, in order."""
  directory = records_dir(runs_dir, 'static')
  config = pretrain_dataloader.PretrainDataConfig(
      input_path=directory,
      split='eval',
      masking='static',
      is_training=False,
      global_batch_size=batch_size,
      max_seq_length=records.load_metadata(directory)['max_seq_length'],
      drop_remainder=False,
  )
  dataset = pretrain_dataloader.PretrainDataLoader(config).load()
  return list(dataset.take(count))


def static_predictor(runs_dir: str) -> context_free.ContextFreePredictor:
  """The context-free predictor of the static records (their fractions)."""
  directory = records_dir(runs_dir, 'static')
  fractions = records.load_metadata(directory)['static_masking']
  return context_free.ContextFreePredictor.from_records(
      directory,
      fractions['mask_token_fraction'],
      fractions['random_token_fraction'],
  )


def held_out_ceiling(runs_dir: str, count: int) -> Dict[str, float]:
  """The context-free ceiling (`static_predictor`) on the held-out slots.

  Returns:
    `context_free`, `mask_token_context_free`, `slots`, `mask_token_slots`.
  """
  predictor = static_predictor(runs_dir)
  report = context_free.masked_lm_report(
      lambda batch: predictor.predict(
          np.take_along_axis(
              batch['input_word_ids'], batch['masked_lm_positions'], axis=1
          )
      ),
      [_numpy(batch) for batch in _held_out(runs_dir, count)],
      predictor,
  )
  keys = ('context_free', 'mask_token_context_free', 'slots')
  return {name: report[name] for name in (*keys, 'mask_token_slots')}


def _numpy(tensors: Dict[str, tf.Tensor]) -> Dict[str, np.ndarray]:
  return {name: value.numpy() for name, value in tensors.items()}


def held_out_metrics(
    outputs: Sequence[Dict[str, np.ndarray]],
    batches: Sequence[Dict[str, np.ndarray]],
    predictor: context_free.ContextFreePredictor,
) -> Dict[str, float]:
  """The held-out metrics of a model's outputs on the held-out batches.

  `outputs` per batch: `mlm_logits` `[B, P, V]` and, where the model has
  them, `rtd_logits`, `rtd_labels` `[B, T]` and `mws_logits` `[B, P, K + 1]`
  (original at 0). Gives `masked_lm_accuracy`, `mask_token_accuracy`, the
  `discriminator_*` metrics and `mws_accuracy`, over real tokens.
  """
  report = context_free.masked_lm_report(
      lambda batch: np.argmax(batch['mlm_logits'], axis=-1),
      [dict(batch, **output) for output, batch in zip(outputs, batches)],
      predictor,
  )
  metrics = dict(
      masked_lm_accuracy=report['accuracy'],
      mask_token_accuracy=report['mask_token_accuracy'],
  )

  def real(values, mask):
    """Per-batch arrays at their batch's real `mask` entries, as one."""
    return np.concatenate(
        [
            np.asarray(v)[np.asarray(batch[mask]) > 0]
            for v, batch in zip(values, batches)
        ]
    ).astype(np.float64)

  if outputs[0].get('rtd_logits') is not None:
    logits = real([o['rtd_logits'] for o in outputs], 'input_mask')
    labels = real([o['rtd_labels'] for o in outputs], 'input_mask')
    detector = discriminator_probe_lib.detector_metrics(labels, logits)
    metrics.update({f'discriminator_{k}': v for k, v in detector.items()})
    metrics['discriminator_loss'] = float(
        np.mean(np.logaddexp(0.0, logits) - logits * labels)
    )
  if outputs[0].get('mws_logits') is not None:
    original_wins = [np.argmax(o['mws_logits'], axis=-1) == 0 for o in outputs]
    metrics['mws_accuracy'] = float(
        real(original_wins, 'masked_lm_weights').mean()
    )
  return metrics


def _evaluator(
    model: tf_keras.Model,
    names: Tuple[Optional[str], ...],
    batches: Sequence[Dict[str, tf.Tensor]],
    predictor: context_free.ContextFreePredictor,
) -> Callable[[], Dict[str, float]]:
  """`held_out_metrics` of `model` (outputs `names`, as `OUR_OUTPUTS`)."""

  @tf.function
  def forward(batch):
    outputs = model(batch, training=False)
    return {
        key: tf.cast(outputs[name], tf.float32)
        if 'logits' in key or 'outputs' in name
        else outputs[name]
        for key, name in zip(OUR_OUTPUTS, names)
        if name is not None and name in outputs
    }

  numpy_batches = [_numpy(b) for b in batches]

  def evaluate():
    outputs = [_numpy(forward(batch)) for batch in batches]
    return held_out_metrics(outputs, numpy_batches, predictor)

  return evaluate


def run_params(
    runs_dir: str,
    objective_name: str,
    variant_name: str,
    seed: int,
    schedule: Schedule,
    extra_bindings: Sequence[str] = (),
) -> Tuple[cfg.ExperimentConfig, cfg.ExperimentConfig]:
  """(ours, the run's experiment); stock: Model Garden's task on ours'."""
  gin.clear_config()
  objective, variant = OBJECTIVES[objective_name], VARIANTS[variant_name]
  files = (objective.gin_file,) + runner.scale_gin_files(
      registry.Run(objective.name, objective.name, (objective.gin_file,)), 'cpu'
  )
  gin_utils.parse_config(
      files,
      [
          f'experiment.train_steps = {schedule.train_steps}',
          f'optimization.warmup_steps = {schedule.train_steps // 10}',
          f'experiment.seed = {seed}',
          'pretrain_data.input_path = '
          f"'{records_dir(runs_dir, variant.records)}'",
          *(binding for binding, _ in objective.bindings),
          *variant.bindings,
          *extra_bindings,
      ],
  )
  ours, _ = experiment.experiment_config()
  train_data = ours.task.train_data
  ours.task.train_data = train_data.replace(seed=seed, masking_seed=seed)
  if not variant.stock:
    return ours, ours
  static_dir = records_dir(runs_dir, 'static')
  metadata = records.load_metadata(static_dir)
  return ours, benchmark_pretraining.stock_params(
      ours,
      static_dir,
      metadata['static_masking']['max_predictions_per_seq'],
      seed=seed,
      shuffle_buffer_size=(
          ours.task.train_data.shuffle_buffer_size
          if variant.stock_shuffles_as_ours
          else None
      ),
  )


def train_one(
    runs_dir: str,
    objective_name: str,
    variant_name: str,
    seed: int,
    schedule: Schedule,
    extra_bindings: Sequence[str] = (),
) -> None:
  """Trains one run in this process (resuming it) and writes its curve.

  Orbit's controller trains, checkpoints at each evaluation and resumes;
  `progress` (the curve so far) is written just before each checkpoint.
  """
  variant = VARIANTS[variant_name]
  name = run_name(objective_name, variant_name, seed)
  ours, params = run_params(
      runs_dir, objective_name, variant_name, seed, schedule, extra_bindings
  )
  operative = gin.config_str()
  tf_keras.utils.set_random_seed(seed)
  batches = _held_out(
      runs_dir,
      schedule.eval_batches,
      ours.task.validation_data.global_batch_size,
  )
  trainer_cls = base_trainer.Trainer if variant.stock else trainer_lib.Trainer
  task = task_factory.get_task(params.task)
  trainer = train_utils.create_trainer(
      params, task, train=True, evaluate=False, trainer_cls=trainer_cls
  )
  evaluate = _evaluator(
      trainer.model,
      OBJECTIVES[objective_name].stock_outputs
      if variant.stock
      else OUR_OUTPUTS,
      batches,
      static_predictor(runs_dir),
  )
  out_dir = os.path.join(runs_dir, name)
  state_dir = os.path.join(out_dir, 'state')
  controller, progress = _resumed_controller(
      trainer, state_dir, schedule, params, task
  )
  if progress['step']:
    print(f'{name} resumed at step {progress["step"]}', flush=True)
  start = time.time() - progress['seconds']

  def record(logs):
    step = int(trainer.global_step.numpy())
    metrics = dict(evaluate(), training_loss=float(logs['training_loss']))
    progress['curve'][str(step)] = metrics
    progress.update(step=step, seconds=time.time() - start)
    write_progress(state_dir, progress)
    print(
        f'{name} step {step}: '
        + ', '.join(f'{k} {v:.4f}' for k, v in metrics.items()),
        flush=True,
    )

  controller.train_actions = (record,)
  controller.train(steps=schedule.train_steps)
  json_files.write_text(
      os.path.join(out_dir, 'operative_config.gin'), operative
  )
  json_files.write_json(
      os.path.join(out_dir, 'curve.json'),
      dict(
          objective=objective_name,
          variant=variant_name,
          seed=seed,
          train_steps=schedule.train_steps,
          **{k: progress[k] for k in ('seconds', 'resumed_at', 'curve')},
      ),
  )
  tf.io.gfile.rmtree(state_dir)


def _resumed_controller(
    trainer: base_trainer.Trainer,
    state_dir: str,
    schedule: Schedule,
    params: cfg.ExperimentConfig,
    task: Any,
) -> Tuple[orbit.Controller, Dict[str, Any]]:
  """Orbit's controller of a run, restored from `state_dir`, and its progress.

  A run resumed at step k reads its training stream from batch k on.
  """
  controller = orbit.Controller(
      trainer=trainer,
      global_step=trainer.global_step,
      steps_per_loop=schedule.eval_every,
      checkpoint_manager=tf.train.CheckpointManager(
          trainer.checkpoint,
          state_dir,
          max_to_keep=1,
          step_counter=trainer.global_step,
          checkpoint_interval=schedule.eval_every,
      ),
  )
  resumed = int(trainer.global_step.numpy())
  progress = resumed_progress(state_dir, schedule, resumed)
  if resumed:
    # Orbit restores without this check: a state of another model is refused.
    trainer.checkpoint.restore(
        controller.checkpoint_manager.latest_checkpoint
    ).assert_existing_objects_matched()
    # The stream from batch `resumed` on, as an unbroken run's: skipping
    # re-reads the first batches, replaying the pipeline's random choices
    # (Model Garden's loader has no `start_step` as ours has).
    trainer.train_dataset = trainer.strategy.distribute_datasets_from_function(
        lambda context=None: task.build_inputs(
            params.task.train_data, context
        ).skip(resumed)
    )
  return controller, progress


def resumed_progress(
    state_dir: str, schedule: Schedule, step: int
) -> Dict[str, Any]:
  """The curve so far of a run resumed at checkpoint `step` (0: a new run).

  A curve written after the checkpoint it resumes from (killed between the
  two) loses its later points.

  Returns:
    `step`, `seconds`, `curve`, `resumed_at` and `schedule`.

  Raises:
    cli.UserError: the run was started under another schedule.
  """
  progress = dict(
      step=step,
      seconds=0.0,
      curve={},
      resumed_at=[],
      schedule=dataclasses.asdict(schedule),
  )
  if not step:
    return progress
  saved = json_files.read_json(os.path.join(state_dir, 'progress.json'))
  if saved['schedule'] != progress['schedule']:
    raise cli.UserError(
        f'{state_dir}: this run was started with {saved["schedule"]}, not '
        f'{progress["schedule"]}; rerun with those flags, or delete '
        f'{os.path.dirname(state_dir)} to start it again.'
    )
  progress.update(
      seconds=saved['seconds'],
      curve={k: v for k, v in saved['curve'].items() if int(k) <= step},
      resumed_at=saved['resumed_at']
      + ([step] if step < schedule.train_steps else []),
  )
  return progress


def write_progress(state_dir: str, progress: Dict[str, Any]) -> None:
  """Writes the curve so far (before the checkpoint of its last step)."""
  tf.io.gfile.makedirs(state_dir)
  json_files.write_json(os.path.join(state_dir, 'progress.json'), progress)


def replay_shares(
    stream: Sequence[str], epoch: int, batch_size: int
) -> Dict[str, float]:
  """How far the second epoch of `stream` (sequence keys) moves each one.

  Returns the share moved fewer than `batch_size` places from its nearest
  first-epoch place (`within_one_batch`) and the median move in batches.
  """
  where = {}
  for position, key in enumerate(stream[:epoch]):
    where.setdefault(key, []).append(position)
  moves = [
      min((abs(p - q) for q in where.get(key, ())), default=math.inf)
      for p, key in enumerate(stream[epoch:])
  ]
  return dict(
      within_one_batch=statistics.fmean(m < batch_size for m in moves),
      median_batches_moved=statistics.median(moves) / batch_size,
  )


# The variants whose second epoch the report measures (`epoch_replay`).
REPLAY_VARIANTS = ('ours_static', 'stock_static', 'stock_static_our_shuffle')


def epoch_replay(
    runs_dir: str,
    objective_name: str,
    variant_name: str,
    seed: int = 1,
    batches: int = 50,
    extra_bindings: Sequence[str] = (),
) -> Dict[str, float]:
  """`replay_shares` over `batches` of a run's second epoch, and its sizes."""
  _, params = run_params(
      runs_dir, objective_name, variant_name, seed, Schedule(), extra_bindings
  )
  train_data = params.task.train_data
  epoch = records.load_metadata(records_dir(runs_dir, 'static'))['splits'][
      'train'
  ]['num_examples']
  size = train_data.global_batch_size
  stream = []
  # The loaders' shuffles take the global seed with their own, as in the
  # run (`train_one`); unset, it is whatever the process set last.
  tf_keras.utils.set_random_seed(seed)
  dataset = task_factory.get_task(params.task).build_inputs(train_data)
  for batch in dataset.take(math.ceil(epoch / size) + batches):
    stream += [
        hashlib.md5(row.tobytes()).hexdigest()
        for row in batch['input_word_ids'].numpy()
    ]
  return dict(
      replay_shares(stream[: epoch + batches * size], epoch, size),
      epoch_sequences=epoch,
      batch_size=size,
  )


def _curve_path(runs_dir: str, name: str) -> str:
  """The finished run `name`'s curve file."""
  return os.path.join(runs_dir, name, 'curve.json')


# The diagnostic variants, which run after the others in this order: the
# stock task shuffling as ours, then the masking's parts.
_DIAGNOSTICS = (
    'stock_static_our_shuffle',
    'ours_dynamic_801010',
    'ours_static_85015',
    'ours_static_word_tied',
)


def jobs_left(
    runs_dir: str,
    objective_names: Sequence[str],
    seeds: Sequence[int],
    variant_names: Optional[Sequence[str]] = None,
    prior_runs: Optional[Dict[str, Dict[str, Any]]] = None,
) -> List[Tuple[str, str, int]]:
  """(objective, variant, seed) of every unfinished run, in run order.

  The main variants seed by seed (an interrupted grid has whole seeds), then
  `_DIAGNOSTICS` variant by variant. Runs in `prior_runs` are finished.
  """
  prior_runs = prior_runs or {}
  jobs = [
      (o, v, s)
      for s in seeds
      for o in objective_names
      for v in OBJECTIVES[o].variants
      if variant_names is None or v in variant_names
      if run_name(o, v, s) not in prior_runs
      if not tf.io.gfile.exists(_curve_path(runs_dir, run_name(o, v, s)))
  ]
  return sorted(
      jobs,
      key=lambda job: (
          _DIAGNOSTICS.index(job[1]) + 1 if job[1] in _DIAGNOSTICS else 0
      ),
  )


def run_all(
    runs_dir: str,
    objective_names: Sequence[str],
    seeds: Sequence[int],
    schedule: Schedule,
    parallel: int = 1,
    variant_names: Optional[Sequence[str]] = None,
    prior_runs: Optional[Dict[str, Dict[str, Any]]] = None,
) -> None:
  """Trains every run without a curve, one `commands.run_module` each.

  `parallel` > 1 runs train at once on one thread each (a model this small
  keeps one core busier than two). A failed run starts no further runs.
  """
  jobs = jobs_left(runs_dir, objective_names, seeds, variant_names, prior_runs)

  def train(numbered: Tuple[int, Tuple[str, str, int]]) -> None:
    index, (o, v, s) = numbered
    name = run_name(o, v, s)
    print(f'[{index}/{len(jobs)}] {name}', flush=True)
    tf.io.gfile.makedirs(os.path.join(runs_dir, name))
    commands.run_module(
        'experiments.investigations.dynamics_parity',
        [
            f'--runs_dir={runs_dir}',
            f'--run={o}:{v}:{s}',
            f'--train_steps={schedule.train_steps}',
            f'--eval_every={schedule.eval_every}',
            f'--eval_batches={schedule.eval_batches}',
            f'--threads={1 if parallel > 1 else 0}',
        ],
        log_path=os.path.join(runs_dir, name, 'train.log'),
        show=re.compile(re.escape(name) + ' (step|resumed)'),
    )

  if parallel == 1:
    for numbered in enumerate(jobs, 1):
      train(numbered)
    return
  with futures.ThreadPoolExecutor(parallel) as pool:
    running = [pool.submit(train, numbered) for numbered in enumerate(jobs, 1)]
    try:
      for job in futures.as_completed(running):
        job.result()
    finally:
      pool.shutdown(cancel_futures=True)


def welch(
    a: Sequence[float], b: Sequence[float], comparison: aggregation.Comparison
) -> Tuple[float, float]:
  """`(p, chance_flag)` of Welch's t-test on per-seed `a` and `b`.

  The gap's two-sided p-value, and the chance that `comparison`'s verdict is
  'ahead' or 'behind' when the means are equal (P(|t| > 2)).
  """
  if comparison.noise == 0.0:  # Welch's t is undefined without spread
    return (1.0 if comparison.gap == 0.0 else 0.0), 0.0
  result = scipy_stats.ttest_ind(a, b, equal_var=False)
  return float(result.pvalue), float(2.0 * scipy_stats.t.sf(2.0, result.df))


# The comparisons of the report: (variant, against, what it asks).
COMPARISONS = (
    ('ours_static', 'stock_static', 'ours against Model Garden'),
    ('ours_dynamic', 'ours_static', 'dynamic against static masking'),
    (
        'ours_dynamic',
        'ours_dynamic_801010',
        "ELECTRA's 85/0/15 against BERT's 80/10/10 split, both dynamic",
    ),
    (
        'ours_static_85015',
        'ours_static',
        "ELECTRA's 85/0/15 against BERT's 80/10/10 split, both static",
    ),
    (
        'ours_dynamic',
        'ours_static_85015',
        'dynamic against static masking, both 85/0/15',
    ),
    (
        'stock_static_our_shuffle',
        'stock_static',
        "Model Garden's task shuffling as ours (10,000 examples) against "
        'its default (100)',
    ),
    (
        'ours_static',
        'stock_static_our_shuffle',
        'ours against Model Garden, both shuffling 10,000 examples',
    ),
    (
        'ours_static',
        'ours_static_word_tied',
        'the whole embedding block tied (as Model Garden ties it) against '
        'the word table only',
    ),
)


@dataclasses.dataclass(frozen=True)
class PriorReport:
  """An earlier report's `path`, `runs` ({name: curve}) and `context_free`."""

  path: str
  runs: Dict[str, Dict[str, Any]]
  context_free: Dict[str, float]


def read_prior_report(path: str, schedule: Schedule) -> PriorReport:
  """Reads the runs of a `dynamics_parity_cpu.json` on this `schedule`.

  Raises:
    cli.UserError: no such report, another schedule, or an unknown run.
  """
  try:
    report = json_files.read_json(path)
  except cli.UserError as error:
    raise cli.UserError(f'--prior_report: {error}') from None
  if not isinstance(report, dict) or not isinstance(report.get('runs'), dict):
    raise cli.UserError(
        f'--prior_report: {path} holds no `runs`; give a report written by '
        'this command.'
    )
  keys = ('train_steps', 'eval_every', 'eval_batches')
  if any(not isinstance(report.get(k), int) for k in keys):
    raise cli.UserError(
        f'--prior_report: {path} states no schedule ({", ".join(keys)}); '
        'give a report written by this command.'
    )
  theirs = Schedule(*(report[k] for k in keys))
  if theirs != schedule:
    raise cli.UserError(
        f"--prior_report: {path} was trained on {theirs}, not this grid's "
        f'{schedule}; give the same --train_steps, --eval_every and '
        '--eval_batches.'
    )
  for name, run in report['runs'].items():
    known = (
        isinstance(run, dict)
        and run.get('objective') in OBJECTIVES
        and run.get('variant') in OBJECTIVES[run['objective']].variants
        and isinstance(run.get('seed'), int)
        and name == run_name(run['objective'], run['variant'], run['seed'])
        and isinstance(run.get('curve'), dict)
    )
    if not known:
      raise cli.UserError(
          f'--prior_report: {path}: run {name!r} is not the curve of a '
          'known objective, variant and seed under its name.'
      )
  return PriorReport(path, report['runs'], report.get('context_free') or {})


def finished_runs(
    runs_dir: str,
    objective_names: Sequence[str],
    seeds: Sequence[int],
    prior_runs: Optional[Dict[str, Dict[str, Any]]] = None,
) -> Tuple[Dict[str, Dict[str, Any]], List[str]]:
  """({name: curve} in grid order, names found under `runs_dir`).

  A curve under `runs_dir` wins over `prior_runs`'.
  """
  runs, found = {}, []
  for o in objective_names:
    for v in OBJECTIVES[o].variants:
      for s in seeds:
        name = run_name(o, v, s)
        path = _curve_path(runs_dir, name)
        if tf.io.gfile.exists(path):
          curve = json_files.read_json(path)
          runs[name] = dict(curve, objective=o, variant=v, seed=s)
          found.append(name)
        elif prior_runs and name in prior_runs:
          runs[name] = prior_runs[name]
  return runs, found


def collect(
    runs: Dict[str, Dict[str, Any]],
) -> Dict[str, Dict[str, Dict[int, Dict[str, List[float]]]]]:
  """{objective: {variant: {step: {metric: [per-seed values]}}}}."""
  out = {}
  for run in runs.values():
    for step, metrics in run['curve'].items():
      target = (
          out.setdefault(run['objective'], {})
          .setdefault(run['variant'], {})
          .setdefault(int(step), {})
      )
      for metric, value in metrics.items():
        target.setdefault(metric, []).append(value)
  return out


def comparisons(results) -> List[Dict]:
  """Every comparison at every checkpoint and metric both sides have."""
  rows = []
  for o, by_variant in results.items():
    for a, b, question in COMPARISONS:
      if a not in by_variant or b not in by_variant:
        continue
      for step in sorted(set(by_variant[a]) & set(by_variant[b])):
        for metric in OBJECTIVES[o].metrics:
          x = by_variant[a][step].get(metric) or []
          y = by_variant[b][step].get(metric) or []
          if len(x) < 2 or len(y) < 2:
            continue
          ours, theirs = aggregation.summarize(x), aggregation.summarize(y)
          comparison = aggregation.compare_summaries(ours, theirs)
          p, chance_flag = welch(x, y, comparison)
          rows.append(
              dict(
                  objective=o,
                  variant=a,
                  against=b,
                  question=question,
                  step=step,
                  metric=metric,
                  mean=ours['mean'],
                  against_mean=theirs['mean'],
                  seeds=(len(x), len(y)),
                  p=p,
                  chance_flag=chance_flag,
                  **dataclasses.asdict(comparison),
              )
          )
  return rows


def plot(objective: str, by_variant, metrics: Sequence[str], path: str):
  """The variants' mean curves (and each seed faintly), a panel per metric."""
  pyplot = plots.pyplot_module()
  columns = min(3, len(metrics))
  rows = math.ceil(len(metrics) / columns)
  figure, axes = pyplot.subplots(
      rows, columns, figsize=(4.2 * columns, 3.2 * rows), squeeze=False
  )
  for ax, metric in zip(axes.flat, metrics):
    for index, (variant, curve) in enumerate(sorted(by_variant.items())):
      color = f'C{index}'
      steps = sorted(curve)
      values = [curve[s].get(metric, []) for s in steps]
      if not any(values):
        continue
      for seed in range(max(len(v) for v in values)):
        ax.plot(
            steps,
            [v[seed] if seed < len(v) else np.nan for v in values],
            color=color,
            alpha=0.25,
            linewidth=0.8,
        )
      ax.plot(
          steps,
          [aggregation.summarize(v)['mean'] for v in values],
          color=color,
          marker='o',
          markersize=3,
          label=variant,
      )
    ax.set_title(metric.replace('_', ' '), fontsize=9)
    ax.set_xlabel('step')
    ax.grid(True, alpha=0.3)
  for ax in list(axes.flat)[len(metrics) :]:
    ax.axis('off')
  axes.flat[0].legend(fontsize=7)
  figure.suptitle(f'{objective}: held-out curves (mean of seeds, seeds faint)')
  plots.save_png(pyplot, figure, path, dpi=100)


def summary(rows: List[Dict]) -> List[str]:
  """A bullet per comparison: its verdicts at its last checkpoint."""
  by_comparison = {}
  for row in rows:
    key = (row['objective'], row['variant'], row['against'])
    by_comparison.setdefault(key, []).append(row)
  lines = ['## Summary at the last checkpoint', '']
  for (objective, variant, against), every_step in by_comparison.items():
    step = max(row['step'] for row in every_step)
    at_step = [row for row in every_step if row['step'] == step]
    quiet = [r['metric'] for r in at_step if r['verdict'] == 'within noise']
    verdicts = [
        f'{verdict} on '
        + ', '.join(
            f'{r["metric"]} ({r["gap"]:+.4f}, noise {r["noise"]:.4f}, '
            f'p {r["p"]:.2f})'
            for r in at_step
            if r['verdict'] == verdict
        )
        for verdict in ('ahead', 'behind')
        if any(r['verdict'] == verdict for r in at_step)
    ]
    if not verdicts:
      verdicts = ['within noise on every metric']
    elif quiet:
      verdicts.append(f'within noise: {", ".join(quiet)}')
    flagged = sum(r['verdict'] != 'within noise' for r in every_step)
    expected = sum(r['chance_flag'] for r in every_step)
    seeds = at_step[0]['seeds']
    lines.append(
        f'- {objective}, {variant} vs {against} ({at_step[0]["question"]}; '
        f'step {step:,}, {seeds[0]} and {seeds[1]} seeds): '
        + '; '.join(verdicts)
        + f'. Over every checkpoint, {flagged} of {len(every_step)} checks '
        f'are ahead or behind; {expected:.1f} would be by chance.'
    )
  return lines + ['']


def _mean_and_spread(values: Sequence[float]) -> str:
  """'mean ± seed standard deviation' ('-' without values)."""
  if not values:
    return '-'
  spread = aggregation.summarize(values)
  return f'{spread["mean"]:.4f}' + (
      f' ± {spread["std"]:.4f}' if spread['n'] > 1 else ''
  )


def _curve_lines(objective: str, by_variant) -> List[str]:
  """An objective's plot, mean curves table and last values by seed."""
  metrics = OBJECTIVES[objective].metrics
  rows = []
  for variant, curve in by_variant.items():
    for step in sorted(curve):
      values = [curve[step].get(metric, []) for metric in metrics]
      rows.append(
          [
              variant,
              f'{step:,}',
              max(len(v) for v in values),
              *(_mean_and_spread(v) for v in values),
          ]
      )
  return [
      f'### {objective}',
      '',
      f'![{objective}](dynamics_parity_cpu_{objective}.png)',
      '',
      *md.table(['variant', 'step', 'seeds', *metrics], rows),
      '',
      f'`{metrics[0]}` at the last checkpoint, in seed order:',
      '',
      *(
          f'- {variant} (step {max(curve):,}): '
          + ', '.join(f'{x:.4f}' for x in curve[max(curve)].get(metrics[0], []))
          for variant, curve in by_variant.items()
      ),
      '',
  ]


def _settings_lines(results, schedule: Schedule) -> List[str]:
  """Every run's settings, the stock ones made everyone's, the variants."""
  return [
      "Every run: the objective's paper gin file with the cpu scale's "
      'includes (hidden 128, 2 layers, length 64, batch 128), '
      f'{schedule.train_steps:,} steps (warmup a tenth), evaluated every '
      f'{schedule.eval_every} steps on the same {schedule.eval_batches} '
      "held-out batches of 128 sequences (the static records' eval split: 4 "
      'held-out books). Settings made the stock ones for every variant:',
      '',
      *(
          f'- {o}: `{binding}`: {reason}.'
          for o in results
          for binding, reason in OBJECTIVES[o].bindings
      ),
      '',
      'Variants: '
      + '; '.join(
          f'`{v.name}` ({"Model Garden" if v.stock else "ours"}, '
          f'{v.records} records'
          f'{", shuffled as ours" if v.stock_shuffles_as_ours else ""})'
          for v in VARIANTS.values()
      )
      + '.',
      '',
  ]


def _replay_lines(replay: Dict[str, Dict[str, float]]) -> List[str]:
  """The second-epoch replay of each loader's stream (`epoch_replay`)."""
  first = next(iter(replay.values()))
  return [
      '## Second-epoch replay',
      '',
      "Model Garden's pretraining loader shuffles examples in a buffer of "
      "100 (`cfg.DataConfig`'s default), ours in one of 10,000 "
      '(`pretrain_data.shuffle_buffer_size`). google-research/electra '
      'also shuffles in a buffer of 100, but behind interleaved reads of '
      'its shards (1,000 by default), whose order it reshuffles every '
      'epoch; these records are one shard. They are stored in a hashed '
      'order, so every loader reads a shuffled first epoch; the '
      'question is how far the second epoch moves each sequence from '
      "its first-epoch place. Each loader's ELECTRA training stream, "
      f'seed 1, an epoch of {first["epoch_sequences"]:,} sequences, '
      f'batches of {first["batch_size"]}, over the second epoch\'s first '
      '50 batches (`epoch_replay`):',
      '',
      *md.table(
          [
              'variant',
              'sequences back within one batch of their first-epoch place',
              'median move (batches)',
          ],
          [
              [
                  v,
                  f'{s["within_one_batch"]:.3f}',
                  f'{s["median_batches_moved"]:.1f}',
              ]
              for v, s in replay.items()
          ],
      ),
      '',
  ]


def _differences_lines(rows: List[Dict]) -> List[str]:
  """Every comparison's verdict at every checkpoint, and how it is made."""
  # The nonzero chance flags as 'a-b%' (one figure when they round alike).
  shares = [r['chance_flag'] for r in rows if r['chance_flag'] > 0.0] or [0.0]
  low, high = round(100 * min(shares)), round(100 * max(shares))
  share_range = f'{low}%' if low == high else f'{low}-{high}%'
  return [
      '## Differences at each checkpoint',
      '',
      'gap = mean of the first variant minus mean of the second; noise = '
      "twice the standard error of that difference over seeds (Welch's: "
      '`official_repro.metrics.aggregation.compare`); *ahead* when gap > '
      'noise, *behind* when gap < -noise, else *within noise*. p = the '
      "gap's two-sided p-value under Welch's t-test. With 2 or 3 seeds a "
      'side the criterion is loose: when the means are equal, it calls a '
      'check ahead or behind with probability P(|t| > 2) at the Welch '
      'degrees of freedom '
      f'({share_range} here; the '
      'summary above adds these up), so a lone *ahead* or *behind* is no '
      'finding; a gap that holds across checkpoints and seeds is.',
      '',
      *md.table(
          (
              'objective | comparison | step | metric | first | second | gap '
              '| noise | p | verdict'
          ).split(' | '),
          [
              (
                  '{objective}|{variant} vs {against}|{step:,}|{metric}|'
                  '{mean:.4f}|{against_mean:.4f}|{gap:+.4f}|{noise:.4f}|'
                  '{p:.2f}|{verdict}'
              )
              .format(**row)
              .split('|')
              for row in rows
          ],
      ),
  ]


def _check_same_held_out(prior: PriorReport, ceiling: Dict[str, Any]):
  """Refuses a prior report scored on other held-out slots than these."""
  differ = {
      k: (v, ceiling.get(k))
      for k, v in prior.context_free.items()
      if ceiling.get(k) is None or not math.isclose(v, ceiling[k])
  }
  if differ:
    raise cli.UserError(
        f'--prior_report: {prior.path} was scored on other held-out records '
        f'than those under --runs_dir (context-free ceiling, theirs against '
        f'these: {differ}); build the records from the same books.'
    )


def _ceiling_lines(ceiling: Dict[str, Any]) -> List[str]:
  """The curves' heading and what a model without context scores."""
  return [
      '## Mean held-out curves (± seed standard deviation)',
      '',
      'Without context (copy the shown token; behind [MASK], the most '
      'frequent training token: `official_repro.metrics.context_free`) '
      f'a masked LM scores {ceiling["context_free"]:.4f} on these '
      f'{ceiling["slots"]:,} held-out slots and '
      f'{ceiling["mask_token_context_free"]:.4f} on the '
      f'{ceiling["mask_token_slots"]:,} shown as [MASK] '
      '(`masked_lm_accuracy` and `mask_token_accuracy` above it need '
      'context).',
      '',
  ]


def write_report(
    runs_dir: str,
    output_dir: str,
    objective_names: Sequence[str],
    seeds: Sequence[int],
    schedule: Schedule,
    prior: Optional[PriorReport] = None,
) -> str:
  """Writes the markdown, JSON (a later `prior`) and PNGs of finished runs.

  The markdown: settings, mean curves, the summary and the verdicts.
  """
  prior_runs = prior.runs if prior else {}
  runs, found = finished_runs(runs_dir, objective_names, seeds, prior_runs)
  results = collect(runs)
  rows = comparisons(results)
  ceiling = held_out_ceiling(runs_dir, schedule.eval_batches)
  if prior:
    _check_same_held_out(prior, ceiling)
  replay = None
  if 'stock_static_our_shuffle' in results.get('electra', {}):
    replay = {v: epoch_replay(runs_dir, 'electra', v) for v in REPLAY_VARIANTS}
  tf.io.gfile.makedirs(output_dir)
  stem = os.path.join(output_dir, 'dynamics_parity_cpu')
  for o, by_variant in results.items():
    plot(o, by_variant, OBJECTIVES[o].metrics, f'{stem}_{o}.png')
  json_files.write_json(
      stem + '.json',
      dict(
          **dataclasses.asdict(schedule),
          seeds=list(seeds),
          curves={
              o: {
                  v: {str(step): m for step, m in curve.items()}
                  for v, curve in by_variant.items()
              }
              for o, by_variant in results.items()
          },
          comparisons=rows,
          context_free=ceiling,
          epoch_replay=replay,
          runs=dict(prior_runs, **runs),
      ),
  )
  lines = [
      '# Training dynamics: ours against Model Garden, and the masking',
      '',
      provenance.provenance('experiments.investigations.dynamics_parity'),
      '',
  ]
  if len(runs) > len(found):
    lines += [
        f'Runs: {len(runs) - len(found)} read from `{prior.path}` (trained '
        f'by earlier invocations), {len(found)} found under --runs_dir'
        + (f': {", ".join(found)}' if found else '')
        + '.',
        '',
    ]
  lines += _settings_lines(results, schedule)
  lines += _ceiling_lines(ceiling)
  for o, by_variant in results.items():
    lines += _curve_lines(o, by_variant)
  lines += summary(rows)
  lines += _replay_lines(replay) if replay else []
  lines += _differences_lines(rows)
  json_files.write_text(stem + '.md', '\n'.join(lines) + '\n')
  return stem + '.md'


def main(_) -> None:
  """Runs the command with the parsed flags (the absl entry point)."""
  try:
    seeds = [int(s) for s in FLAGS.seeds]
  except ValueError as e:
    raise cli.UserError(f'--seeds: {FLAGS.seeds} are not integers.') from e
  unknown = set(FLAGS.objectives) - set(OBJECTIVES)
  if unknown:
    raise cli.UserError(
        f'--objectives: unknown {sorted(unknown)}; known: {list(OBJECTIVES)}.'
    )
  if FLAGS.variants is not None:
    trained = {v for o in FLAGS.objectives for v in OBJECTIVES[o].variants}
    unknown = set(FLAGS.variants) - trained
    if unknown or not FLAGS.variants:
      raise cli.UserError(
          f'--variants: {sorted(unknown) or "none given"} not among the '
          f'variants of --objectives={",".join(FLAGS.objectives)}: '
          f'{sorted(trained)}.'
      )
  schedule = Schedule(FLAGS.train_steps, FLAGS.eval_every, FLAGS.eval_batches)
  if FLAGS.run:
    if FLAGS.threads:
      tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
      tf.config.threading.set_inter_op_parallelism_threads(FLAGS.threads)
    objective, variant, seed = FLAGS.run.split(':')
    train_one(FLAGS.runs_dir, objective, variant, int(seed), schedule)
    return
  prior = (
      read_prior_report(FLAGS.prior_report, schedule)
      if FLAGS.prior_report
      else None
  )
  if not FLAGS.report_only:
    prepare_records(FLAGS.corpus, FLAGS.runs_dir)
    run_all(
        FLAGS.runs_dir,
        FLAGS.objectives,
        seeds,
        schedule,
        FLAGS.parallel,
        FLAGS.variants,
        prior.runs if prior else None,
    )
  path = write_report(
      FLAGS.runs_dir,
      FLAGS.output_dir or FLAGS.runs_dir,
      FLAGS.objectives,
      seeds,
      schedule,
      prior,
  )
  print(f'report: {path}')


if __name__ == '__main__':
  define_flags()
  cli.run(main)
