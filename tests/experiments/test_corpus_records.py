"""The experiments' book records: the README's settings, built only once."""

import os

import pytest

from experiments import corpus_records
from tests import conftest


@pytest.mark.slow
def test_books_are_recorded_as_the_readme_makes_them_and_only_once(tmp_path):
  books = conftest.write_fixture_files(tmp_path / 'books', 6)
  output_dir = str(tmp_path / 'records')
  metadata = corpus_records.books_records(
      str(books),
      None,
      output_dir,
      max_seq_length=32,
      vocab_size=150,
      eval_fraction=0.34,
  )
  source = metadata['source']
  assert source['document_mode'] == 'file'
  assert source['strip_gutenberg'] and source['lower_case']
  assert source['masking'] == 'dynamic'
  assert source['vocab_size'] == 150 and source['vocab_file'] is None
  assert metadata['max_seq_length'] == 32
  # Whole books are held out: 6 files, one document each.
  documents = {
      s: metadata['stats']['splits'][s]['documents'] for s in ('train', 'eval')
  }
  assert documents == {'train': 4, 'eval': 2}

  metadata_path = os.path.join(output_dir, 'metadata.json')
  before = os.stat(metadata_path).st_mtime_ns
  for path in books.iterdir():
    path.unlink()  # A rebuild would now fail: nothing is read again.
  again = corpus_records.books_records(str(books), None, output_dir)
  assert again == metadata
  assert os.stat(metadata_path).st_mtime_ns == before


def test_a_given_vocabulary_is_used_and_none_is_learned(tmp_path):
  books = conftest.write_fixture_files(tmp_path / 'books', 3)
  vocab = conftest.write_fixture_vocab(tmp_path / 'vocab.txt')
  metadata = corpus_records.books_records(
      str(books),
      str(vocab),
      str(tmp_path / 'records'),
      max_seq_length=32,
      vocab_size=150,
  )
  assert metadata['source']['vocab_size'] is None
  assert metadata['vocab_size'] == len(vocab.read_text().split())
