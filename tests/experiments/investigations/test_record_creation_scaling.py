"""The scaling benchmark's corpus builder."""

import os

import pytest

from experiments.investigations import record_creation_scaling
from official_repro.common import cli

pytestmark = pytest.mark.slow


def test_corpus_is_whole_copies_of_the_books_up_to_the_size(tmp_path):
  books = tmp_path / 'books'
  books.mkdir()
  (books / 'a.txt').write_text('a' * 300_000)
  (books / 'b.txt').write_text('b' * 200_000)
  (books / 'notes.md').write_text('not a book')
  out = tmp_path / 'corpus'
  total = record_creation_scaling.build_corpus(str(books), str(out), 1.2)
  # 0.5 MB per copy: three copies reach 1.2 MB, two do not.
  assert total == 1_500_000
  assert sorted(os.listdir(out)) == ['copy000', 'copy001', 'copy002']
  assert sorted(os.listdir(out / 'copy002')) == ['a.txt', 'b.txt']


def test_one_file_corpus_concatenates_whole_copies(tmp_path):
  books = tmp_path / 'books'
  books.mkdir()
  (books / 'a.txt').write_text('a' * 300_000)
  (books / 'b.txt').write_text('b' * 200_000)
  out = tmp_path / 'corpus'
  total = record_creation_scaling.build_corpus(
      str(books), str(out), 1.2, one_file=True
  )
  assert total == 1_500_000
  assert os.listdir(out) == ['corpus.txt']
  assert (out / 'corpus.txt').read_text() == ('a' * 300_000 + 'b' * 200_000) * 3


def test_a_remote_corpus_is_refused(tmp_path):
  with pytest.raises(cli.UserError, match='local directory'):
    record_creation_scaling.build_corpus('gs://b/books', str(tmp_path), 1.0)
