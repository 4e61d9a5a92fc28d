"""A finished pretraining or fine-tuning run, rebuilt and restored.

A pretraining `model_dir`'s `config.gin` names the objective and
`model_config.json` the model built; the objective's task rebuilds it and
`ckpt-<step>` restores every variable, no records needed. A GLUE fine-tuning
run's `settings.json` describes its Model Garden `BertClassifier`.
"""

import dataclasses
import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple

import gin

import tensorflow as tf
import tf_keras

from official.core import base_task
from official.core import config_definitions as cfg
from official.core import task_factory
from official.nlp.modeling import models
from official_repro.common import cli
from official_repro.common import json_files
from official_repro.data import glue as glue_data
from official_repro.modeling.networks import encoders
from official_repro.tasks import objectives
from official_repro.training import experiment
from official_repro.training import finetuning
from official_repro.training import gin_utils

_OBJECTIVE = re.compile(r"^experiment\.objective\s*=\s*'(\w+)'", re.MULTILINE)


@dataclasses.dataclass
class SavedRun:
  """A restored pretraining run (`model`: the pretrainer, fully restored)."""

  model_dir: str
  checkpoint: str
  objective: objectives.Objective
  model_config: Any
  model: tf_keras.Model


def is_pretraining_run(model_dir: str) -> bool:
  """Whether `model_dir` holds a pretraining run's config and model config."""
  return all(
      tf.io.gfile.exists(os.path.join(model_dir, name))
      for name in ('config.gin', experiment.MODEL_CONFIG_FILENAME)
  )


def _model_config(objective: objectives.Objective, saved: Dict[str, Any]):
  """The objective's model config from its saved dict."""
  fields = {f.name: f for f in dataclasses.fields(objective.model_config_cls)}
  values = {}
  for name, value in saved.items():
    if name not in fields:
      raise cli.UserError(
          f'{experiment.MODEL_CONFIG_FILENAME}: {name!r} is not a field of '
          f'{objective.name}; the run was written by another version.'
      )
    if (
        name == objective.encoder_field
        or isinstance(value, dict)
        and ('hidden_size' in value)
    ):
      value = encoders.EncoderConfig.from_args(
          **encoders.upgrade_saved_config(value)
      )
    values[name] = value
  return objective.model_config_cls(**values)


def _dummy_batch(seq_length: int = 8, predictions: int = 2):
  ids = tf.constant([[2] + [5] * (seq_length - 2) + [3]], tf.int32)
  return dict(
      input_word_ids=ids,
      input_mask=tf.ones_like(ids),
      input_type_ids=tf.zeros_like(ids),
      masked_lm_positions=tf.constant([list(range(1, predictions + 1))]),
      masked_lm_ids=tf.constant([[5] * predictions]),
      masked_lm_weights=tf.ones([1, predictions]),
  )


def _checkpoint_prefix(model_dir: str, checkpoint: Optional[str]) -> str:
  """`checkpoint` (a prefix, or a name in `model_dir`), or the latest one."""
  if checkpoint is None:
    checkpoint = tf.train.latest_checkpoint(model_dir)
    if checkpoint is None:
      raise cli.UserError(
          f'--model_dir {model_dir} holds no training checkpoint '
          '(ckpt-<step>).'
      )
    return checkpoint
  for prefix in (checkpoint, os.path.join(model_dir, checkpoint)):
    if tf.io.gfile.exists(prefix + '.index'):
      return prefix
  state = tf.train.get_checkpoint_state(model_dir)
  names = [
      os.path.basename(path)
      for path in (state.all_model_checkpoint_paths if state else ())
  ]
  raise cli.UserError(
      f'--checkpoint {checkpoint}: no such checkpoint in {model_dir}; it has '
      f'{", ".join(names) or "none"}.'
  )


def load(model_dir: str, checkpoint: Optional[str] = None) -> SavedRun:
  """Rebuilds and restores the pretraining run in `model_dir`.

  `checkpoint`: a `ckpt-<step>` prefix or name in `model_dir` (default: the
  latest).
  """
  if not is_pretraining_run(model_dir):
    raise cli.UserError(
        f'--model_dir {model_dir}: no config.gin and '
        f'{experiment.MODEL_CONFIG_FILENAME}; not a pretraining run.'
    )
  checkpoint = _checkpoint_prefix(model_dir, checkpoint)
  with tf.io.gfile.GFile(os.path.join(model_dir, 'config.gin')) as f:
    match = _OBJECTIVE.search(f.read())
  if match is None:
    raise cli.UserError(
        f'{model_dir}/config.gin names no experiment.objective.'
    )
  objective = objectives.get(match.group(1))
  path = os.path.join(model_dir, experiment.MODEL_CONFIG_FILENAME)
  model_config = _model_config(objective, json_files.read_json(path))
  task = task_factory.get_task(objective.task_config_cls(model=model_config))
  model = task.build_model()
  model(_dummy_batch(), training=False)
  _restore(model, checkpoint, f'the model of {path}')
  return SavedRun(model_dir, checkpoint, objective, model_config, model)


def _restore(model: tf_keras.Model, checkpoint: str, described: str) -> None:
  """Reads every variable of `model` from `checkpoint` (UserError if not)."""
  status = tf.train.Checkpoint(model=model).read(checkpoint)
  try:
    status.assert_existing_objects_matched()
  except AssertionError as error:
    raise cli.UserError(
        f'{checkpoint} does not hold {described}: {str(error)[:300]}'
    ) from error
  status.expect_partial()


def pretraining_task(
    model_dir: str, record_dir: Optional[str] = None
) -> Tuple[cfg.ExperimentConfig, base_task.Task]:
  """`(params, task)` of a pretraining run, as its `config.gin` says.

  `record_dir`: records to read instead of the run's own (checked for the
  same vocabulary and sequence length).
  """
  gin.clear_config()
  try:
    gin_utils.parse_config(
        [os.path.join(model_dir, 'config.gin')],
        [f'pretrain_data.input_path = {record_dir!r}'] if record_dir else [],
    )
    params, _ = experiment.experiment_config()
  finally:
    gin.clear_config()
  if record_dir:
    _check_same_vocabulary(model_dir, record_dir, params.task.train_data)
  return params, task_factory.get_task(params.task)


def _check_same_vocabulary(
    model_dir: str, record_dir: str, data_config: Any
) -> None:
  """Refuses records whose vocabulary or length differ from the run's.

  Other corpora and copies are fine; runs without `records.json` pass.
  """
  path = os.path.join(model_dir, experiment.RECORDS_FILENAME)
  if not tf.io.gfile.exists(path):
    return
  try:
    with tf.io.gfile.GFile(path) as f:
      trained_on = json.load(f)
  except json.JSONDecodeError as error:
    raise cli.UserError(
        f'--model_dir {model_dir}: {path} is not JSON ({error}); restore it '
        'or delete it to skip the check of --records.'
    ) from error
  given = experiment.records_identity(data_config)

  def differs(key):
    return key in trained_on and trained_on[key] != given[key]

  differences = []
  if differs('vocab_sha256'):
    differences.append('another vocabulary')
  if differs('max_seq_length'):
    differences.append(
        f'max_seq_length {given["max_seq_length"]} where the run had '
        f'{trained_on["max_seq_length"]}'
    )
  if differences:
    raise cli.UserError(
        f'--records {record_dir}: {", ".join(differences)}: not the records '
        f'--model_dir {model_dir} trained on ({path}); give records written '
        'with its vocabulary and --max_seq_length.'
    )


@dataclasses.dataclass
class FinetunedRun:
  """A restored GLUE fine-tuning run (`<model_dir>/seed_<s>`).

  `classifier` is Model Garden's `BertClassifier`, fully restored; `labels`
  the label names by output index (`['score']` for STS-B).
  """

  run_dir: str
  checkpoint: str
  task: str
  encoder_config: encoders.EncoderConfig
  classifier: tf_keras.Model
  labels: List[str]
  vocab_file: str
  lower_case: bool


def is_finetuning_run(run_dir: str) -> bool:
  """Whether `run_dir` is one seed's fine-tuning run with a checkpoint."""
  return tf.io.gfile.exists(
      os.path.join(run_dir, finetuning.SETTINGS_FILENAME)
  ) and bool(tf.train.latest_checkpoint(run_dir))


def _nested(flat: Dict[str, Any], prefix: str) -> Dict[str, Any]:
  """`{'a.b': 1}`-style settings under `prefix` as a nested dict."""
  nested = {}
  for key, value in flat.items():
    if not key.startswith(prefix + '.'):
      continue
    *parents, leaf = key[len(prefix) + 1 :].split('.')
    node = nested
    for parent in parents:
      node = node.setdefault(parent, {})
    node[leaf] = value
  return nested


def load_finetuned(run_dir: str) -> FinetunedRun:
  """Rebuilds and restores a GLUE classifier from its run directory."""
  settings = json_files.read_json(
      os.path.join(run_dir, finetuning.SETTINGS_FILENAME)
  )
  task = settings['finetuning.task']
  if task not in glue_data.GLUE_TASK_NAMES:
    raise cli.UserError(
        f'{run_dir} fine-tuned {task!r}; the classifiers of the GLUE tasks '
        "export, other tasks' heads do not (export their encoder: "
        '--model_dir=<the pretraining run>).'
    )
  config = encoders.EncoderConfig.from_args(
      **encoders.upgrade_saved_config(_nested(settings, 'encoder'))
  )
  spec = glue_data.get_task_spec(task)
  labels = ['score'] if spec.is_regression else list(spec.label_list)
  encoder = encoders.build_encoder(config)
  classifier = models.BertClassifier(network=encoder, num_classes=len(labels))
  ids = tf.constant([[2, 3]], tf.int32)
  classifier(
      dict(
          input_word_ids=ids,
          input_mask=tf.ones_like(ids),
          input_type_ids=tf.zeros_like(ids),
      )
  )
  checkpoint = tf.train.latest_checkpoint(run_dir)
  _restore(
      classifier,
      checkpoint,
      f'the {task} classifier of {run_dir}/{finetuning.SETTINGS_FILENAME}',
  )
  return FinetunedRun(
      run_dir=run_dir,
      checkpoint=checkpoint,
      task=task,
      encoder_config=config,
      classifier=classifier,
      labels=labels,
      vocab_file=settings['task_config.vocab_file'],
      lower_case=settings['task_config.lower_case'],
  )
