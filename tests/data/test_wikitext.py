"""Tests for the WikiText reader, vocabulary and windowing."""

import numpy as np
import pytest

from official_repro.data import wikitext

_TEXT = """ 
 = Alpha = 
 
 the cat sat on the mat . 
 the <unk> ran . 
 
 = = History = = 
 
 a dog sat . 
 
 = Beta = 
 
 the bird sang on the tree . 
 
 = Gamma = 
 
 the cat sang . 
"""  # noqa: W291, W293  (WikiText lines begin and end with a space)


@pytest.fixture(name='wiki_file')
def fixture_wiki_file(tmp_path):
  path = tmp_path / 'wiki.tokens'
  path.write_text(_TEXT)
  return str(path)


def test_tokenize_adds_eos_per_line_and_keeps_unk(wiki_file):
  lines = wikitext.read_lines(wiki_file)
  tokens = wikitext.tokenize(lines)
  assert len(lines) == 17
  assert tokens.count(wikitext.EOS) == 17
  assert tokens[:6] == ['<eos>', '=', 'Alpha', '=', '<eos>', '<eos>']
  assert '<unk>' in tokens
  stats = wikitext.TextStats.of(wiki_file, lines)
  assert stats.blank_lines == 8
  assert stats.heading_lines == 4
  assert stats.unk_tokens == 1
  assert stats.tokens == len(tokens)


def test_reads_the_same_from_ram_filesystem(wiki_file, to_ram):
  remote = to_ram(wiki_file)
  assert wikitext.read_lines(remote) == wikitext.read_lines(wiki_file)
  with pytest.raises(FileNotFoundError, match='missing'):
    wikitext.read_lines(remote + '.missing')


def test_heading_level():
  assert wikitext.heading_level(' = Alpha Beta = ') == 1
  assert wikitext.heading_level(' = = History = = ') == 2
  assert wikitext.heading_level(' = = = Early life = = = ') == 3
  assert wikitext.heading_level(' a = b = c ') == 0
  assert wikitext.heading_level(' ') == 0


def test_split_lines_cuts_at_next_title(wiki_file):
  lines = wikitext.read_lines(wiki_file)
  split = wikitext.split_lines(lines, 0.5, wiki_file)
  # Nominal cut round(17 * 0.5) = 8 (a blank line); the next title is 10.
  assert split.cut == 10 and split.at_title
  assert split.heldout_lines[0] == ' = Beta = '
  assert split.train_lines + split.heldout_lines == lines
  assert 'lines 11-17 of 17' in split.describe(wiki_file, 0.5)


def test_split_lines_without_title_cuts_exactly(wiki_file):
  lines = wikitext.read_lines(wiki_file)
  split = wikitext.split_lines(lines, 0.1, wiki_file)
  assert split.cut == 15 and not split.at_title


def test_split_lines_errors(wiki_file):
  lines = wikitext.read_lines(wiki_file)
  with pytest.raises(ValueError, match='valid_fraction must be in'):
    wikitext.split_lines(lines, 1.0)
  with pytest.raises(ValueError, match='held-out part without tokens'):
    wikitext.split_lines(lines[:-1] + [' '], 0.01, wiki_file)


def test_vocabulary_order_and_cap():
  tokens = 'b a a c c c <eos> <unk> d'.split()
  full = wikitext.Vocabulary.build(tokens)
  assert full.words == ['<eos>', '<unk>', 'c', 'a', 'b', 'd']
  capped = wikitext.Vocabulary.build(tokens, max_size=4)
  assert capped.words == ['<eos>', '<unk>', 'c', 'a']
  assert capped.build_stats == dict(
      distinct_words=4, kept_words=2, capped_types=2, capped_tokens=2
  )
  ids, stats = capped.encode(tokens)
  assert ids.dtype == np.int32
  assert capped.decode(ids) == '<unk> a a c c c <eos> <unk> <unk>'.split()
  assert stats == wikitext.EncodeStats(
      tokens=9, unk_tokens=3, oov_tokens=2, oov_types=2
  )
  with pytest.raises(ValueError, match='max_vocab_size must be >= 3'):
    wikitext.Vocabulary.build(tokens, max_size=2)


def _collect(dataset):
  tokens, weights = [], []
  for batch in dataset:
    tokens.append(batch['tokens'].numpy())
    weights.append(batch['weights'].numpy())
  return np.concatenate(tokens), np.concatenate(weights)


def test_eval_windows_cover_the_stream_once():
  stream = np.arange(3, 26, dtype=np.int32)  # 23 tokens, 22 targets.
  tokens, weights = _collect(
      wikitext.window_dataset(
          stream, seq_length=5, batch_size=2, training=False
      )
  )
  assert tokens.shape == (5, 6) and weights.shape == (5, 5)
  targets = tokens[:, 1:][weights > 0]
  np.testing.assert_array_equal(targets, stream[1:])
  np.testing.assert_array_equal(tokens[:, :-1][weights > 0], stream[:-1])
  assert weights.sum() == 22
  stats = wikitext.window_stats(23, 5, 2, training=False)
  assert (
      stats.windows,
      stats.target_tokens,
      stats.dropped_targets,
      stats.batches,
  ) == (5, 22, 0, 3)


def test_train_windows_whole_and_shuffled():
  stream = np.arange(23, dtype=np.int32)
  dataset = wikitext.window_dataset(
      stream, seq_length=5, batch_size=2, training=True, seed=0
  )
  batches = [b['tokens'].numpy() for b in dataset.take(4)]
  starts = sorted(int(w[0]) for b in batches[:2] for w in b)
  # 4 whole windows (stride 5); the last 2 targets are dropped.
  assert starts == [0, 5, 10, 15]
  for batch in batches:
    assert batch.shape == (2, 6)
    np.testing.assert_array_equal(batch[:, 1:] - batch[:, :-1], 1)
  stats = wikitext.window_stats(23, 5, 2, training=True)
  assert (stats.windows, stats.target_tokens, stats.dropped_targets) == (
      4,
      20,
      2,
  )


def test_window_dataset_too_short():
  with pytest.raises(
      ValueError, match='train stream has 10 tokens.*needs at ' 'least 21'
  ):
    wikitext.window_dataset(
        np.arange(10, dtype=np.int32), 5, 4, True, name='train'
    )


def test_missing_and_empty_files(tmp_path):
  missing = str(tmp_path / 'nope.tokens')
  with pytest.raises(FileNotFoundError, match='nope.tokens'):
    wikitext.read_lines(missing)
  empty = tmp_path / 'empty.tokens'
  empty.write_text(' \n\n \n')
  with pytest.raises(ValueError, match='empty.tokens.*is empty'):
    wikitext.read_lines(str(empty))


def test_load_corpus_fraction_and_files(wiki_file, tmp_path):
  corpus = wikitext.load_corpus(wiki_file, valid_fraction=0.5)
  assert 'lines 11-17' in corpus.split_note
  assert corpus.test is None
  # Some words appear only in the held-out part.
  valid = corpus.stats['valid']['encoding']
  assert valid['oov_types'] == 5  # Beta, bird, sang, tree, Gamma.
  assert corpus.stats['train']['text']['lines'] == 10
  assert len(corpus.valid) == valid['tokens']
  other = tmp_path / 'test.tokens'
  other.write_text(' the cat sat . \n')
  corpus = wikitext.load_corpus(
      wiki_file, valid_file=wiki_file, max_vocab_size=5, test_file=str(other)
  )
  assert len(corpus.vocab) == 5
  assert corpus.vocab.decode(corpus.test) == [
      'the',
      '<unk>',
      '<unk>',
      '.',
      '<eos>',
  ]
  with pytest.raises(
      ValueError, match='exactly one of valid_file and ' 'valid_fraction'
  ):
    wikitext.load_corpus(wiki_file)


def test_unigram_log_probs_add_one():
  log_probs = wikitext.unigram_log_probs(np.array([0, 0, 2], np.int32), 4)
  assert log_probs.shape == (4,) and log_probs.dtype == np.float32
  np.testing.assert_allclose(
      np.exp(log_probs), [3 / 7, 1 / 7, 2 / 7, 1 / 7], rtol=1e-6
  )
