"""Tests for official_repro.data.vocab."""

import re

import pytest

from official_repro.data import vocab
from tests.data.tokenizer_texts import detokenize

_SENTENCES = [
    'The old man saw a small boat near the river.',
    'A young girl found the red ball in the garden!',
    'Did the farmer sell his horses at the market?',
    'The teacher read a long story to the children.',
    'Rain fell on the quiet village all night.',
    'The children played near the river after school.',
    'A small dog followed the old man to the market.',
    'The farmer and the teacher walked home together.',
] * 4


def _write_lines(path, lines):
  path.write_text(''.join(line + '\n' for line in lines), encoding='utf-8')
  return str(path)


def _basic_words(sentence):
  return re.findall(r'\w+|[^\w\s]', sentence.lower())


class TestLoadVocab:

  def test_loads_tokens_in_order(self, tmp_path):
    tokens = list(vocab.SPECIAL_TOKENS) + ['the', '##s']
    assert vocab.load_vocab(_write_lines(tmp_path / 'v.txt', tokens)) == tokens

  def test_missing_file(self, tmp_path):
    with pytest.raises(FileNotFoundError, match='missing.txt'):
      vocab.load_vocab(str(tmp_path / 'missing.txt'))

  def test_a_folder_is_named_as_a_folder(self, tmp_path):
    with pytest.raises(ValueError, match='is a folder; give the vocabulary'):
      vocab.load_vocab(str(tmp_path))

  def test_a_byte_order_mark_is_named(self, tmp_path):
    path = tmp_path / 'v.txt'
    path.write_text('\n'.join(vocab.SPECIAL_TOKENS), encoding='utf-8-sig')
    with pytest.raises(ValueError, match='starts with a UTF-8 byte-order'):
      vocab.load_vocab(str(path))

  def test_empty_file(self, tmp_path):
    path = tmp_path / 'v.txt'
    path.write_text('')
    with pytest.raises(ValueError, match='is empty'):
      vocab.load_vocab(str(path))

  def test_duplicate_token_names_lines(self, tmp_path):
    path = _write_lines(
        tmp_path / 'v.txt', list(vocab.SPECIAL_TOKENS) + ['cat', 'dog', 'cat']
    )
    with pytest.raises(
        ValueError, match=r"line 8: duplicate token 'cat' \(first on line 6"
    ):
      vocab.load_vocab(path)

  def test_empty_line(self, tmp_path):
    path = _write_lines(tmp_path / 'v.txt', ['[PAD]', '', '[UNK]'])
    with pytest.raises(ValueError, match='line 2: empty token'):
      vocab.load_vocab(path)

  def test_missing_special_token(self, tmp_path):
    path = _write_lines(
        tmp_path / 'v.txt', ['[PAD]', '[UNK]', '[CLS]', '[SEP]', 'cat']
    )
    with pytest.raises(
        ValueError, match=r"lacks required tokens \['\[MASK\]'\]"
    ):
      vocab.load_vocab(path)


class TestSpecialTokenIds:

  def test_looked_up_by_string(self):
    # The BERT uncased layout: [PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102,
    # [MASK]=103.
    tokens = (
        ['[PAD]']
        + [f'[unused{i}]' for i in range(99)]
        + ['[UNK]', '[CLS]', '[SEP]', '[MASK]', 'the']
    )
    ids = vocab.SpecialTokenIds.from_vocab(tokens)
    assert ids == vocab.SpecialTokenIds(
        pad=0, unk=100, cls=101, sep=102, mask=103
    )
    assert ids.all_ids() == (0, 100, 101, 102, 103)

  def test_other_layout(self):
    tokens = ['a', '[MASK]', '[SEP]', '[CLS]', '[UNK]', '[PAD]']
    assert vocab.SpecialTokenIds.from_vocab(tokens).all_ids() == (5, 4, 3, 2, 1)

  def test_missing(self):
    with pytest.raises(ValueError, match=r"\['\[CLS\]'\]"):
      vocab.SpecialTokenIds.from_vocab(['[PAD]', '[UNK]', '[SEP]', '[MASK]'])


class TestBuildAndTokenize:

  @pytest.fixture(scope='class')
  def built(self, tmp_path_factory):
    path = str(tmp_path_factory.mktemp('vocab') / 'vocab.txt')
    tokens = vocab.build_wordpiece_vocab(_SENTENCES, 120, path)
    return path, tokens

  def test_build_writes_special_tokens_first(self, built):
    path, tokens = built
    assert tokens[:5] == list(vocab.SPECIAL_TOKENS)
    assert len(tokens) <= 120
    assert vocab.load_vocab(path) == tokens
    assert vocab.SpecialTokenIds.from_vocab(tokens).all_ids() == (0, 1, 2, 3, 4)

  def test_tokenize_round_trip(self, built):
    path, tokens = built
    ids = vocab.tokenize_with_vocab(
        _SENTENCES[:8], vocab.load_vocab(path), lower_case=True, batch_size=3
    )
    unk = tokens.index('[UNK]')
    for sentence, sentence_ids in zip(_SENTENCES, ids):
      assert unk not in sentence_ids
      assert detokenize(sentence_ids, tokens) == _basic_words(sentence)

  def test_batch_size_does_not_change_result(self, built):
    _, tokens = built
    sentences = _SENTENCES[:7] + ['', '   ']
    assert vocab.tokenize_with_vocab(sentences, tokens, True, batch_size=2) == (
        vocab.tokenize_with_vocab(sentences, tokens, True, batch_size=100)
    )
    assert vocab.tokenize_with_vocab(sentences, tokens, True)[-2:] == [[], []]

  def test_lower_case_strips_accents_and_unknown_is_unk(self, built):
    _, tokens = built
    (ids,) = vocab.tokenize_with_vocab(['THE Rivér \u4e2d'], tokens, True)
    assert detokenize(ids, tokens) == ['the', 'river', '[UNK]']

  def test_build_rejects_tiny_size(self, tmp_path):
    with pytest.raises(ValueError, match='vocab_size must exceed 5'):
      vocab.build_wordpiece_vocab(_SENTENCES, 5, str(tmp_path / 'v.txt'))


def test_a_size_below_one_piece_per_character_is_refused_before_learning(
    tmp_path, monkeypatch
):
  def learn(*args, **kwargs):
    raise AssertionError('the learner ran')

  monkeypatch.setattr(vocab.learner, 'learn', learn)
  # Punctuation is split into words of its own; its characters count too.
  characters = set(''.join(_SENTENCES).lower()) - {' '}
  smallest = len(vocab.SPECIAL_TOKENS) + len(characters)
  with pytest.raises(
      ValueError, match=f'{len(characters)} characters .* at least {smallest}'
  ):
    vocab.build_wordpiece_vocab(_SENTENCES, smallest - 1, str(tmp_path / 'v'))
  with pytest.raises(AssertionError, match='the learner ran'):
    vocab.build_wordpiece_vocab(_SENTENCES, smallest + 4, str(tmp_path / 'v'))


def test_vocab_round_trips_on_a_non_local_filesystem():
  # tf.io.gfile's in-memory filesystem stands in for gs://: a reader that
  # used open() or os.path would not find the file.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  path = 'ram://vocab_test/vocab.txt'
  tokens = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', 'river', '##s']
  vocab.write_vocab(tokens, path)
  assert tf.io.gfile.exists(path)
  assert vocab.load_vocab(path) == tokens
  with pytest.raises(FileNotFoundError, match='ram://vocab_test/missing'):
    vocab.load_vocab('ram://vocab_test/missing.txt')


def _words(count):
  """`count` (< 26**3) distinct lower-case words of three letters."""
  letters = 'abcdefghijklmnopqrstuvwxyz'
  return [
      letters[i % 26] + letters[i // 26 % 26] + letters[i // 676]
      for i in range(count)
  ]


@pytest.mark.parametrize(
    'capitals, lower_case, says',
    [
        (0, False, 'uncased (0 of its 1000'),
        (0, True, None),
        # One piece in a thousand: BERT's uncased vocabulary has 'ℝ'.
        (1, True, None),
        (19, True, None),  # just under 2%: undecided, accepted either way
        (19, False, None),
        (20, True, 'cased (20 of its 1000'),
        (200, True, 'cased (200 of its 1000'),
        (200, False, None),
    ],
)
def test_casing_mismatch_counts_pieces_with_capitals(
    capitals, lower_case, says
):
  words = _words(1000)
  tokens = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '[unused0]']
  tokens += [w.upper() for w in words[:capitals]]
  tokens += ['##' + w for w in words[capitals:]]
  tokens += ['.', ',', '7']  # no letters: not counted
  found = vocab.casing_mismatch(tokens, lower_case)
  if says is None:
    assert found is None
  else:
    assert found.startswith(says), found


def test_casing_of_a_small_vocabulary_is_not_judged():
  assert vocab.casing_mismatch(_words(49), lower_case=False) is None
  assert vocab.casing_mismatch(_words(50), lower_case=False) is not None


def test_scripts_without_case_are_not_judged():
  chinese = [chr(0x4E00 + i) for i in range(3000)]
  assert vocab.casing_mismatch(chinese, lower_case=False) is None
  assert vocab.casing_mismatch(chinese, lower_case=True) is None
  # Mixed with Latin pieces, only those count.
  mixed = chinese + [w.capitalize() for w in _words(60)]
  assert vocab.casing_mismatch(mixed, lower_case=True).startswith(
      'cased (60 of its 60'
  )
