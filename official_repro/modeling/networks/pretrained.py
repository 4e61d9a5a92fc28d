"""Finds, rebuilds and restores a pretrained encoder for fine-tuning.

`--init_checkpoint` is an export of ours (`training/export.py`: the
`model_dir`, its `encoder/`, an `encoder-<step>` prefix or a training
`ckpt-<step>`; architecture and tokenizer from the export folder), a
release (Hugging Face folder, TF1 ELECTRA/ConvBERT, Model Garden TEAMS;
converted once by `interchange/converted.py`, its own architecture and
tokenizer), or any other `Checkpoint(encoder=...)` with the caller's config
and `--vocab_file`. Restoring checks every encoder variable was found, so
another architecture fails loudly rather than fine-tuning a partly random
encoder.
"""

import dataclasses
import os
from typing import Optional

import tensorflow as tf
import tf_keras

from official_repro.common import cli
from official_repro.common import json_files
from official_repro.data import vocab
from official_repro.modeling.interchange import converted
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import export_layout


class NoArchitectureError(cli.UserError):
  """The checkpoint carries no architecture and the caller gave none."""


@dataclasses.dataclass(frozen=True)
class PretrainedEncoder:
  """What fine-tuning needs to rebuild an encoder and its tokenizer.

  `checkpoint_path` is the prefix to restore (None: random init).
  """

  checkpoint_path: Optional[str]
  config: encoders.EncoderConfig
  vocab_file: str
  lower_case: bool


def _export_dir(init_checkpoint: str) -> Optional[str]:
  """The export folder `init_checkpoint` names, or None if it names none."""
  candidates = [
      init_checkpoint,
      os.path.join(init_checkpoint, export_layout.ENCODER_SUBDIR),
      os.path.dirname(init_checkpoint),
  ]
  if not tf.io.gfile.isdir(init_checkpoint):
    # A training checkpoint prefix: the run's export folder is its sibling.
    candidates.append(
        os.path.join(
            os.path.dirname(init_checkpoint), export_layout.ENCODER_SUBDIR
        )
    )
  for candidate in candidates:
    if tf.io.gfile.exists(
        os.path.join(candidate, export_layout.ENCODER_CONFIG_FILENAME)
    ):
      return candidate
  return None


def _checkpoint_prefix(init_checkpoint: str, export_dir: Optional[str]) -> str:
  if tf.io.gfile.isdir(init_checkpoint):
    directory = export_dir or init_checkpoint
    prefixes = sorted(
        (
            path[: -len('.index')]
            for path in tf.io.gfile.glob(os.path.join(directory, '*.index'))
        ),
        key=lambda prefix: int(prefix.rsplit('-', 1)[-1])
        if prefix.rsplit('-', 1)[-1].isdigit()
        else -1,
    )
    if not prefixes:
      raise FileNotFoundError(
          f'--init_checkpoint {init_checkpoint}: no checkpoint (*.index) in '
          f'{directory}.'
      )
    return prefixes[-1]
  if not tf.io.gfile.exists(init_checkpoint + '.index'):
    raise FileNotFoundError(
        f'--init_checkpoint {init_checkpoint}: neither a directory nor a '
        f'checkpoint prefix ({init_checkpoint}.index does not exist).'
    )
  return init_checkpoint


def _read_export(export_dir: str):
  """(config, tokenizer settings) of an export folder."""
  saved = json_files.read_json(
      os.path.join(export_dir, export_layout.ENCODER_CONFIG_FILENAME)
  )
  config = encoders.EncoderConfig.from_args(
      **encoders.upgrade_saved_config(saved)
  )
  tokenizer = json_files.read_json(
      os.path.join(export_dir, export_layout.TOKENIZER_FILENAME), default={}
  )
  if tokenizer:
    tokenizer['vocab_file'] = os.path.join(export_dir, tokenizer['vocab_file'])
  return config, tokenizer


def _checked_tokens(init_checkpoint, vocab_file, tokenizer) -> vocab.Vocabulary:
  """The vocabulary's tokens; UserError if none or not the exported one."""
  if not vocab_file:
    raise cli.UserError(
        f'--init_checkpoint {init_checkpoint} has no '
        'vocabulary (vocab.txt or spiece.model); pass --vocab_file with the '
        'vocabulary the encoder was trained with.'
    )
  if not tf.io.gfile.exists(vocab_file):
    raise FileNotFoundError(f'--vocab_file {vocab_file} does not exist.')
  tokens = vocab.load_vocab(vocab_file)
  exported_vocab = tokenizer.get('vocab_file')
  if exported_vocab and vocab_file != exported_vocab:
    trained_with = vocab.load_vocab(exported_vocab)
    if tokens != trained_with:
      raise cli.UserError(
          f'--vocab_file {vocab_file} ({tokens.kind}, {len(tokens)} tokens) '
          'is not the vocabulary the encoder was trained with '
          f'({exported_vocab}: {trained_with.kind}, {len(trained_with)} '
          'tokens); drop --vocab_file.'
      )
  return tokens


def resolve(
    init_checkpoint: Optional[str],
    vocab_file: Optional[str] = None,
    lower_case: Optional[bool] = None,
    config: Optional[encoders.EncoderConfig] = None,
) -> PretrainedEncoder:
  """Describes the encoder to fine-tune.

  `init_checkpoint` is an export folder, model_dir, checkpoint prefix or
  release (None: random init); `vocab_file` and `lower_case` override the
  exported ones (casing default True); `config` is used when the checkpoint
  carries none. Raises FileNotFoundError, NoArchitectureError or UserError.
  """
  if init_checkpoint and converted.detect(init_checkpoint):
    init_checkpoint = converted.cached_export(
        converted.Source(init_checkpoint, lower_case=lower_case)
    )
  export_dir = _export_dir(init_checkpoint) if init_checkpoint else None
  checkpoint_path = (
      _checkpoint_prefix(init_checkpoint, export_dir)
      if init_checkpoint
      else None
  )
  tokenizer = {}
  if export_dir:
    config, tokenizer = _read_export(export_dir)
  if config is None:
    raise NoArchitectureError(
        f'--init_checkpoint {init_checkpoint} has no '
        f'{export_layout.ENCODER_CONFIG_FILENAME}, and no architecture was '
        'given for it.'
    )
  vocab_file = vocab_file or tokenizer.get('vocab_file')
  tokens = _checked_tokens(init_checkpoint, vocab_file, tokenizer)
  if lower_case is None:
    lower_case = tokenizer.get('lower_case', True)
  casing = vocab.casing_mismatch(tokens, lower_case)
  if casing:
    raise cli.UserError(
        f'--init_checkpoint {init_checkpoint}: its vocabulary {vocab_file} '
        f'is {casing}; give the encoder the casing it was trained with (a '
        'release: official_repro.convert --lower_case or --nolower_case; a '
        "run of ours: its records' lower_case)."
    )
  if config.vocab_size is None:
    config = encoders.with_vocab_size(config, len(tokens), source=vocab_file)
  elif len(tokens) != config.vocab_size:
    raise cli.UserError(
        f'--vocab_file {vocab_file} has {len(tokens)} '
        f'tokens, the encoder {config.vocab_size}; give the vocabulary the '
        'encoder was trained with.'
    )
  return PretrainedEncoder(
      checkpoint_path=checkpoint_path,
      config=config,
      vocab_file=vocab_file,
      lower_case=lower_case,
  )


# What reading a damaged checkpoint raises: TensorFlow's checkpoint reader
# raises a short data file's "Read less bytes than requested" as IndexError.
_DAMAGED_CHECKPOINT_ERRORS = (
    tf.errors.DataLossError,
    tf.errors.OutOfRangeError,
    IndexError,
)


def restore(encoder: tf_keras.Model, checkpoint_path: str) -> None:
  """Loads `Checkpoint(encoder=...)` weights into `encoder`, every one."""
  try:
    status = tf.train.Checkpoint(encoder=encoder).read(checkpoint_path)
  except _DAMAGED_CHECKPOINT_ERRORS as error:
    message = getattr(error, 'message', None) or str(error)
    first_line = message.strip().splitlines()[0][:300]
    raise cli.UserError(
        f'--init_checkpoint {checkpoint_path}: its files are damaged '
        f'({first_line}); export or copy the encoder again.'
    ) from error
  try:
    status.assert_existing_objects_matched()
  except AssertionError as error:
    raise cli.UserError(
        f'--init_checkpoint {checkpoint_path} does not hold this encoder: '
        f'{str(error)[:500]}'
    ) from error
  status.expect_partial()
