"""The Beam pipeline (DirectRunner) writes what the local run writes."""

import os

import pytest
import tensorflow as tf

from tests.conftest import write_fixture_files
from tests.conftest import write_fixture_vocab
from official_repro.data import create_pretraining_data as cpd
from official_repro.data import pretrain_dataloader

pytest.importorskip('apache_beam')


def _files(output_dir):
  return {
      name: tf.io.gfile.GFile(os.path.join(output_dir, name), 'rb').read()
      for name in sorted(tf.io.gfile.listdir(output_dir))
      if name != 'metadata.json'
  }


@pytest.mark.slow
def test_beam_and_local_write_the_same_records(tmp_path):
  corpus = str(write_fixture_files(tmp_path / 'corpus', 3, num_documents=8))
  settings = dict(
      vocab_size=60,
      max_seq_length=32,
      masking='static',
      dupe_factor=2,
      eval_fraction=0.2,
      num_shards=2,
      seed=5,
  )
  local = cpd.prepare_pretraining_data(
      [corpus], str(tmp_path / 'local'), num_workers=1, **settings
  )
  beam = cpd.prepare_pretraining_data(
      [corpus],
      str(tmp_path / 'beam'),
      engine='beam',
      beam_options='--runner=DirectRunner',
      **settings,
  )
  assert beam['stats']['execution']['engine'] == 'beam'
  assert beam['splits'] == local['splits']
  assert beam['stats']['splits'] == local['stats']['splits']
  assert beam['stats']['tokenization'] == local['stats']['tokenization']
  assert beam['stats']['vocab_sample'] == local['stats']['vocab_sample']
  # Same vocabulary (learned from the same sample), same shard bytes.
  assert _files(str(tmp_path / 'beam')) == _files(str(tmp_path / 'local'))
  # The training input pipeline reads them.
  train = pretrain_dataloader.PretrainDataConfig(
      input_path=str(tmp_path / 'beam'),
      split='train',
      max_seq_length=32,
      global_batch_size=4,
      is_training=True,
      masking='static',
      max_predictions_per_seq=4,
  )
  batch = next(iter(pretrain_dataloader.PretrainDataLoader(train).load()))
  assert batch['input_word_ids'].shape == (4, 32)
  assert not [n for n in os.listdir(tmp_path / 'beam') if '.tmp-' in n]


@pytest.mark.slow
def test_one_file_of_many_groups_gives_the_local_records(tmp_path):
  """Group boundaries inside a file do not depend on the runner."""
  corpus = write_fixture_files(tmp_path / 'corpus', 1, num_documents=40)
  settings = dict(
      vocab_file=str(write_fixture_vocab(tmp_path / 'vocab.txt')),
      max_seq_length=32,
      masking='static',
      dupe_factor=2,
      next_sentence_prediction=True,
      eval_fraction=0.2,
      num_shards=2,
      group_mb=2000 / 2**20,
      seed=5,
  )
  local = cpd.prepare_pretraining_data(
      [str(corpus)], str(tmp_path / 'local'), num_workers=1, **settings
  )
  beam = cpd.prepare_pretraining_data(
      [str(corpus)],
      str(tmp_path / 'beam'),
      engine='beam',
      beam_options='--runner=DirectRunner',
      **settings,
  )
  assert beam['stats']['groups'] == local['stats']['groups'] >= 4
  assert beam['stats']['splits'] == local['stats']['splits']
  assert _files(str(tmp_path / 'beam')) == _files(str(tmp_path / 'local'))
