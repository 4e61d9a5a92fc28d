"""Released checkpoints converted into this repository's export layout.

Every command reads a pretrained encoder in the export layout of
`networks/pretrained.py`; a release (`KINDS`, found by `detect`: a Hugging
Face folder, a TF1 ELECTRA or ConvBERT checkpoint, a Model Garden TEAMS
checkpoint) is converted into it once: `encoder-0`, `encoder_config.json`
(from the release's config, never a command's settings), the vocabulary,
`heads/` (MLM and RTD heads with their activations) and `conversion.json`
(what was read). `cached_export` caches conversions by a digest of what was
read; each is written to a temporary folder and renamed when complete.
"""

import dataclasses
import hashlib
import os
from typing import Any, Dict, Optional

import tensorflow as tf

from official_repro.common import cli
from official_repro.common import json_files
from official_repro.common import staging
from official_repro.data import vocab
from official_repro.modeling.interchange import hf_folder
from official_repro.modeling.interchange import hf_models
from official_repro.modeling.interchange import teams_checkpoints
from official_repro.modeling.interchange import tf1_checkpoints
from official_repro.modeling.networks import export_layout

KINDS = ('huggingface', *tf1_checkpoints.KINDS, teams_checkpoints.KIND)
HEADS_SUBDIR = 'heads'
HEADS_PREFIX = 'heads-0'
HEADS_FILENAME = 'heads.json'
CONVERSION_FILENAME = 'conversion.json'
# Where `--init_checkpoint` conversions are kept (overridable).
CACHE_ENVIRONMENT_VARIABLE = 'OFFICIAL_REPRO_CACHE'


@dataclasses.dataclass(frozen=True)
class Source:
  """What to convert: `kind` one of `KINDS` or 'auto'.

  `network` is TF1 and TEAMS checkpoints' 'discriminator' or 'generator';
  `config_file` a `config.json` for checkpoints without one; `lower_case`
  None: the release's own.
  """

  path: str
  kind: str = 'auto'
  network: str = 'discriminator'
  config_file: Optional[str] = None
  lower_case: Optional[bool] = None


def detect(path: str) -> Optional[str]:
  """The kind of release at `path`, or None if it is none of `KINDS`."""
  if hf_folder.is_hf_folder(path):
    return 'huggingface'
  return tf1_checkpoints.detect(path) or teams_checkpoints.detect(path)


def read(source: Source) -> hf_models.Imported:
  """Reads a release into our terms (`hf_models.Imported`)."""
  kind = detect(source.path) if source.kind == 'auto' else source.kind
  if kind is None:
    raise cli.UserError(
        f'--input {source.path}: neither a Hugging Face folder '
        '(config.json + model.safetensors or tf_model.h5) nor an ELECTRA, '
        'ConvBERT or TEAMS checkpoint.'
    )
  if kind not in KINDS:
    raise cli.UserError(f'--from={kind!r}: expected one of {KINDS} or auto.')
  if kind == 'huggingface':
    folder = hf_folder.read_folder(source.path)
  elif kind in tf1_checkpoints.KINDS:
    folder = tf1_checkpoints.read(
        source.path, kind, source.network, source.config_file
    )
  else:
    folder = teams_checkpoints.read(
        source.path, source.network, source.config_file
    )
  return hf_models.from_folder(folder, source.lower_case)


def _write_layout(
    imported: hf_models.Imported,
    networks: hf_models.Networks,
    directory: str,
    kind: str,
) -> None:
  """Writes `directory` in the export layout (see the module docstring)."""
  tf.io.gfile.makedirs(directory)
  tf.train.Checkpoint(encoder=networks.encoder).write(
      os.path.join(directory, f'{export_layout.CHECKPOINT_PREFIX}-0')
  )
  json_files.write_json(
      os.path.join(directory, export_layout.ENCODER_CONFIG_FILENAME),
      imported.encoder_config.as_dict(),
  )
  vocabulary = vocab.as_vocabulary(imported.vocab_tokens)
  vocabulary.write(os.path.join(directory, vocabulary.filename))
  json_files.write_json(
      os.path.join(directory, export_layout.TOKENIZER_FILENAME),
      dict(vocab_file=vocabulary.filename, lower_case=imported.lower_case),
  )
  converted_heads = (
      ('mlm', networks.mlm_head, imported.mlm_activation),
      ('rtd', networks.rtd_head, imported.encoder_config.hidden_activation),
  )
  heads, items = {}, {}
  for name, head, activation in converted_heads:
    if head is not None:
      heads[name] = dict(activation=activation)
      items[f'{name}_head'] = head
  if items:
    heads_dir = os.path.join(directory, HEADS_SUBDIR)
    tf.io.gfile.makedirs(heads_dir)
    tf.train.Checkpoint(encoder=networks.encoder, **items).write(
        os.path.join(heads_dir, HEADS_PREFIX)
    )
    json_files.write_json(os.path.join(heads_dir, HEADS_FILENAME), heads)
  json_files.write_json(
      os.path.join(directory, CONVERSION_FILENAME),
      dict(
          kind=kind,
          source=imported.source,
          model_type=imported.architecture.model_type,
          classes=list(imported.architecture.architectures),
          heads=list(imported.heads),
          task_heads_not_converted=imported.task_heads,
      ),
  )


def convert(source: Source, output_dir: str) -> Dict[str, Any]:
  """Converts a release into an empty `output_dir`; returns its record."""
  if tf.io.gfile.exists(output_dir) and tf.io.gfile.listdir(output_dir):
    raise cli.UserError(
        f'--output_dir {output_dir} is not empty; give a new folder.'
    )
  kind = detect(source.path) if source.kind == 'auto' else source.kind
  imported = read(dataclasses.replace(source, kind=kind or 'auto'))
  networks = hf_models.build(imported)
  with staging.whole_folder(output_dir) as temporary:
    _write_layout(imported, networks, temporary, kind)
  return read_conversion(output_dir)


def read_conversion(directory: str) -> Dict[str, Any]:
  """The record a conversion wrote (`conversion.json`)."""
  return json_files.read_json(os.path.join(directory, CONVERSION_FILENAME))


def mlm_head_checkpoint(encoder_checkpoint: str) -> Optional[str]:
  """The MLM head checkpoint of a conversion, beside its encoder, or None."""
  heads_dir = os.path.join(os.path.dirname(encoder_checkpoint), HEADS_SUBDIR)
  heads = json_files.read_json(os.path.join(heads_dir, HEADS_FILENAME), {})
  return os.path.join(heads_dir, HEADS_PREFIX) if 'mlm' in heads else None


def _digest(source: Source, kind: str) -> str:
  """A digest of the release's files and the settings it is read with."""
  digest = hashlib.sha256(
      repr((kind, source.network, source.lower_case)).encode()
  )
  if tf.io.gfile.isdir(source.path):
    files = sorted(tf.io.gfile.listdir(source.path))
    paths = [os.path.join(source.path, name) for name in files]
  else:
    paths = sorted(tf.io.gfile.glob(source.path + '*'))
  if source.config_file:
    paths.append(source.config_file)
  for path in paths:
    if tf.io.gfile.isdir(path):
      continue
    digest.update(os.path.basename(path).encode())
    with tf.io.gfile.GFile(path, 'rb') as f:
      while chunk := f.read(1 << 24):
        digest.update(chunk)
  return digest.hexdigest()[:16]


def cache_root() -> str:
  """`$OFFICIAL_REPRO_CACHE`, or `~/.cache/official_repro/converted`."""
  return os.environ.get(CACHE_ENVIRONMENT_VARIABLE) or os.path.join(
      os.path.expanduser('~'), '.cache', 'official_repro', 'converted'
  )


def cached_export(source: Source) -> str:
  """The export layout of a release, converted once into the cache."""
  kind = detect(source.path) if source.kind == 'auto' else source.kind
  if kind is None:
    raise cli.UserError(f'--init_checkpoint {source.path}: not a release.')
  root = cache_root()
  directory = os.path.join(root, f'{kind}-{_digest(source, kind)}')
  if tf.io.gfile.exists(os.path.join(directory, CONVERSION_FILENAME)):
    return directory
  try:
    json_files.check_writable(
        os.path.join(root, CONVERSION_FILENAME),
        f'the conversion cache (${CACHE_ENVIRONMENT_VARIABLE})',
    )
  except cli.UserError as error:
    raise cli.UserError(
        f'{error} {source.path} is converted there once: set '
        f'{CACHE_ENVIRONMENT_VARIABLE} to a writable folder, or convert it '
        'with python -m official_repro.convert and give its --output_dir.'
    ) from error
  convert(dataclasses.replace(source, kind=kind), directory)
  return directory
