"""The record input pipeline: masking modes, determinism, checks, sharding."""

import json
import os
import shutil
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

from official_repro.data import pretrain_dataloader
from official_repro.data import records


def _config(path, **overrides):
  fields = dict(
      input_path=path,
      split='train',
      max_seq_length=32,
      global_batch_size=4,
      is_training=True,
      shuffle_buffer_size=0,
      masking='dynamic',
      masking_seed=7,
      drop_remainder=True,
  )
  fields.update(overrides)
  return pretrain_dataloader.PretrainDataConfig(**fields)


def _take(dataset, n):
  return [{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(n)]


def _num_batches_per_epoch(path, batch_size=4):
  metadata = records.load_metadata(path)
  return metadata['splits']['train']['num_examples'] // batch_size


def _original_ids(example):
  """Undoes the masking: the sequence as written in the record."""
  ids = example['input_word_ids'].copy()
  real = example['masked_lm_weights'] > 0
  ids[example['masked_lm_positions'][real]] = example['masked_lm_ids'][real]
  return ids


def test_dynamic_masks_differ_across_epochs(tiny_records):
  loader = pretrain_dataloader.PretrainDataLoader(_config(tiny_records))
  metadata = loader.metadata
  assert len(metadata['splits']['train']['files']) == 1  # fixed order
  per_epoch = metadata['splits']['train']['num_examples']
  # Unbatch so that epochs align although a batch may straddle them.
  examples = _take(loader.load().unbatch(), 2 * per_epoch)
  same_positions = 0
  for a, b in zip(examples[:per_epoch], examples[per_epoch:]):
    np.testing.assert_array_equal(_original_ids(a), _original_ids(b))
    same_positions += np.array_equal(
        a['masked_lm_positions'], b['masked_lm_positions']
    )
  assert same_positions < per_epoch / 2


def _eval_config(record_dir):
  """The eval split, masked as a run's evaluation masks it (no seed given)."""
  return _config(
      record_dir,
      split='eval',
      is_training=False,
      masking_seed=None,
      drop_remainder=False,
  )


def test_eval_masks_are_identical_on_every_pass(tiny_records):
  config = _eval_config(tiny_records)
  dataset = pretrain_dataloader.PretrainDataLoader(config).load()
  first = _take(dataset, 100)
  second = _take(dataset, 100)
  assert first
  for a, b in zip(first, second):
    for name in a:
      np.testing.assert_array_equal(a[name], b[name])


def test_eval_masks_do_not_depend_on_the_runs_global_seed(tiny_records):
  config = _eval_config(tiny_records)
  passes = []
  for global_seed in (1, 2):
    tf.random.set_seed(global_seed)
    passes.append(
        _take(pretrain_dataloader.PretrainDataLoader(config).load(), 100)
    )
  assert passes[0]
  for a, b in zip(*passes):
    for name in a:
      np.testing.assert_array_equal(a[name], b[name])


def test_dynamic_batch_layout(tiny_records):
  loader = pretrain_dataloader.PretrainDataLoader(_config(tiny_records))
  batch = _take(loader.load(), 1)[0]
  predictions = loader.masking.max_predictions_per_seq
  assert predictions == int((0.15 + 0.005) * 32)
  assert batch['input_word_ids'].shape == (4, 32)
  assert batch['input_type_ids'].shape == (4, 32)
  assert batch['masked_lm_positions'].shape == (4, predictions)
  assert batch['masked_lm_weights'].dtype == np.float32
  assert 'next_sentence_labels' not in batch


def test_static_records_pass_masks_through(static_records):
  config = _config(
      static_records, masking='static', use_next_sentence_label=True
  )
  loader = pretrain_dataloader.PretrainDataLoader(config)
  batch = _take(loader.load(), 1)[0]
  mask_id = loader.metadata['special_token_ids']['mask']
  positions = batch['masked_lm_positions']
  shown = np.take_along_axis(batch['input_word_ids'], positions, axis=1)
  real = batch['masked_lm_weights'] > 0
  assert (shown[real] == mask_id).mean() > 0.5
  assert batch['next_sentence_labels'].shape == (4, 1)


@pytest.mark.parametrize(
    'overrides, message',
    [
        (
            dict(max_seq_length=64),
            r'max_seq_length=32.*expects max_seq_length=64',
        ),
        (dict(masking='static'), r'dynamic masking.*static masking'),
        (dict(use_next_sentence_label=True), r'no next_sentence_labels'),
        (dict(split='test'), r"no split 'test'"),
    ],
)
def test_mismatches_are_named(tiny_records, overrides, message):
  with pytest.raises(pretrain_dataloader.RecordMismatchError, match=message):
    pretrain_dataloader.PretrainDataLoader(_config(tiny_records, **overrides))


def test_static_prediction_slots_must_match(static_records):
  with pytest.raises(
      pretrain_dataloader.RecordMismatchError,
      match='masked positions per sequence',
  ):
    pretrain_dataloader.PretrainDataLoader(
        _config(static_records, masking='static', max_predictions_per_seq=3)
    )


def _copy_with_tokenizer(record_dir, output_dir, tokenizer):
  """A copy of a record directory whose metadata names `tokenizer`."""
  shutil.copytree(record_dir, output_dir)
  path = os.path.join(output_dir, records.METADATA_FILENAME)
  with open(path) as f:
    metadata = json.load(f)
  del metadata['tokenizer']
  if tokenizer is not None:
    metadata['tokenizer'] = tokenizer
  with open(path, 'w') as f:
    json.dump(metadata, f)
  return str(output_dir)


@pytest.mark.parametrize(
    'tokenizer, says',
    [
        (None, "TF Text's FastBertTokenizer"),
        ('sentencepiece', "'sentencepiece'"),
        # Our SentencePiece tokenizer, but the records' vocab.txt is not.
        (
            'sentencepiece-albert',
            "as their vocab.txt is read ('wordpiece-bert'",
        ),
    ],
)
def test_training_on_records_of_another_tokenizer_is_refused(
    tiny_records, tmp_path, tokenizer, says
):
  old = _copy_with_tokenizer(tiny_records, tmp_path / 'old', tokenizer)
  with pytest.raises(pretrain_dataloader.RecordMismatchError) as refused:
    pretrain_dataloader.PretrainDataLoader(_config(old))
  (line,) = str(refused.value).splitlines()
  assert line.startswith(os.path.join(old, 'metadata.json') + ': ')
  assert says in line
  assert f'create_pretraining_data --output_dir={old} ' in line
  # Evaluation on them is let through, with the same words in a warning.
  with mock.patch.object(pretrain_dataloader.logging, 'warning') as warning:
    pretrain_dataloader.PretrainDataLoader(
        _config(old, split='eval', is_training=False, drop_remainder=False)
    )
  assert warning.call_args.args[1] == line


def test_missing_metadata_names_the_path(tmp_path):
  with pytest.raises(
      (FileNotFoundError, ValueError),
      match=os.path.join(str(tmp_path), 'metadata.json'),
  ):
    pretrain_dataloader.PretrainDataLoader(_config(str(tmp_path)))


def test_input_pipelines_read_disjoint_examples(tiny_records):
  config = _config(
      tiny_records,
      split='eval',
      is_training=False,
      drop_remainder=False,
      global_batch_size=2,
  )
  seen = []
  for pipeline in range(2):
    context = tf.distribute.InputContext(
        num_input_pipelines=2,
        input_pipeline_id=pipeline,
        num_replicas_in_sync=2,
    )
    dataset = pretrain_dataloader.PretrainDataLoader(config).load(context)
    seen.append(
        [
            tuple(_original_ids(example))
            for example in _take(dataset.unbatch(), 1000)
        ]
    )
  total = records.load_metadata(tiny_records)['splits']['eval']['num_examples']
  assert seen[0] and seen[1]
  assert len(seen[0]) + len(seen[1]) == total
  assert not set(seen[0]) & set(seen[1])


def test_training_pipelines_stay_disjoint_with_fewer_files_than_pipelines(
    tiny_records,
):
  """Hosts that shuffle differently still never share a record.

  Hosts that shuffle differently (other seeds) still never share a
  record: with fewer files than pipelines each keeps every n-th record of
  every file, rather than every n-th record of its own shuffled stream.
  """
  files = records.load_metadata(tiny_records)['splits']['train']['files']
  assert len(files) < 3
  seen = []
  for pipeline in range(3):
    config = _config(
        tiny_records,
        global_batch_size=3,
        seed=100 + pipeline,
        shuffle_buffer_size=50,
    )
    context = tf.distribute.InputContext(
        num_input_pipelines=3,
        input_pipeline_id=pipeline,
        num_replicas_in_sync=3,
    )
    dataset = pretrain_dataloader.PretrainDataLoader(config).load(context)
    seen.append(
        {
            tuple(_original_ids(example))
            for example in _take(dataset.unbatch(), 60)
        }
    )
  assert all(seen)
  for first, second in ((0, 1), (0, 2), (1, 2)):
    assert not seen[first] & seen[second]
