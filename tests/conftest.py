"""Test setup: Keras 2 for Model Garden, quiet TensorFlow logs, CPU only."""

import os

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
os.environ.setdefault('CUDA_VISIBLE_DEVICES', '')

# pylint: disable=g-import-not-at-top,wrong-import-position
import random

import pytest

_WORDS = ('the quick brown fox jumps over a lazy dog while birds sing in the '
          'old trees near the river and children play games on green grass '
          'under bright summer skies').split()


def write_fixture_corpus(directory, num_documents=30, seed=0):
  """Writes a small blank-line-separated corpus; returns its path."""
  rng = random.Random(seed)
  directory.mkdir(parents=True, exist_ok=True)
  path = directory / 'corpus.txt'
  with open(path, 'w') as f:
    for _ in range(num_documents):
      sentences = []
      for _ in range(rng.randint(4, 9)):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(4, 12))]
        sentences.append(' '.join(words).capitalize() + '.')
      f.write(' '.join(sentences) + '\n\n')
  return path


@pytest.fixture(scope='session')
def tiny_records(tmp_path_factory):
  """A dynamically masked record directory (max_seq_length 32, ~100 vocab)."""
  from official_repro.data import create_pretraining_data
  root = tmp_path_factory.mktemp('tiny_records')
  corpus = write_fixture_corpus(root / 'corpus')
  output_dir = str(root / 'records')
  create_pretraining_data.prepare_pretraining_data(
      [str(corpus)], output_dir, vocab_size=120, max_seq_length=32,
      eval_fraction=0.1, seed=3)
  return output_dir


@pytest.fixture(scope='session')
def static_records(tmp_path_factory):
  """Statically masked records with next-sentence labels, 2 copies each."""
  from official_repro.data import create_pretraining_data
  root = tmp_path_factory.mktemp('static_records')
  corpus = write_fixture_corpus(root / 'corpus', seed=1)
  output_dir = str(root / 'records')
  create_pretraining_data.prepare_pretraining_data(
      [str(corpus)], output_dir, vocab_size=120, max_seq_length=32,
      masking='static', dupe_factor=2, next_sentence_prediction=True,
      eval_fraction=0.1, seed=4)
  return output_dir
