"""Assembles a Model Garden experiment from gin and runs it with Orbit.

Gin is the single source of hyperparameters; `run` drives Model Garden's
`OrbitExperimentRunner` and adds the gin configs in `model_dir` and checks
(`model_config.json`, `records.json`) that stop a resumed run on another
architecture or other records with the differing fields, not a restore error.
"""

import dataclasses
import functools
import hashlib
import json
import os
from typing import Any, Dict, Optional, Tuple

from absl import logging
import gin
import tensorflow as tf

from official.core import config_definitions as cfg
from official.core import task_factory
from official.core import train_lib
from official.core import train_utils
from official_repro.common import cli
from official_repro.common import json_files
from official_repro.data import pretrain_dataloader
from official_repro.data import records
from official_repro.data import vocab as vocab_lib
from official_repro.optimization import optimizer_config
from official_repro.tasks import objectives
from official_repro.training import export
from official_repro.training import gin_utils
from official_repro.training import precision
from official_repro.training import preemption
from official_repro.training import reproducibility
from official_repro.training import trainer as trainer_lib

MODES = ('train', 'eval', 'train_and_eval')
MODEL_CONFIG_FILENAME = 'model_config.json'


class IncompatibleModelDirError(cli.UserError):
  """`model_dir` holds checkpoints of a different model."""


class CorruptRecordsError(cli.UserError):
  """A record file could not be read while training or evaluating."""


@dataclasses.dataclass(frozen=True)
class RunSettings:
  """Settings of a run outside Model Garden's config (see `experiment_config`).

  `mixed_precision`: 'bfloat16', 'float16' or None (`precision.resolve`).
  """

  jit_compile: bool = False
  seed: Optional[int] = None
  deterministic: bool = False
  mixed_precision: Optional[str] = None
  other_records: bool = False


@gin.configurable('experiment')
def experiment_config(
    objective: str = gin.REQUIRED,
    train_steps: int = gin.REQUIRED,
    steps_per_loop: int = 100,
    checkpoint_interval: int = 1000,
    summary_interval: Optional[int] = None,
    validation_interval: Optional[int] = None,
    validation_steps: int = -1,
    max_to_keep: int = 5,
    jit_compile: bool = False,
    seed: Optional[int] = None,
    deterministic: bool = False,
    other_records: bool = False,
) -> Tuple[cfg.ExperimentConfig, RunSettings]:
  """`(experiment_config, run_settings)` from gin bindings.

  Args:
    objective: a registered pretraining objective (`objectives.names()`).
    train_steps: optimizer steps; also the learning-rate decay horizon.
    steps_per_loop: steps per Orbit loop (logging, loss check granularity).
    checkpoint_interval: steps between checkpoints.
    summary_interval: default `steps_per_loop`.
    validation_interval: default `checkpoint_interval`.
    validation_steps: -1 evaluates the whole eval split.
    max_to_keep: checkpoints kept.
    jit_compile: compile the training step with XLA.
    seed: seeds everything random (`pretrain_data.seed` overrides it for the
      data); None draws one on the first start and keeps it in `model_dir`.
    deterministic: op determinism and checkpointed random streams: a resumed
      run ends bit-identical to an uninterrupted one.
    other_records: let a run resume on other records than it started on.
  """
  params = cfg.ExperimentConfig(
      task=objectives.task_config_from_gin(objective),
      trainer=trainer_config(
          'experiment',
          train_steps,
          steps_per_loop,
          checkpoint_interval,
          max_to_keep,
          summary_interval=summary_interval,
          validation_interval=validation_interval,
          validation_steps=validation_steps,
      ),
  )
  return params, RunSettings(
      jit_compile=jit_compile,
      seed=seed,
      deterministic=deterministic,
      other_records=other_records,
  )


def trainer_config(
    configurable: str,
    train_steps: int,
    steps_per_loop: int,
    checkpoint_interval: int,
    max_to_keep: int,
    summary_interval: Optional[int] = None,
    validation_interval: Optional[int] = None,
    validation_steps: int = -1,
) -> cfg.TrainerConfig:
  """Model Garden's trainer config of gin `configurable`'s step arguments.

  Raises:
    UserError: a count below 1, or checkpoints not at loop ends.
  """
  if min(train_steps, steps_per_loop, checkpoint_interval) < 1:
    raise cli.UserError(
        f'{configurable}.train_steps={train_steps}, steps_per_loop='
        f'{steps_per_loop} and checkpoint_interval={checkpoint_interval} '
        'must be >= 1.'
    )
  if checkpoint_interval % steps_per_loop:
    raise cli.UserError(
        f'{configurable}.checkpoint_interval={checkpoint_interval} must be a '
        f'multiple of {configurable}.steps_per_loop={steps_per_loop}: '
        'checkpoints are saved at loop ends.'
    )
  return cfg.TrainerConfig(
      optimizer_config=optimizer_config.optimization_config(
          train_steps=train_steps
      ),
      train_steps=train_steps,
      steps_per_loop=steps_per_loop,
      summary_interval=summary_interval or steps_per_loop,
      checkpoint_interval=checkpoint_interval,
      validation_interval=validation_interval or checkpoint_interval,
      validation_steps=validation_steps,
      max_to_keep=max_to_keep,
      # Our trainer raises on a non-finite loss with the step and the last
      # good checkpoint; Model Garden's recovery action is switched off.
      recovery_max_trials=-1,
  )


def check_model_dir(
    model_dir: str,
    model_config: Dict[str, Any],
    defaults: Optional[Dict[str, Any]] = None,
) -> None:
  """Stops if `model_dir` has checkpoints of another architecture.

  A field the saved `model_config.json` lacks counts as its `defaults` value,
  so a new field with a compatible default does not orphan old directories.
  """
  path = os.path.join(model_dir, MODEL_CONFIG_FILENAME)
  checkpoint = tf.train.latest_checkpoint(model_dir)
  if tf.io.gfile.exists(path):
    saved = _fill_missing(json_files.read_json(path), defaults or {})
    current = json.loads(json.dumps(model_config))
    if checkpoint and saved != current:
      differences = _diff(saved, current)
      raise IncompatibleModelDirError(
          f'--model_dir {model_dir} holds checkpoint {checkpoint} of a '
          f'different model ({path}): '
          + '; '.join(differences)
          + '. Use a new --model_dir, or the gin config that wrote it.'
      )
  elif checkpoint:
    logging.warning(
        '%s has checkpoints but no %s; cannot verify the model '
        'matches before restoring.',
        model_dir,
        MODEL_CONFIG_FILENAME,
    )
  tf.io.gfile.makedirs(model_dir)
  json_files.write_json(path, model_config)


RECORDS_FILENAME = 'records.json'


def records_identity(data_config: Any) -> Optional[Dict[str, Any]]:
  """What identifies a run's records wherever they lie (None: not records).

  Vocabulary digest, length, masking, example counts and writing settings,
  but no paths: records rebuilt alike or moved are the same.
  """
  if not isinstance(data_config, pretrain_dataloader.PretrainDataConfig):
    return None
  metadata = records.load_metadata(data_config.input_path)
  tokens = vocab_lib.load_vocab(
      os.path.join(data_config.input_path, metadata['vocab_file'])
  )
  source = dict(metadata.get('source') or {})
  source.pop('inputs', None)
  source.pop('vocab_file', None)
  digest = hashlib.sha256('\n'.join(tokens).encode())
  if tokens.canonical_model is not None:  # its scores and character map too
    digest.update(tokens.canonical_model)
  return dict(
      vocab_sha256=digest.hexdigest()[:16],
      max_seq_length=metadata['max_seq_length'],
      masking=metadata['masking'],
      examples={
          split: info.get('num_examples')
          for split, info in metadata['splits'].items()
      },
      source=source,
  )


def check_positions(params: cfg.ExperimentConfig) -> None:
  """Refuses records longer than the encoder's position embeddings."""
  data = params.task.train_data
  if not isinstance(data, pretrain_dataloader.PretrainDataConfig):
    return
  encoder = objectives.for_task_config(params.task).exported_encoder_config(
      params.task.model
  )
  if data.max_seq_length > encoder.max_position_embeddings:
    raise cli.UserError(
        f'pretrain_data.max_seq_length = {data.max_seq_length} (the records '
        f'of {data.input_path}), but encoder.max_position_embeddings = '
        f'{encoder.max_position_embeddings}; set --gin_param='
        f'encoder.max_position_embeddings={data.max_seq_length} (or more).'
    )


def check_records(
    model_dir: str, data_config: Any, other_records: bool
) -> None:
  """Refuses to resume a run on other records than `records.json` names.

  Unless `other_records` (`experiment.other_records`).
  """
  identity = records_identity(data_config)
  if identity is None:
    return
  path = os.path.join(model_dir, RECORDS_FILENAME)
  checkpoint = tf.train.latest_checkpoint(model_dir)
  if checkpoint and tf.io.gfile.exists(path) and not other_records:
    saved = json_files.read_json(path)
    current = json.loads(json.dumps(identity))
    if saved != current:
      differing = sorted(
          key
          for key in set(saved) | set(current)
          if saved.get(key) != current.get(key)
      )
      raise IncompatibleModelDirError(
          f'--model_dir {model_dir} holds checkpoint {checkpoint} of a run '
          f'on other records than pretrain_data.input_path '
          f'{data_config.input_path} ({", ".join(differing)} differ, see '
          f'{path}); use a new --model_dir, or '
          '--gin_param=experiment.other_records=True to continue on them.'
      )
  tf.io.gfile.makedirs(model_dir)
  json_files.write_json(path, identity)


def _fill_missing(saved: Any, defaults: Any) -> Any:
  """`saved` with the keys only `defaults` has added, recursively."""
  if not isinstance(saved, dict) or not isinstance(defaults, dict):
    return saved
  filled = {
      key: _fill_missing(value, defaults.get(key))
      for key, value in saved.items()
  }
  for key, value in defaults.items():
    filled.setdefault(key, value)
  return filled


def _diff(saved: Any, current: Any, prefix: str = '') -> list:
  if isinstance(saved, dict) and isinstance(current, dict):
    out = []
    for key in sorted(set(saved) | set(current)):
      out += _diff(saved.get(key), current.get(key), f'{prefix}{key}.')
    return out
  if saved != current:
    return [
        f'{prefix.rstrip(".")}: checkpoint has {saved!r}, config has '
        f'{current!r}'
    ]
  return []


def run(
    params: cfg.ExperimentConfig,
    settings: RunSettings,
    strategy: tf.distribute.Strategy,
    model_dir: str,
    mode: str,
) -> Dict[str, Any]:
  """Trains and/or evaluates in `mode` (`MODES`), resuming from `model_dir`.

  Returns:
    A summary dict: `global_step`, `eval` and `train` logs, `checkpoint`,
    `operative_config`, `num_params`, ...

  Raises:
    preemption.TrainingStopped: Ctrl-C or SIGTERM stopped training after a
      checkpoint.
  """
  if mode not in MODES:
    raise cli.UserError(f'--mode must be one of {MODES}, got {mode!r}.')
  if mode == 'eval' and tf.train.latest_checkpoint(model_dir) is None:
    raise cli.UserError(
        f'--mode=eval: --model_dir {model_dir} holds no checkpoint '
        '(ckpt-<step>) to evaluate; train first, or give the directory of a '
        'trained run.'
    )
  check_positions(params)
  check_model_dir(
      model_dir,
      params.task.model.as_dict(),
      defaults=type(params.task.model)().as_dict(),
  )
  if 'train' in mode:
    check_records(model_dir, params.task.train_data, settings.other_records)
  seed = reproducibility.run_seed(model_dir, settings.seed)
  with (
      preemption.stop_on_signal(),
      reproducibility.configure(seed, settings.deterministic),
      precision.policy(settings.mixed_precision),
  ):
    if 'train' in mode:
      params = _resumable(
          params, model_dir, seed, chief=strategy.extended.should_checkpoint
      )
    params.runtime = precision.runtime_config(settings.mixed_precision)
    train_utils.serialize_config(params, model_dir)
    gin_utils.save_config(model_dir, 'config.gin', operative=False)
    return _run_in_policy(params, settings, strategy, model_dir, mode)


def _resumable(
    params: cfg.ExperimentConfig, model_dir: str, seed: int, chief: bool
) -> cfg.ExperimentConfig:
  """`params` with the run's seeds and the training stream resumed.

  Only the chief repoints the directory past an unreadable checkpoint.
  """
  _, step = reproducibility.latest_readable_checkpoint(model_dir, repoint=chief)
  train_data = params.task.train_data
  seeds = dict(seed=seed if train_data.seed is None else train_data.seed)
  if hasattr(train_data, 'masking_seed'):  # data without masks have none
    seeds['masking_seed'] = (
        seed if train_data.masking_seed is None else train_data.masking_seed
    )
  params.task.train_data = train_data.replace(**seeds, start_step=step)
  return params


def _run_in_policy(
    params: cfg.ExperimentConfig,
    settings: RunSettings,
    strategy: tf.distribute.Strategy,
    model_dir: str,
    mode: str,
) -> Dict[str, Any]:
  """`run` once the seeds and the Keras precision policy are set."""
  task = task_factory.get_task(params.task, logging_dir=model_dir)
  with strategy.scope():
    trainer = train_utils.create_trainer(
        params,
        task,
        train='train' in mode,
        evaluate='eval' in mode,
        trainer_cls=functools.partial(
            trainer_lib.Trainer,
            jit_compile=settings.jit_compile,
            model_dir=model_dir,
        ),
    )
  runner = train_lib.OrbitExperimentRunner(
      distribution_strategy=strategy,
      task=task,
      mode=mode,
      params=params,
      model_dir=model_dir,
      trainer=trainer,
  )
  try:
    with strategy.scope():
      eval_logs = _drive(runner.controller, params.trainer, mode)
  except tf.errors.DataLossError as error:
    raise _corrupt_records_error(
        error, params, int(trainer.global_step.numpy()), model_dir
    ) from error
  operative = gin_utils.save_config(
      model_dir, 'operative_config.gin', operative=True
  )
  global_step = int(trainer.global_step.numpy())
  exported = None
  # The encoder kept for fine-tuning comes from pretraining on our records
  # (a causal language model has none).
  if 'train' in mode and isinstance(
      params.task.train_data, pretrain_dataloader.PretrainDataConfig
  ):
    exported = _export(trainer.model, params, model_dir, global_step)
  return dict(
      global_step=global_step,
      exported_encoder=exported,
      eval=_to_floats(eval_logs),
      train=dict(getattr(trainer, 'last_train_logs', {})),
      model_dir=model_dir,
      num_replicas=strategy.num_replicas_in_sync,
      checkpoint=tf.train.latest_checkpoint(model_dir),
      operative_config=operative,
      num_params=int(
          sum(v.shape.num_elements() for v in trainer.model.trainable_variables)
      ),
  )


def _drive(controller, trainer_config, mode: str) -> Optional[Dict[str, Any]]:
  """Runs Orbit's loop of `mode`; the final evaluation logs, if any."""
  eval_logs = None
  if mode == 'train':
    controller.train(steps=trainer_config.train_steps)
  elif mode == 'train_and_eval':
    eval_logs = controller.train_and_evaluate(
        train_steps=trainer_config.train_steps,
        eval_steps=trainer_config.validation_steps,
        eval_interval=trainer_config.validation_interval,
    )
  if eval_logs is None and 'eval' in mode:
    eval_logs = controller.evaluate(steps=trainer_config.validation_steps)
  return eval_logs


def _export(model, params: cfg.ExperimentConfig, model_dir: str, step: int):
  """Exports the pretrained encoder with its records' vocabulary."""
  input_path = params.task.train_data.input_path
  metadata = records.load_metadata(input_path)
  return export.export_encoder(
      model,
      objectives.for_task_config(params.task)
      .exported_encoder_config(params.task.model)
      .as_dict(),
      model_dir,
      step,
      vocab_file=os.path.join(input_path, metadata['vocab_file']),
      lower_case=metadata['lower_case'],
  )


def _corrupt_records_error(
    error: tf.errors.DataLossError,
    params: cfg.ExperimentConfig,
    step: int,
    model_dir: str,
) -> CorruptRecordsError:
  """One message naming the corrupt shard, the step and the checkpoint."""
  directory = params.task.train_data.input_path
  metadata = records.load_metadata(directory)
  culprit = records.find_corrupt_file(
      [
          path
          for split in records.SPLITS
          if split in metadata['splits']
          for path in records.split_files(metadata, directory, split)
      ]
  )
  where = (
      f'record file {culprit[0]} is corrupt ({culprit[1]})'
      if culprit
      else f'a record file of {directory} could not be read '
      f'({str(error.message).splitlines()[0]})'
  )
  checkpoint = tf.train.latest_checkpoint(model_dir)
  return CorruptRecordsError(
      f'Stopped at step {step}: {where}. The last good checkpoint is '
      f'{checkpoint or "none (no checkpoint was written yet)"}. Rewrite the '
      'records with create_pretraining_data (it writes every shard '
      'atomically), then run the same command to resume.'
  )


def _to_floats(logs: Optional[Dict[str, Any]]) -> Optional[Dict[str, float]]:
  if logs is None:
    return None
  return {name: float(value) for name, value in logs.items()}
