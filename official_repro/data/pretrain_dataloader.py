"""tf.data input pipeline for pretraining records.

Reads `create_pretraining_data`'s records into Model Garden's pretraining
batches; dynamic masks are drawn per batch (`masking.mask_batch`) with seeds
from `tf.data.Dataset.random`. `metadata.json` is checked against the config
first, so a mismatch names both sides. Not reused: Model Garden's
`InputReader` cannot start at a resume step, which exact resume needs.
"""

import dataclasses
import os
from typing import Any, Dict, Mapping, Optional, Tuple

from absl import logging
import gin
import tensorflow as tf

from official.core import config_definitions as cfg
from official.nlp.data import data_loader
from official.nlp.data import data_loader_factory
from official_repro.common import cli
from official_repro.data import masking
from official_repro.data import records
from official_repro.data import vocab


@dataclasses.dataclass
class PretrainDataConfig(cfg.DataConfig):
  """Pretraining input configuration.

  Attributes:
    input_path: the record directory (holding `metadata.json`).
    split: 'train' or 'eval'.
    masking: 'dynamic' or 'static'; must match the records.
    mask_rate, mask_token_fraction, random_token_fraction: dynamic masking.
    max_predictions_per_seq: None: `int((mask_rate + 0.005) *
      max_seq_length)` for dynamic masking, the records' value for static.
    use_next_sentence_label: emit `next_sentence_labels` (records need them).
    masking_seed: seed of the dynamic masks; None draws a fresh one.
    start_step: training: the global step the stream starts at; a resumed run
      skips what the steps before consumed (exactly, with seeds set).
  """

  input_path: str = ''
  split: str = 'train'
  max_seq_length: int = 128
  masking: str = 'dynamic'
  mask_rate: float = 0.15
  max_predictions_per_seq: Optional[int] = None
  mask_token_fraction: float = 0.8
  random_token_fraction: float = 0.1
  use_next_sentence_label: bool = False
  masking_seed: Optional[int] = None
  start_step: int = 0


class RecordMismatchError(cli.UserError):
  """The records on disk do not match the configuration that reads them."""


def check_records(params: PretrainDataConfig) -> Dict[str, Any]:
  """Validates a record directory against the config; returns its metadata.

  Raises RecordMismatchError naming the setting and both values.
  """
  metadata = records.load_metadata(params.input_path)
  where = os.path.join(params.input_path, records.METADATA_FILENAME)
  _check_tokenizer(params, metadata, where)
  if metadata['max_seq_length'] != params.max_seq_length:
    raise RecordMismatchError(
        f'{where}: records were written with max_seq_length='
        f'{metadata["max_seq_length"]}, but the config expects max_seq_length='
        f'{params.max_seq_length} (pretrain_data.max_seq_length). '
        'Regenerate the records or change the config.'
    )
  if metadata['masking'] != params.masking:
    raise RecordMismatchError(
        f'{where}: records use {metadata["masking"]} masking, but the config '
        f'asks for {params.masking} masking (pretrain_data.masking).'
    )
  if params.masking == 'static':
    written = metadata['static_masking']['max_predictions_per_seq']
    if params.max_predictions_per_seq not in (None, written):
      raise RecordMismatchError(
          f'{where}: records hold {written} masked positions per sequence, '
          'but the config asks for max_predictions_per_seq='
          f'{params.max_predictions_per_seq}.'
      )
  if params.use_next_sentence_label and not metadata['next_sentence_labels']:
    raise RecordMismatchError(
        f'{where}: records have no next_sentence_labels, but the config '
        'enables next-sentence prediction.'
    )
  if params.split not in metadata['splits']:
    raise RecordMismatchError(
        f'{where}: no split {params.split!r}; available: '
        f'{sorted(metadata["splits"])}.'
    )
  if not metadata['splits'][params.split]['files']:
    raise RecordMismatchError(
        f'{where}: split {params.split!r} has no record files.'
    )
  return metadata


def _check_tokenizer(
    params: PretrainDataConfig, metadata: Mapping[str, Any], where: str
) -> None:
  """Refuses to train on records another tokenizer made.

  Models are exported and fine-tuned with this code's tokenizer (BERT's or
  ALBERT's); records of TF Text's FastBertTokenizer (no `tokenizer` in the
  metadata) would mix the two. Evaluating on them only warns.
  """
  made_by = metadata.get('tokenizer')
  expected = vocab.Vocabulary.tokenizer_name_of(
      vocab.kind_of_file(metadata['vocab_file'])
  )
  if made_by == expected:
    return
  made_by = (
      "TF Text's FastBertTokenizer (NFKC case folding; the metadata has no "
      '"tokenizer")'
      if made_by is None
      else repr(made_by)
  )
  message = (
      f'{where}: the records were tokenized by {made_by}, not as their '
      f'{metadata["vocab_file"]} is read ({expected!r}, the tokenizer the '
      'trained model is used with); rewrite them with '
      'python -m official_repro.data.create_pretraining_data '
      f'--output_dir={params.input_path} and the flags its metadata.json '
      'lists under "source".'
  )
  if params.is_training:
    raise RecordMismatchError(message)
  logging.warning('%s', message)


def masking_config(
    params: PretrainDataConfig, metadata: Mapping[str, Any]
) -> masking.MaskingConfig:
  """The masking actually applied to these records under this config."""
  if params.masking == 'static':
    written = metadata['static_masking']
    names = [field.name for field in dataclasses.fields(masking.MaskingConfig)]
    return masking.MaskingConfig(**{name: written[name] for name in names})
  max_predictions = params.max_predictions_per_seq or (
      masking.default_max_predictions(params.max_seq_length, params.mask_rate)
  )
  return masking.MaskingConfig(
      mask_rate=params.mask_rate,
      max_predictions_per_seq=max_predictions,
      mask_token_fraction=params.mask_token_fraction,
      random_token_fraction=params.random_token_fraction,
  )


class PretrainDataLoader(data_loader.DataLoader):
  """Loads pretraining records, masking them on the fly if needed."""

  def __init__(self, params: PretrainDataConfig):
    self._params = params
    self.metadata = check_records(params)
    self.masking = masking_config(params, self.metadata)
    self._special_ids = sorted(self.metadata['special_token_ids'].values())
    self._name_to_features = records.feature_spec(self.metadata)

  def _decode(self, record: tf.Tensor) -> Dict[str, tf.Tensor]:
    """A serialized record's model inputs, int64 features as int32."""
    example = tf.io.parse_single_example(record, self._name_to_features)
    example = {
        name: tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
        for name, value in example.items()
    }
    inputs = dict(
        input_word_ids=example['input_ids'],
        input_mask=example['input_mask'],
        input_type_ids=example['segment_ids'],
    )
    if self._params.masking == 'static':
      for name in ('masked_lm_positions', 'masked_lm_ids', 'masked_lm_weights'):
        inputs[name] = example[name]
    if self._params.use_next_sentence_label:
      inputs['next_sentence_labels'] = example['next_sentence_labels']
    return inputs

  def _mask_dynamically(
      self, seed: tf.Tensor, batch: Dict[str, tf.Tensor]
  ) -> Dict[str, tf.Tensor]:
    special = self.metadata['special_token_ids']
    masked = masking.mask_batch(
        batch['input_word_ids'],
        batch['input_mask'],
        config=self.masking,
        mask_token_id=special['mask'],
        special_token_ids=self._special_ids,
        vocab_size=self.metadata['vocab_size'],
        seed=seed,
    )
    return dict(batch, **masked)

  def load(
      self, input_context: Optional[tf.distribute.InputContext] = None
  ) -> tf.data.Dataset:
    """This replica's batches (`input_context` splits batch and files)."""
    params = self._params
    batch_size = (
        input_context.get_per_replica_batch_size(params.global_batch_size)
        if input_context
        else params.global_batch_size
    )
    # Batches this pipeline serves per training step (one per replica it
    # feeds), and so the batches the steps before `start_step` consumed.
    batches_per_step = 1
    if input_context:
      batches_per_step = max(
          1,
          input_context.num_replicas_in_sync
          // input_context.num_input_pipelines,
      )
    consumed_batches = (
        params.start_step * batches_per_step if (params.is_training) else 0
    )
    dataset = self._serialized_records(input_context)
    if consumed_batches:
      # Serialized records, before any decoding: the cheapest place to skip.
      logging.info(
          'Resuming at step %d: skipping the %d records it consumed.',
          params.start_step,
          consumed_batches * batch_size,
      )
      dataset = dataset.skip(consumed_batches * batch_size)
    dataset = dataset.map(self._decode, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.batch(batch_size, drop_remainder=params.drop_remainder)
    if params.masking == 'dynamic':
      dataset = tf.data.Dataset.zip(self._mask_seeds(consumed_batches), dataset)
      dataset = dataset.map(
          self._mask_dynamically, num_parallel_calls=tf.data.AUTOTUNE
      )
    return dataset.prefetch(tf.data.AUTOTUNE)

  def _mask_seeds(self, consumed_batches: int) -> tf.data.Dataset:
    """int64 `[2]` seeds, one per batch, for the dynamic masks.

    Training draws new masks every epoch; evaluation masks identically in every
    pass and run (stateless seeds from `masking_seed` alone).
    """
    params = self._params
    if params.is_training:
      seeds = tf.data.Dataset.random(
          seed=params.masking_seed, rerandomize_each_iteration=True
      ).batch(2)
      return seeds.skip(consumed_batches)
    base = tf.constant(params.masking_seed or 0, tf.int64)
    return tf.data.Dataset.counter().map(lambda index: tf.stack([base, index]))

  def _serialized_records(
      self, input_context: Optional[tf.distribute.InputContext]
  ) -> tf.data.Dataset:
    """This pipeline's share of the split's records, shuffled when training."""
    params = self._params
    # A seeded order is also a deterministic one, so that skipping the
    # consumed records reproduces the interrupted run's stream.
    deterministic = params.deterministic
    if deterministic is None:
      deterministic = params.seed is not None or not params.is_training
    files = records.split_files(self.metadata, params.input_path, params.split)
    num_pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    # Whole files per pipeline when there are at least as many files as
    # pipelines (uneven counts only skew how often a file's records come
    # round); otherwise every pipeline reads every file and keeps every n-th
    # record of it. Either way no two pipelines read the same record,
    # whatever order each shuffles its files in.
    shard_files = num_pipelines > 1 and len(files) >= num_pipelines
    shard_records = num_pipelines > 1 and not shard_files
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if shard_files:
      dataset = dataset.shard(num_pipelines, pipeline_id)
    elif shard_records:
      logging.warning(
          '%d record files for %d input pipelines: each pipeline '
          'reads every file and keeps every %d-th record of it.',
          len(files),
          num_pipelines,
          num_pipelines,
      )

    def read(path):
      file_records = tf.data.TFRecordDataset(path)
      if shard_records:
        file_records = file_records.shard(num_pipelines, pipeline_id)
      return file_records

    if params.is_training:
      dataset = dataset.shuffle(len(files), seed=params.seed)
      dataset = dataset.repeat()
    dataset = dataset.interleave(
        read,
        cycle_length=min(len(files), 8),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic,
    )
    if params.is_training and params.shuffle_buffer_size:
      dataset = dataset.shuffle(params.shuffle_buffer_size, seed=params.seed)
    return dataset


data_loader_factory.register_data_loader_cls(PretrainDataConfig)(
    PretrainDataLoader
)


# The defaults of `pretraining_data_configs` are the data config's own.
_DEFAULTS = PretrainDataConfig()


@gin.configurable('pretrain_data')
def pretraining_data_configs(
    input_path: str = gin.REQUIRED,
    max_seq_length: int = gin.REQUIRED,
    train_batch_size: int = gin.REQUIRED,
    eval_batch_size: Optional[int] = None,
    masking: str = _DEFAULTS.masking,
    mask_rate: float = _DEFAULTS.mask_rate,
    max_predictions_per_seq: Optional[int] = _DEFAULTS.max_predictions_per_seq,
    mask_token_fraction: float = _DEFAULTS.mask_token_fraction,
    random_token_fraction: float = _DEFAULTS.random_token_fraction,
    shuffle_buffer_size: int = 10000,
    seed: Optional[int] = None,
) -> Tuple[PretrainDataConfig, PretrainDataConfig]:
  """`(train_config, eval_config)` for one record directory, from one binding.

  They differ in split, batch size, shuffling and masking seeds;
  `use_next_sentence_label` is set by the objective, not here. UserError for a
  batch size below 1.
  """
  _check_batch_size('train_batch_size', train_batch_size)
  _check_batch_size('eval_batch_size', eval_batch_size)
  common = dict(
      input_path=input_path,
      max_seq_length=max_seq_length,
      masking=masking,
      mask_rate=mask_rate,
      max_predictions_per_seq=max_predictions_per_seq,
      mask_token_fraction=mask_token_fraction,
      random_token_fraction=random_token_fraction,
  )
  train = PretrainDataConfig(
      split='train',
      is_training=True,
      global_batch_size=train_batch_size,
      shuffle_buffer_size=shuffle_buffer_size,
      seed=seed,
      masking_seed=seed,
      drop_remainder=True,
      **common,
  )
  evaluation = PretrainDataConfig(
      split='eval',
      is_training=False,
      global_batch_size=eval_batch_size or train_batch_size,
      drop_remainder=False,
      **common,
  )
  return train, evaluation


def _check_batch_size(name: str, size: Any) -> None:
  if size is not None and (
      isinstance(size, bool) or not isinstance(size, int) or size < 1
  ):
    raise cli.UserError(
        f'pretrain_data.{name} = {size!r}; a batch holds at least 1 '
        'sequence.'
    )


def records_vocabulary(input_path: str) -> Tuple[int, str]:
  """The vocabulary size of a record directory and its vocab file's path."""
  metadata = records.load_metadata(input_path)
  return metadata['vocab_size'], os.path.join(
      input_path, metadata['vocab_file']
  )
