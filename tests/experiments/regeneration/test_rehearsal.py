"""Tests of experiments.regeneration.rehearsal's record building."""

import json
import os

import pytest

from experiments.regeneration import rehearsal
from tests import conftest


@pytest.mark.slow
def test_records_are_built_once_and_rebuilt_when_another_tokenizer_made_them(
    tmp_path,
):
  corpus = conftest.write_fixture_files(tmp_path / 'corpus', 3)
  vocab = conftest.write_fixture_vocab(tmp_path / 'vocab.txt')
  root = str(tmp_path / 'data')
  (path,) = rehearsal.build_records(
      str(corpus), str(vocab), root, ['128-dynamic']
  ).values()
  metadata_path = os.path.join(path, 'metadata.json')
  built = os.path.getmtime(metadata_path)
  rehearsal.build_records(str(corpus), str(vocab), root, ['128-dynamic'])
  assert os.path.getmtime(metadata_path) == built  # kept

  # Records of the tokenizer before this one: no 'tokenizer' in them.
  with open(metadata_path) as f:
    metadata = json.load(f)
  del metadata['tokenizer']
  with open(metadata_path, 'w') as f:
    json.dump(metadata, f)
  rehearsal.build_records(str(corpus), str(vocab), root, ['128-dynamic'])
  with open(metadata_path) as f:
    assert json.load(f)['tokenizer'] == 'wordpiece-bert'
