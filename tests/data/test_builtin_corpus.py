"""The built-in corpus: deterministic, prose only, on any file system."""

import os

import tensorflow as tf

from official_repro.data import builtin_corpus
from official_repro.data import text_cleaning as tc


def _read_corpus(path):
  """`(documents, stats)` of the corpus in `path`, read as records read it."""
  reader, stats, documents = (
      tc.CorpusReader(tc.CleaningOptions()),
      tc.CorpusStats(),
      [],
  )
  for name in tc.find_files([path], '*.txt'):
    documents.extend(reader.iter_documents(name, stats))
  return documents, stats


class TestBuiltinCorpus:

  def test_writes_readable_deterministic_corpus(self, tmp_path):
    first = builtin_corpus.write_builtin_corpus(
        str(tmp_path / 'a'), max_chars=60_000
    )
    second = builtin_corpus.write_builtin_corpus(
        str(tmp_path / 'b'), max_chars=60_000
    )
    contents = [open(p, encoding='utf-8').read() for p in first]
    assert contents == [open(p, encoding='utf-8').read() for p in second]
    assert sum(len(c) for c in contents) <= 60_000
    documents, stats = _read_corpus(str(tmp_path / 'a'))
    assert stats.documents == stats.paragraphs >= 5
    assert all(len(doc) >= 1 for doc in documents)
    assert not any('>>>' in s for doc in documents for s in doc)

  def test_writes_the_same_corpus_on_ram_filesystem(self, tmp_path, ram_dir):
    local = builtin_corpus.write_builtin_corpus(
        str(tmp_path / 'local'), max_chars=20_000
    )
    remote = builtin_corpus.write_builtin_corpus(
        os.path.join(ram_dir, 'corpus'), max_chars=20_000
    )
    assert [os.path.basename(p) for p in remote] == [
        os.path.basename(p) for p in local
    ]
    for local_path, remote_path in zip(local, remote):
      assert remote_path.startswith(ram_dir)
      with open(local_path, encoding='utf-8') as f:
        expected = f.read()
      with tf.io.gfile.GFile(remote_path) as f:
        assert f.read() == expected

  def test_prose_paragraphs_skip_code_and_titles(self):
    text = (
        'Title Line\n==========\n\nA real sentence here\nwrapped.\n\n'
        '>>> print(1)\n1\n\nArgs:\n  x: a value.\n\n    indented code.\n'
    )
    assert builtin_corpus.prose_paragraphs(text) == [
        'A real sentence here wrapped.'
    ]
