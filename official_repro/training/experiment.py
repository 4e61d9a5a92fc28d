"""Assembles a Model Garden experiment from gin and runs it with Orbit.

Gin is the single source of hyperparameters: `experiment_config` turns the
gin-bound task, trainer and optimizer settings into Model Garden's
`ExperimentConfig`, and `run` drives it with Model Garden's
`OrbitExperimentRunner` (checkpointing, resume from the latest checkpoint,
TensorBoard summaries, evaluation). Around that loop `run` adds:
  * the full gin config (`config.gin`) before training and the operative gin
    config (`operative_config.gin`) after it, plus Model Garden's
    `params.yaml`, all in `model_dir`;
  * a model-compatibility check: `model_config.json` records the architecture
    a `model_dir`'s checkpoints belong to, and a later run with a different
    architecture stops with the differing fields instead of a restore error.
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
  """Settings of a run that are not part of Model Garden's config.

  Attributes:
    jit_compile: compile the training step with XLA.
    seed: the run's seed (None: drawn on the first start, then kept in
      `model_dir`; see `reproducibility.run_seed`).
    deterministic: op determinism and checkpointed random streams.
    mixed_precision: 'bfloat16' or 'float16' (with loss scaling), or None
      for float32 (`precision.resolve` of `--mixed_precision`).
    other_records: resume training on records other than the run's
      (`check_records`).
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
  """Builds Model Garden's experiment config from gin bindings.

  Args:
    objective: the registered pretraining objective (`objectives.names()`,
      e.g. 'electra'); its task config is built from the gin bindings.
    train_steps: optimizer steps; also the learning-rate decay horizon.
    steps_per_loop: steps per Orbit loop (logging, loss check granularity).
    checkpoint_interval: steps between checkpoints.
    summary_interval: steps between TensorBoard summaries (default:
      `steps_per_loop`).
    validation_interval: steps between evaluations in train_and_eval
      (default: `checkpoint_interval`).
    validation_steps: evaluation batches; -1 evaluates the whole eval split.
    max_to_keep: checkpoints kept.
    jit_compile: compile the training step with XLA.
    seed: seeds initialisation, dropout, sampling, dynamic masking and the
      data order (`pretrain_data.seed` overrides it for the data); None
      draws one on the first start and keeps it in `model_dir`.
    deterministic: TensorFlow op determinism and random streams restored
      from checkpoints: two runs with the same seed on the same machine end
      bit-identical, and a resumed run matches an uninterrupted one.
    other_records: let a run resume on records other than those it started
      on (`check_records` refuses that otherwise).

  Returns:
    `(experiment_config, run_settings)`.
  """
  if checkpoint_interval % steps_per_loop:
    raise cli.UserError(
        f'experiment.checkpoint_interval={checkpoint_interval} must be a '
        f'multiple of experiment.steps_per_loop={steps_per_loop}: checkpoints '
        'are saved at loop ends.'
    )
  params = cfg.ExperimentConfig(
      task=objectives.task_config_from_gin(objective),
      trainer=cfg.TrainerConfig(
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
      ),
  )
  return params, RunSettings(
      jit_compile=jit_compile,
      seed=seed,
      deterministic=deterministic,
      other_records=other_records,
  )


def check_model_dir(
    model_dir: str,
    model_config: Dict[str, Any],
    defaults: Optional[Dict[str, Any]] = None,
) -> None:
  """Stops if `model_dir` has checkpoints of another architecture.

  Writes `model_config.json` on the first run; later runs compare with it.
  A field the saved file lacks (written before the field existed) counts as
  its value in `defaults`, so adding a config field with a default that keeps
  the old behaviour does not orphan existing model directories.

  Args:
    model_dir: the run's directory.
    model_config: the model config as a nested dict.
    defaults: the same structure holding every field's default value.

  Raises:
    IncompatibleModelDirError: listing the differing fields.
  """
  path = os.path.join(model_dir, MODEL_CONFIG_FILENAME)
  checkpoint = tf.train.latest_checkpoint(model_dir)
  if tf.io.gfile.exists(path):
    with tf.io.gfile.GFile(path) as f:
      saved = _fill_missing(json.load(f), defaults or {})
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
  """What identifies the records a run trains on, wherever they lie.

  The vocabulary (a digest of its tokens), the sequence length, the
  masking, the example counts of the splits and the settings they were
  written with (but not the corpus's paths): records rebuilt alike or moved
  (local to gs://) are the same; another corpus, vocabulary or length is
  not. None for data that are not our records.
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
  """Refuses records longer than the encoder's position embeddings.

  Raises:
    UserError: naming both lengths and the binding to set.
  """
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
  """Refuses to resume a run on other records than it started on.

  The records' identity (`records_identity`) is written to
  `records.json` when the run starts; a run with a checkpoint that is
  given other records stops before anything is written, naming what
  differs, unless `experiment.other_records = True`.

  Raises:
    UserError: naming the differing fields and the two fixes.
  """
  identity = records_identity(data_config)
  if identity is None:
    return
  path = os.path.join(model_dir, RECORDS_FILENAME)
  checkpoint = tf.train.latest_checkpoint(model_dir)
  if checkpoint and tf.io.gfile.exists(path) and not other_records:
    with tf.io.gfile.GFile(path) as f:
      saved = json.load(f)
    if saved != json.loads(json.dumps(identity)):
      differing = sorted(
          key
          for key in set(saved) | set(identity)
          if saved.get(key) != json.loads(json.dumps(identity)).get(key)
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
  """Trains and/or evaluates; returns a summary of the run.

  Args:
    params: the experiment config.
    settings: run settings outside Model Garden's config.
    strategy: the distribution strategy.
    model_dir: checkpoints, summaries and configs go here; training resumes
      from its latest checkpoint.
    mode: 'train', 'eval' or 'train_and_eval'.

  Returns:
    A dict with `global_step`, `eval` (final evaluation metrics, if any),
    `train` (the last training loop's logs, if it trained), `model_dir`,
    `num_replicas`, `checkpoint`, the operative config's path and the number
    of trainable parameters.

  Raises:
    preemption.TrainingStopped: Ctrl-C or SIGTERM stopped training after a
      checkpoint (`preemption.stop_on_signal`, active during the run).
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
  ):
    if 'train' in mode:
      params = _resumable(
          params, model_dir, seed, chief=strategy.extended.should_checkpoint
      )
    return _run(params, settings, strategy, model_dir, mode)


def _resumable(
    params: cfg.ExperimentConfig, model_dir: str, seed: int, chief: bool
) -> cfg.ExperimentConfig:
  """`params` with the run's seed and resumed training stream.

  `params` with the run's seed in the data configs and the training
  stream starting at the step of the checkpoint the run resumes from
  (only the chief repoints the directory past an unreadable one).
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


def _run(
    params: cfg.ExperimentConfig,
    settings: RunSettings,
    strategy: tf.distribute.Strategy,
    model_dir: str,
    mode: str,
) -> Dict[str, Any]:
  """`run` once the seeds are set."""
  params.runtime = precision.runtime_config(settings.mixed_precision)
  train_utils.serialize_config(params, model_dir)
  gin_utils.save_config(model_dir, 'config.gin', operative=False)
  with precision.policy(settings.mixed_precision):
    return _run_in_policy(params, settings, strategy, model_dir, mode)


def _run_in_policy(
    params: cfg.ExperimentConfig,
    settings: RunSettings,
    strategy: tf.distribute.Strategy,
    model_dir: str,
    mode: str,
) -> Dict[str, Any]:
  """`_run` under the run's Keras precision policy."""
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
  controller = runner.controller
  eval_logs = None
  try:
    with strategy.scope():
      if mode == 'train':
        controller.train(steps=params.trainer.train_steps)
      elif mode == 'train_and_eval':
        eval_logs = controller.train_and_evaluate(
            train_steps=params.trainer.train_steps,
            eval_steps=params.trainer.validation_steps,
            eval_interval=params.trainer.validation_interval,
        )
      if eval_logs is None and 'eval' in mode:
        eval_logs = controller.evaluate(steps=params.trainer.validation_steps)
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
    metadata = records.load_metadata(params.task.train_data.input_path)
    exported = export.export_encoder(
        trainer.model,
        objectives.for_task_config(params.task)
        .exported_encoder_config(params.task.model)
        .as_dict(),
        model_dir,
        global_step,
        vocab_file=os.path.join(
            params.task.train_data.input_path, metadata['vocab_file']
        ),
        lower_case=metadata['lower_case'],
    )
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
