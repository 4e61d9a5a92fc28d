"""The pretraining record directory: TFRecord shards plus `metadata.json`.

  vocab.txt or spiece.model; metadata.json (see `validate_metadata`);
  train-00000-of-0000N.tfrecord ...; eval-00000-of-0000M.tfrecord ...

Examples hold int64 `input_ids`, `input_mask`, `segment_ids`, optional
`next_sentence_labels` and, with static masking, `masked_lm_*`: the names
Model Garden's `BertPretrainDataLoader` reads. Files are renamed into place
when complete and `metadata.json` is written last, so a directory with it is
complete; its `tokenizer` names what made the ids.
"""

import contextlib
import functools
import json
import os
import socket
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from official_repro.common import cli
from official_repro.common import json_files
from official_repro.common import progress
from official_repro.common import staging

FORMAT_VERSION = 1
METADATA_FILENAME = 'metadata.json'
VOCAB_FILENAME = 'vocab.txt'
SPLITS = ('train', 'eval')
MASKING_MODES = ('static', 'dynamic')

_REQUIRED_KEYS = tuple(
    'format_version max_seq_length vocab_file vocab_size lower_case '
    'special_token_ids next_sentence_labels masking static_masking '
    'splits'.split()
)
_STATIC_MASKING_KEYS = tuple(
    'mask_rate max_predictions_per_seq mask_token_fraction '
    'random_token_fraction dupe_factor seed'.split()
)
_SPECIAL_TOKEN_KEYS = ('pad', 'unk', 'cls', 'sep', 'mask')


def shard_file_names(split: str, num_shards: int) -> List[str]:
  """`<split>-00000-of-0000N.tfrecord` names, relative to the directory."""
  return [
      f'{split}-{i:05d}-of-{num_shards:05d}.tfrecord' for i in range(num_shards)
  ]


def feature_spec(
    metadata: Mapping[str, Any],
) -> Dict[str, tf.io.FixedLenFeature]:
  """The `tf.io.parse_example` spec of the records `metadata` describes."""
  seq_length = [int(metadata['max_seq_length'])]
  spec = {
      name: tf.io.FixedLenFeature(seq_length, tf.int64)
      for name in ('input_ids', 'input_mask', 'segment_ids')
  }
  if metadata['next_sentence_labels']:
    spec['next_sentence_labels'] = tf.io.FixedLenFeature([1], tf.int64)
  if metadata['masking'] == 'static':
    width = [int(metadata['static_masking']['max_predictions_per_seq'])]
    spec['masked_lm_positions'] = tf.io.FixedLenFeature(width, tf.int64)
    spec['masked_lm_ids'] = tf.io.FixedLenFeature(width, tf.int64)
    spec['masked_lm_weights'] = tf.io.FixedLenFeature(width, tf.float32)
  return spec


def make_example(features: Mapping[str, np.ndarray]) -> tf.train.Example:
  """A `tf.train.Example` from 1-D arrays: int64 or float lists."""
  feature = {}
  for name, values in features.items():
    values = np.asarray(values)
    if np.issubdtype(values.dtype, np.floating):
      feature[name] = tf.train.Feature(
          float_list=tf.train.FloatList(value=values.tolist())
      )
    else:
      feature[name] = tf.train.Feature(
          int64_list=tf.train.Int64List(value=values.tolist())
      )
  return tf.train.Example(features=tf.train.Features(feature=feature))


def write_split(
    output_dir: str,
    split: str,
    features: Mapping[str, np.ndarray],
    num_shards: int,
    progress_label: str = '',
) -> List[str]:
  """Writes one split as `num_shards` contiguous TFRecord shards.

  `features` maps names to `[num_examples, width]` arrays; shards are capped
  at the number of examples (none for none). Returns the file names written,
  relative to `output_dir`.
  """
  num_examples = len(next(iter(features.values())))
  if num_examples == 0:
    return []
  num_shards = max(1, min(num_shards, num_examples))
  names = shard_file_names(split, num_shards)
  reporter = progress.Progress(num_examples, progress_label, 'examples')
  for shard, name in enumerate(names):
    begin = shard * num_examples // num_shards
    end = (shard + 1) * num_examples // num_shards
    path = os.path.join(output_dir, name)
    # Written under a temporary name and renamed when complete: a killed
    # process leaves `<name>.tmp-...` (removed by `remove_leftovers`), never
    # a partial shard under its final name.
    temporary = json_files.temporary_path(path)
    with tf.io.TFRecordWriter(temporary) as writer:
      for row in range(begin, end):
        example = make_example({k: v[row] for k, v in features.items()})
        writer.write(example.SerializeToString())
        reporter.advance()
    tf.io.gfile.rename(temporary, path, overwrite=True)
  return names


def remove_metadata(output_dir: str) -> None:
  """Removes an earlier run's `metadata.json`: the directory is incomplete."""
  metadata_path = os.path.join(output_dir, METADATA_FILENAME)
  if tf.io.gfile.exists(metadata_path):
    logging.info(
        '%s: removing the metadata.json of an earlier run; the '
        'directory counts as incomplete until this run finishes.',
        output_dir,
    )
    tf.io.gfile.remove(metadata_path)


def remove_leftovers(output_dir: str) -> int:
  """Creates `output_dir`, removes (and counts) a killed run's temporaries."""
  tf.io.gfile.makedirs(output_dir)
  base = output_dir.rstrip('/')
  leftovers = sorted(
      tf.io.gfile.glob(
          os.path.join(output_dir, '*' + json_files.TEMPORARY_MARKER + '*')
      )
      # A rerun's staging directory and the replaced records, beside it.
      + tf.io.gfile.glob(base + json_files.TEMPORARY_MARKER + '*')
      + tf.io.gfile.glob(
          base + REPLACED_SUFFIX + json_files.TEMPORARY_MARKER + '*'
      )
  )
  for path in leftovers:
    if tf.io.gfile.isdir(path):
      tf.io.gfile.rmtree(path)
    else:
      tf.io.gfile.remove(path)
  logging.info(
      '%s: found %d leftover temporary file(s) of an interrupted run%s.',
      output_dir,
      len(leftovers),
      ', removed them' if leftovers else '',
  )
  return len(leftovers)


# `<output_dir>.lock`: the record creation writing `output_dir`.
LOCK_SUFFIX = '.lock'
# `<output_dir>.replaced.tmp-...`: complete records while a rerun's are
# swapped in (`replace_with`).
REPLACED_SUFFIX = '.replaced'


@contextlib.contextmanager
def writer_lock(output_dir: str) -> Iterator[None]:
  """Holds `<output_dir>.lock` while one record creation writes `output_dir`.

  A second writer stops with a UserError naming the first (host, process). A
  lock of a gone process of this host is taken over; elsewhere it must be
  removed by hand.
  """
  path = output_dir.rstrip('/') + LOCK_SUFFIX
  holder = dict(host=socket.gethostname(), pid=os.getpid())
  local = '://' not in path
  tf.io.gfile.makedirs(os.path.dirname(path) or '.')
  for _ in range(2):
    if local:
      try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
      except FileExistsError:
        pass
      else:
        with os.fdopen(descriptor, 'w') as f:
          json.dump(holder, f)
        break
    elif not tf.io.gfile.exists(path):
      json_files.write_json(path, holder)
      break
    try:
      with tf.io.gfile.GFile(path) as f:
        other = json.load(f)
    except (json.JSONDecodeError, tf.errors.OpError):
      other = {}
    if other.get('host') == holder['host'] and not staging.process_alive(
        other.get('pid', -1)
    ):
      logging.warning(
          '%s: taking over the lock of a writer that is gone.', path
      )
      tf.io.gfile.remove(path)
      continue
    raise cli.UserError(
        f'--output_dir {output_dir} is being written by another record '
        f'creation (process {other.get("pid")} on {other.get("host")}, '
        f'{path}); wait for it, or remove {path} if that process is gone.'
    )
  try:
    yield
  finally:
    if tf.io.gfile.exists(path):
      tf.io.gfile.remove(path)


def replace_with(staging_dir: str, output_dir: str) -> None:
  """Swaps new records in for old ones (renamed aside, then removed)."""
  replaced = json_files.temporary_path(output_dir.rstrip('/') + REPLACED_SUFFIX)
  tf.io.gfile.rename(output_dir, replaced)
  tf.io.gfile.rename(staging_dir, output_dir)
  tf.io.gfile.rmtree(replaced)


def write_metadata(output_dir: str, metadata: Mapping[str, Any]) -> str:
  """Validates and writes `metadata.json`; returns its path."""
  validate_metadata(metadata, output_dir)
  path = os.path.join(output_dir, METADATA_FILENAME)
  json_files.write_json(path, metadata, sort_keys=False)
  return path


def load_metadata(path: str) -> Dict[str, Any]:
  """The validated metadata of a record directory (`path`) or file.

  Raises:
    FileNotFoundError: no metadata file, or a file it lists is missing.
    ValueError: the metadata is malformed or of an unknown format_version.
  """
  if tf.io.gfile.isdir(path):
    directory, metadata_path = path, os.path.join(path, METADATA_FILENAME)
  else:
    directory, metadata_path = os.path.dirname(path), path
  if not tf.io.gfile.exists(metadata_path) or tf.io.gfile.isdir(metadata_path):
    raise FileNotFoundError(
        f'Record metadata {metadata_path} does not exist; expected a '
        'directory written by official_repro.data.create_pretraining_data.'
    )
  metadata = json_files.read_json(metadata_path)
  validate_metadata(metadata, directory, source=metadata_path)
  return metadata


def split_files(
    metadata: Mapping[str, Any], directory: str, split: str
) -> List[str]:
  """Full paths of a split's record files."""
  return [
      os.path.join(directory, name)
      for name in metadata['splits'][split]['files']
  ]


def read_split(directory: str, split: str) -> Dict[str, np.ndarray]:
  """A split's examples in file order: {feature: `[examples, width]`}."""
  metadata = load_metadata(directory)
  spec = feature_spec(metadata)
  columns = {name: [] for name in spec}
  dataset = tf.data.TFRecordDataset(split_files(metadata, directory, split))
  for batch in dataset.batch(4096).map(
      functools.partial(tf.io.parse_example, features=spec)
  ):
    for name, value in batch.items():
      columns[name].append(value.numpy())
  return {
      name: np.concatenate(values)
      if values
      else np.zeros([0, *spec[name].shape], spec[name].dtype.as_numpy_dtype)
      for name, values in columns.items()
  }


def find_corrupt_file(paths: List[str]) -> Optional[Tuple[str, str]]:
  """`(path, error)` of the first record file that does not read back, or None.

  Reads every record (checking lengths and CRCs): one pass over the files.
  """
  for path in paths:
    try:
      tf.data.TFRecordDataset(path).reduce(
          tf.constant(0, tf.int64), lambda count, _: count + 1
      ).numpy()
    except tf.errors.OpError as error:
      return path, str(error.message).splitlines()[0]
  return None


def validate_metadata(
    metadata: Mapping[str, Any],
    directory: str,
    source: str = METADATA_FILENAME,
):
  """Checks the structure of a metadata dict and that its files exist.

  Raises:
    FileNotFoundError: a listed file is missing.
    ValueError: a key is missing or has a bad value.
  """
  if not isinstance(metadata, Mapping):
    raise cli.UserError(f'{source}: expected a JSON object.')
  version = metadata.get('format_version')
  if version != FORMAT_VERSION:
    raise cli.UserError(
        f'{source}: unknown format_version {version!r}; this '
        f'code reads format_version {FORMAT_VERSION}.'
    )
  missing = [key for key in _REQUIRED_KEYS if key not in metadata]
  if missing:
    raise cli.UserError(f'{source}: missing keys {missing}.')
  _check_masking(metadata, source)
  if not isinstance(metadata.get('tokenizer', ''), str):
    raise cli.UserError(
        f'{source}: tokenizer must be a string (the name of the tokenizer '
        'that made the ids), got '
        f'{metadata["tokenizer"]!r}.'
    )
  special = metadata['special_token_ids']
  if not isinstance(special, Mapping) or any(
      key not in special for key in _SPECIAL_TOKEN_KEYS
  ):
    raise cli.UserError(
        f'{source}: special_token_ids must have the keys '
        f'{list(_SPECIAL_TOKEN_KEYS)}.'
    )
  for split in SPLITS:
    entry = metadata['splits'].get(split)
    keys = set(entry) if isinstance(entry, Mapping) else set()
    if not {'files', 'num_examples'} <= keys:
      raise cli.UserError(
          f'{source}: splits.{split} must have "files" and "num_examples".'
      )
  _check_listed_files(metadata, directory, source)


def _check_masking(metadata: Mapping[str, Any], source: str) -> None:
  """Refuses an unknown `masking` or a `static_masking` that does not fit."""
  if metadata['masking'] not in MASKING_MODES:
    raise cli.UserError(
        f'{source}: masking must be one of {MASKING_MODES}, got '
        f'{metadata["masking"]!r}.'
    )
  static = metadata['static_masking']
  if metadata['masking'] == 'static':
    if not isinstance(static, Mapping) or any(
        key not in static for key in _STATIC_MASKING_KEYS
    ):
      raise cli.UserError(
          f'{source}: masking is static, so static_masking must '
          f'have the keys {list(_STATIC_MASKING_KEYS)}.'
      )
  elif static is not None:
    raise cli.UserError(
        f'{source}: static_masking must be null when masking is dynamic.'
    )


def _check_listed_files(
    metadata: Mapping[str, Any], directory: str, source: str
) -> None:
  """Raises FileNotFoundError for a listed file missing from `directory`."""
  listed = [metadata['vocab_file']] + [
      name for split in SPLITS for name in metadata['splits'][split]['files']
  ]
  for name in listed:
    if not tf.io.gfile.exists(os.path.join(directory, name)):
      raise FileNotFoundError(
          f'{source} lists {name}, but {os.path.join(directory, name)} '
          'does not exist.'
      )
