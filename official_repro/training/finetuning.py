"""Fine-tunes a pretrained encoder on one task over several seeds.

Each seed runs in `<model_dir>/seed_<s>` (own trainer, controller and
checkpoints), evaluates on the whole dev split at every epoch end into
`history.json`, and resumes when restarted; a finished run is reused and an
interrupted one resumed only when its `settings.json` equals this command's.
One evaluation per run (best or last) is selected and the runs aggregated as
the paper reports, into `results.json` and `results.md`.
"""

import dataclasses
import functools
import hashlib
import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from absl import logging
import numpy as np
import orbit
import tensorflow as tf
import tf_keras

from official.core import config_definitions as cfg
from official.core import task_factory
from official.core import train_utils
from official.modeling import optimization
from official_repro.common import cli
from official_repro.common import json_files
from official_repro.common import markdown
from official_repro.metrics import aggregation
from official_repro.modeling.networks import pretrained
from official_repro.optimization import optimizer_config
from official_repro.tasks import finetuning_base
from official_repro.tasks import finetuning_registry
from official_repro.tasks import finetuning_schedule
from official_repro.training import precision
from official_repro.training import preemption
from official_repro.training import reproducibility
from official_repro.training import trainer as trainer_lib

HISTORY_FILENAME = 'history.json'
RESULT_FILENAME = 'result.json'
SETTINGS_FILENAME = 'settings.json'
RESULTS_FILENAME = 'results.json'
TABLE_FILENAME = 'results.md'
TRAIN_SPLIT = 'train'
DEV_SPLIT = 'dev'

# `RunProtocol` fields that change one seed's run (adding seeds reuses runs).
_SEED_PROTOCOL_FIELDS = ('selection', 'stsb_metric', 'deterministic')
# Task config fields not compared: rebuilt per seed, or only where data lies.
_UNCHECKED_TASK_FIELDS = ('train_data', 'validation_data', 'data_dir')
_MISSING = object()
# `FinetuningSchedule` fields every task config takes under the same name.
_SCHEDULE_FIELDS = tuple(
    'task max_seq_length learning_rate layerwise_lr_decay weight_decay_rate '
    'adam_epsilon adam_bias_correction warmup_times_decay summed_loss '
    'data_order'.split()
)
# Settings added after runs were saved, with the value those runs had.
_ADDED_SETTINGS = {
    'mixed_precision': 'float32',
    'run_protocol.deterministic': False,
    'finetuning.adam_bias_correction': True,
    'finetuning.warmup_times_decay': False,
    'finetuning.summed_loss': False,
    'finetuning.data_order': 'reshuffle',
    'task_config.head': 'encoder_pooler',
    'task_config.double_unordered': False,
    'task_config.scale_stsb_targets': False,
}
# Settings added after runs were saved, value unknown: compared where saved.
_COMPARED_WHEN_SAVED = ('data_digest',)


class SettingsMismatchError(cli.UserError):
  """A run directory was started with other settings than this command's."""


def build_task_config(
    schedule: finetuning_schedule.FinetuningSchedule,
    protocol: finetuning_schedule.RunProtocol,
    encoder: pretrained.PretrainedEncoder,
    data_dir: str,
) -> finetuning_base.FinetuneTaskConfig:
  """The task config of `schedule.task`, built by its registry entry.

  Raises:
    UserError: a length beyond the encoder's positions, or two segments for
      an encoder with one token type.
  """
  positions = encoder.config.max_position_embeddings
  if schedule.max_seq_length > positions:
    raise cli.UserError(
        f'finetuning.max_seq_length = {schedule.max_seq_length}, but the '
        f'encoder ({encoder.checkpoint_path or "random init"}) has '
        f'{positions} position embeddings; set '
        f'--gin_param=finetuning.max_seq_length={positions}.'
    )
  entry = finetuning_registry.get(schedule.task)
  if encoder.config.type_vocab_size < entry.segments:
    raise cli.UserError(
        f'finetuning.task = {schedule.task!r} feeds {entry.segments} '
        f'segments (segment ids 0 to {entry.segments - 1}), but the encoder '
        f'({encoder.checkpoint_path or "random init"}) has '
        f'type_vocab_size = {encoder.config.type_vocab_size}; fine-tune it on '
        'a task of one sentence (cola, sst2, pos) or use an encoder with '
        'two token types.'
    )
  fields = dict(
      data_dir=data_dir,
      init_checkpoint=encoder.checkpoint_path or '',
      vocab_file=encoder.vocab_file,
      lower_case=encoder.lower_case,
      encoder=encoder.config,
  )
  fields.update({name: getattr(schedule, name) for name in _SCHEDULE_FIELDS})
  fields.update(
      {name: getattr(protocol, name) for name in entry.protocol_fields}
  )
  return entry.build_config(**fields)


def _optimization_config(schedule, train_steps: int, warmup_steps: int):
  """Linear warmup, then linear decay to 0 (Model Garden's schedules)."""
  return optimization.OptimizationConfig(
      {
          'optimizer': {'type': 'adamw'},
          **optimizer_config.learning_rate_config(
              train_steps, schedule.learning_rate, warmup_steps
          ),
      }
  )


def evaluation_steps(steps_per_epoch: int, train_steps: int) -> List[int]:
  """Global steps after which a run evaluates: every epoch end and the end."""
  points = set(range(steps_per_epoch, train_steps, steps_per_epoch))
  points.add(train_steps)
  return sorted(points)


def _flatten(prefix: str, value: Any) -> Dict[str, Any]:
  if isinstance(value, Mapping):
    flat = {}
    for key, item in value.items():
      flat.update(_flatten(f'{prefix}.{key}', item))
    return flat
  return {prefix: value}


def seed_settings(
    task_config: finetuning_base.FinetuneTaskConfig,
    schedule: finetuning_schedule.FinetuningSchedule,
    protocol: finetuning_schedule.RunProtocol,
    seed: int,
    mixed_precision: Optional[str] = None,
    data_digest: str = '',
) -> Dict[str, Any]:
  """The settings that determine one seed's run, as flat JSON `name -> value`.

  Names follow gin: `finetuning.*`, `run_protocol.*`, `encoder.*`,
  `task_config.*` (the task config's other fields), plus `init_checkpoint`,
  `seed`, `mixed_precision` and `data_digest`.
  """
  settings = {
      'seed': seed,
      'mixed_precision': mixed_precision or 'float32',
      'data_digest': data_digest,
  }
  schedule_values = dataclasses.asdict(schedule)
  protocol_values = dataclasses.asdict(protocol)
  settings.update(_flatten('finetuning', schedule_values))
  settings.update(
      _flatten(
          'run_protocol',
          {name: protocol_values[name] for name in _SEED_PROTOCOL_FIELDS},
      )
  )
  config = task_config.as_dict()
  settings['init_checkpoint'] = config.pop('init_checkpoint')
  settings.update(_flatten('encoder', config.pop('encoder')))
  # Fields copied from the schedule or the protocol are compared there.
  for name in (*_UNCHECKED_TASK_FIELDS, *schedule_values, *protocol_values):
    config.pop(name, None)
  settings.update(_flatten('task_config', config))
  return json.loads(json.dumps(settings))


def data_digest(task_config: finetuning_base.FinetuneTaskConfig) -> str:
  """SHA-256 (16 hex digits) of the train and dev features a task reads."""
  task = task_factory.get_task(task_config)
  digest = hashlib.sha256()
  for split in (TRAIN_SPLIT, DEV_SPLIT):
    features, _ = task.load_features(split)
    for name in sorted(features):
      digest.update(name.encode('utf-8'))
      digest.update(np.ascontiguousarray(features[name]).tobytes())
  return digest.hexdigest()[:16]


def _format_setting(settings: Mapping[str, Any], name: str) -> str:
  return repr(settings[name]) if name in settings else '<not set>'


def check_settings(run_dir: str, settings: Mapping[str, Any]) -> None:
  """Checks that a run directory may be reused or resumed by this command.

  A started run (result, history or checkpoint) must have saved `settings`
  (one saved before settings were is reused with a warning); an unfinished
  run gets `settings` written.

  Raises:
    SettingsMismatchError: naming every differing setting and both values.
  """
  path = os.path.join(run_dir, SETTINGS_FILENAME)
  saved = json_files.read_json(path, None)
  if saved is not None:
    saved = {**_ADDED_SETTINGS, **saved}
  current = {**_ADDED_SETTINGS, **settings}
  finished = tf.io.gfile.exists(os.path.join(run_dir, RESULT_FILENAME))
  started = (
      finished
      or tf.io.gfile.exists(os.path.join(run_dir, HISTORY_FILENAME))
      or (tf.train.latest_checkpoint(run_dir) is not None)
  )
  if started and saved is not None:
    differing = sorted(
        name
        for name in set(saved) | set(current)
        if saved.get(name, _MISSING) != current.get(name, _MISSING)
        and not (name in _COMPARED_WHEN_SAVED and name not in saved)
    )
    if differing:
      raise _mismatch(run_dir, path, saved, current, differing)
    return
  if started:
    logging.warning(
        '%s has no %s (it was written by an older version), so '
        'its settings cannot be checked; %s it.',
        run_dir,
        SETTINGS_FILENAME,
        'reusing' if finished else 'resuming',
    )
  if not finished:
    tf.io.gfile.makedirs(run_dir)
    json_files.write_json(path, dict(settings))


def _mismatch(run_dir, path, saved, current, differing):
  data = (
      ' (the examples read from --data_dir differ from those it was run on)'
      if 'data_digest' in differing
      else ''
  )
  return SettingsMismatchError(
      f'{run_dir} was run with '
      + '; '.join(
          f'{name}={_format_setting(saved, name)}, this command has '
          f'{_format_setting(current, name)}'
          for name in differing
      )
      + f'{data}; use another --model_dir or restore the settings (saved '
      f'in {path}).'
  )


def run_seed(
    task_config: finetuning_base.FinetuneTaskConfig,
    schedule: finetuning_schedule.FinetuningSchedule,
    protocol: finetuning_schedule.RunProtocol,
    seed: int,
    run_dir: str,
    strategy: tf.distribute.Strategy,
    mixed_precision: Optional[str] = None,
) -> Dict[str, Any]:
  """One fine-tuning run; returns its history and selected evaluation.

  Raises:
    SettingsMismatchError: `run_dir` was started with other settings.
    preemption.TrainingStopped: Ctrl-C or SIGTERM stopped training after a
      checkpoint.
  """
  check_settings(
      run_dir,
      seed_settings(
          task_config,
          schedule,
          protocol,
          seed,
          mixed_precision,
          data_digest(task_config),
      ),
  )
  done = json_files.read_json(os.path.join(run_dir, RESULT_FILENAME), None)
  if done is not None:
    logging.info('%s already finished; not repeated.', run_dir)
    return done
  tf_keras.backend.clear_session()
  with (
      preemption.stop_on_signal(),
      precision.policy(mixed_precision),
      reproducibility.configure(seed, protocol.deterministic),
  ):
    _, resumed_step = reproducibility.latest_readable_checkpoint(run_dir)
    task_config = _with_data(task_config, schedule, seed, resumed_step)
    task = task_factory.get_task(task_config, logging_dir=run_dir)
    num_train = task.num_examples(TRAIN_SPLIT)
    train_steps = schedule.train_steps(num_train)
    steps_per_epoch = schedule.steps_per_epoch(num_train)
    params = _experiment_params(
        task_config, schedule, num_train, steps_per_epoch, mixed_precision
    )
    trainer, controller = _controller(params, task, run_dir, strategy)
    history = _train_with_evaluations(
        controller,
        strategy,
        os.path.join(run_dir, HISTORY_FILENAME),
        evaluation_steps(steps_per_epoch, train_steps),
        steps_per_epoch,
        seed,
    )
    key = task.headline_metric()
    selected = aggregation.select_eval(history, key, protocol.selection)
    result = dict(
        seed=seed,
        train_steps=train_steps,
        num_train_examples=num_train,
        selected=dict(selected),
        score=float(selected[key]),
        history=history,
        last_train_logs=trainer.last_train_logs,
    )
    json_files.write_json(os.path.join(run_dir, RESULT_FILENAME), result)
    return result


def _with_data(task_config, schedule, seed: int, start_step: int):
  """`task_config` with the seed's train and dev data configs."""
  return dataclasses.replace(
      task_config,
      train_data=finetuning_base.FinetuneDataConfig(
          split=TRAIN_SPLIT,
          is_training=True,
          seed=seed,
          global_batch_size=schedule.train_batch_size,
          start_step=start_step,
      ),
      validation_data=finetuning_base.FinetuneDataConfig(
          split=DEV_SPLIT,
          is_training=False,
          drop_remainder=False,
          global_batch_size=(
              schedule.eval_batch_size or schedule.train_batch_size
          ),
      ),
  )


def _experiment_params(
    task_config, schedule, num_train, steps_per_epoch, mixed_precision
) -> cfg.ExperimentConfig:
  """One seed's experiment: checkpoints and summaries every loop."""
  train_steps = schedule.train_steps(num_train)
  steps_per_loop = min(steps_per_epoch, 100)
  return cfg.ExperimentConfig(
      task=task_config,
      trainer=cfg.TrainerConfig(
          train_steps=train_steps,
          validation_steps=-1,
          steps_per_loop=steps_per_loop,
          summary_interval=steps_per_loop,
          checkpoint_interval=steps_per_loop,
          max_to_keep=1,
          optimizer_config=_optimization_config(
              schedule, train_steps, schedule.warmup_steps(num_train)
          ),
      ),
      runtime=precision.runtime_config(mixed_precision),
  )


def _controller(
    params: cfg.ExperimentConfig,
    task: finetuning_base.FinetuneTask,
    run_dir: str,
    strategy: tf.distribute.Strategy,
) -> Tuple[trainer_lib.Trainer, orbit.Controller]:
  """The seed's trainer and its Orbit controller, checkpointing in `run_dir`."""
  steps_per_loop = params.trainer.steps_per_loop
  with strategy.scope():
    trainer = train_utils.create_trainer(
        params,
        task,
        train=True,
        evaluate=True,
        trainer_cls=functools.partial(trainer_lib.Trainer, model_dir=run_dir),
    )
  checkpoint_manager = tf.train.CheckpointManager(
      trainer.checkpoint,
      directory=run_dir,
      max_to_keep=1,
      step_counter=trainer.global_step,
      checkpoint_interval=steps_per_loop,
      init_fn=trainer.initialize,
  )
  controller = orbit.Controller(
      strategy=strategy,
      trainer=trainer,
      evaluator=trainer,
      global_step=trainer.global_step,
      steps_per_loop=steps_per_loop,
      checkpoint_manager=checkpoint_manager,
      summary_interval=steps_per_loop,
      summary_dir=os.path.join(run_dir, 'train'),
      eval_summary_dir=os.path.join(run_dir, 'eval'),
  )
  return trainer, controller


def _train_with_evaluations(
    controller: orbit.Controller,
    strategy: tf.distribute.Strategy,
    history_path: str,
    steps: Sequence[int],
    steps_per_epoch: int,
    seed: int,
) -> List[Dict[str, Any]]:
  """Trains to each of `steps` and evaluates there; returns the history.

  Evaluations already in `history_path` are kept; each new one is appended.
  """
  history = json_files.read_json(history_path, [])
  evaluated = {entry['step'] for entry in history}
  for step in steps:
    if step in evaluated:
      continue
    with strategy.scope():
      controller.train(steps=step)
      logs = controller.evaluate(steps=-1)
    entry = {'step': step, 'epoch': step / steps_per_epoch}
    entry.update(
        {
            key: float(value)
            for key, value in logs.items()
            if np.ndim(value) == 0
        }
    )
    history.append(entry)
    json_files.write_json(history_path, history)
    logging.info('seed %d, step %d: %s', seed, step, entry)
  return history


def run(
    schedule: finetuning_schedule.FinetuningSchedule,
    protocol: finetuning_schedule.RunProtocol,
    encoder: pretrained.PretrainedEncoder,
    data_dir: str,
    model_dir: str,
    strategy: tf.distribute.Strategy,
    seeds: Optional[Sequence[int]] = None,
    mixed_precision: Optional[str] = None,
) -> Dict[str, Any]:
  """Fine-tunes over `seeds` (default: the protocol's) and aggregates them.

  Returns `results.json`'s content: settings, runs, score and summary.
  """
  task_config = build_task_config(schedule, protocol, encoder, data_dir)
  seeds = list(seeds if seeds is not None else range(protocol.num_runs))
  runs = [
      run_seed(
          task_config,
          schedule,
          protocol,
          seed,
          os.path.join(model_dir, f'seed_{seed}'),
          strategy,
          mixed_precision,
      )
      for seed in seeds
  ]
  scores = [entry['score'] for entry in runs]
  results = dict(
      task=schedule.task,
      schedule=dataclasses.asdict(schedule),
      protocol=dataclasses.asdict(protocol),
      init_checkpoint=encoder.checkpoint_path,
      encoder=encoder.config.as_dict(),
      runs=runs,
      score=aggregation.aggregate(scores, protocol.aggregation),
      summary=aggregation.summarize(scores),
  )
  tf.io.gfile.makedirs(model_dir)
  json_files.write_json(os.path.join(model_dir, RESULTS_FILENAME), results)
  json_files.write_text(
      os.path.join(model_dir, TABLE_FILENAME), results_table(results)
  )
  return results


def results_table(results: Mapping[str, Any]) -> str:
  """A markdown table: one row per run, then the aggregate."""
  protocol = results['protocol']
  metric_names = sorted(
      {
          key
          for run in results['runs']
          for key in run['selected']
          if key not in ('step', 'epoch')
      }
  )
  lines = [
      f"### {results['task']}: {protocol['aggregation']} of "
      f"{len(results['runs'])} runs, {protocol['selection']} evaluation "
      'per run',
      '',
      *markdown.table(
          ['seed', 'step', *metric_names],
          [
              [run['seed'], run['selected']['step']]
              + [
                  f"{run['selected'][name]:.4f}"
                  if name in run['selected']
                  else ''
                  for name in metric_names
              ]
              for run in results['runs']
          ],
      ),
  ]
  summary = results['summary']
  lines += [
      '',
      f"score ({protocol['aggregation']}): {results['score']:.4f}; "
      f"mean {summary['mean']:.4f} ± {summary['std']:.4f} (std), "
      f"median {summary['median']:.4f}, max {summary['max']:.4f}, "
      f"n = {summary['n']}",
      '',
  ]
  return '\n'.join(lines)
