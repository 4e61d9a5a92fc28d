"""A pretraining run started from a pretrained encoder (`--init_checkpoint`).

Takes whatever fine-tuning takes (an export, a run, a release) and starts
the objective's kept encoder from it, and the MLM head where both have one;
other networks start from their initialization, and a resumed run never
reads the source again. `check` runs before anything is built: the
architecture (but dropout) must be the config's and the vocabulary the
records'.
"""

import os
from typing import Any, Dict

from official.core import config_definitions as cfg
from official_repro.common import cli
from official_repro.data import pretrain_dataloader
from official_repro.data import records
from official_repro.data import vocab as vocab_lib
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import pretrained
from official_repro.tasks import objectives

# Settings of a training run, not of the architecture.
_TRAINING_FIELDS = (
    'dropout_rate',
    'attention_dropout_rate',
    'initializer_range',
)


def _architecture(config: encoders.EncoderConfig) -> Dict[str, Any]:
  fields = config.as_dict()
  for name in _TRAINING_FIELDS:
    fields.pop(name, None)
  return fields


def check(params: cfg.ExperimentConfig, init_checkpoint: str) -> str:
  """The encoder checkpoint prefix of `init_checkpoint`, checked.

  UserError names each differing architecture setting, or a vocabulary
  other than the records'.
  """
  source = pretrained.resolve(init_checkpoint)
  objective = objectives.for_task_config(params.task)
  ours = objective.exported_encoder_config(params.task.model)
  theirs_fields = _architecture(source.config)
  ours_fields = _architecture(ours)
  differing = sorted(
      name
      for name in set(theirs_fields) | set(ours_fields)
      if theirs_fields.get(name) != ours_fields.get(name)
  )
  if differing:
    raise cli.UserError(
        f'--init_checkpoint {init_checkpoint} is another encoder than the '
        "config's: "
        + '; '.join(
            f'encoder.{name} = {ours_fields.get(name)!r} here, '
            f'{theirs_fields.get(name)!r} there'
            for name in differing
        )
        + "; bind those settings to the checkpoint's values."
    )
  data = params.task.train_data
  if isinstance(data, pretrain_dataloader.PretrainDataConfig):
    metadata = records.load_metadata(data.input_path)
    records_vocab = os.path.join(data.input_path, metadata['vocab_file'])
    if vocab_lib.load_vocab(records_vocab) != vocab_lib.load_vocab(
        source.vocab_file
    ):
      raise cli.UserError(
          f'pretrain_data.input_path {data.input_path}: its vocabulary is '
          f'not the one of --init_checkpoint ({source.vocab_file}); write '
          'the records with --vocab_file=' + source.vocab_file + '.'
      )
  return source.checkpoint_path
