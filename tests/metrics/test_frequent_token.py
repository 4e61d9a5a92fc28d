"""The frequent-token baseline, counted by hand."""

import collections

import pytest
import tensorflow as tf

from official_repro.data import records
from official_repro.metrics import frequent_token


def _words(record_dir, split):
  """Real, non-special token ids of a split, one parsed example at a time."""
  metadata = records.load_metadata(record_dir)
  spec = records.feature_spec(metadata)
  special = set(metadata['special_token_ids'].values())
  words = []
  for path in records.split_files(metadata, record_dir, split):
    for record in tf.data.TFRecordDataset(path):
      example = tf.io.parse_single_example(record, spec)
      words += [
          int(token)
          for token, real in zip(
              example['input_ids'].numpy(), example['input_mask'].numpy()
          )
          if real and int(token) not in special
      ]
  return words


def test_baseline_is_the_most_frequent_training_tokens_eval_share(tiny_records):
  train, held = _words(tiny_records, 'train'), _words(tiny_records, 'eval')
  token, count = collections.Counter(train).most_common(1)[0]
  baseline = frequent_token.frequent_token_baseline(tiny_records)
  assert baseline['token_id'] == token
  assert baseline['train_share'] == pytest.approx(count / len(train))
  assert baseline['accuracy'] == pytest.approx(held.count(token) / len(held))


def test_read_split_returns_every_example_in_file_order(tiny_records):
  metadata = records.load_metadata(tiny_records)
  arrays = records.read_split(tiny_records, 'eval')
  assert len(arrays['input_ids']) == metadata['splits']['eval']['num_examples']
  first = next(
      iter(
          tf.data.TFRecordDataset(
              records.split_files(metadata, tiny_records, 'eval')
          )
      )
  )
  parsed = tf.io.parse_single_example(first, records.feature_spec(metadata))
  for name, value in parsed.items():
    assert (arrays[name][0] == value.numpy()).all(), name
