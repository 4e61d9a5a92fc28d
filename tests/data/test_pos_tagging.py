"""POS-tagging readers (conll and tagged treebank), features and accuracy."""

import numpy as np
import pytest

from official.nlp.tools import tokenization
from official_repro.data import pos_tagging
from official_repro.data import vocab as vocab_lib

# [PAD] is deliberately not id 0.
_VOCAB = (
    'the [UNK] [PAD] [CLS] [SEP] [MASK] cat sat on mat dog ran . un '
    '##believ ##able 1 / 2 end'
).split()
_CONLL = (
    '-DOCSTART- -X- O O\r\n'
    '\r\n'
    'The B-NP DT\r\n'
    'cat I-NP NN\r\n'
    'sat VBD\r\n'
    '.\r\n'
    '\r\n'
    'unbelievable JJ|RB\r\n'
    'dog\tNN\r\n'
)
_TREEBANK = (
    '======================================\n'
    '\n'
    '[ The/DT cat/NN ]\n'
    'sat/VBD on/IN \n'
    '[ 1\\/2/CD mat/NN ]\n'
    './. \n'
    '\n'
    '[ The/DT dog/NN ]\n'
    'ran/VBD broken ./.\n'
    '======================================\n'
    'the/DT|NN end/NN\n'
)


def _write(tmp_path, name, text):
  path = tmp_path / name
  path.write_bytes(text.encode('utf-8'))
  return str(path)


@pytest.fixture(scope='module', params=['model_garden', 'official_repro'])
def tokenizer(request, tmp_path_factory):
  """Model Garden's `FullTokenizer` and ours: the readers take either."""
  vocab_file = tmp_path_factory.mktemp('vocab') / 'vocab.txt'
  vocab_file.write_text('\n'.join(_VOCAB) + '\n')
  if request.param == 'model_garden':
    return tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
  return vocab_lib.FullTokenizer(str(vocab_file), do_lower_case=True)


def _id(token):
  return _VOCAB.index(token)


def _sentence(words, tags, line_number=1):
  return pos_tagging.TaggedSentence(
      tuple(words.split()), tuple(tags.split()), line_number
  )


@pytest.mark.parametrize('file_format', ['auto', 'conll'])
def test_reads_conll_with_crlf_docstart_and_malformed_line(
    tmp_path, file_format
):
  path = _write(tmp_path, 'train.txt', _CONLL)
  sentences, report = pos_tagging.read_tagged_sentences(path, file_format)
  assert [(s.words, s.tags, s.line_number) for s in sentences] == [
      (('The', 'cat', 'sat'), ('DT', 'NN', 'VBD'), 3),
      (('unbelievable', 'dog'), ('JJ', 'NN'), 8),
  ]
  assert sentences[0].path == path
  assert report.file_format == 'conll'
  assert (report.num_examples, report.counts['words']) == (2, 5)
  assert report.counts['docstart_lines'] == 1
  assert report.counts['ambiguous_tags'] == 1
  assert [(r.path, r.line_number) for r in report.malformed] == [(path, 6)]
  assert 'field -1' in report.malformed[0].reason


def test_reads_the_same_from_ram_filesystem(tmp_path, to_ram):
  for name, text in (('train.txt', _CONLL), ('treebank.txt', _TREEBANK)):
    local = _write(tmp_path, name, text)
    remote = to_ram(local)
    expected, expected_report = pos_tagging.read_tagged_sentences(local)
    sentences, report = pos_tagging.read_tagged_sentences(remote)
    assert [(s.words, s.tags, s.line_number) for s in sentences] == [
        (s.words, s.tags, s.line_number) for s in expected
    ]
    assert sentences[0].path == remote
    assert report.file_format == expected_report.file_format
    assert report.counts == expected_report.counts


def test_conll_tag_column_reads_conll2000_order(tmp_path):
  path = _write(
      tmp_path, 'conll2000.txt', 'The DT B-NP\ncat NN I-NP\nsat\tVBD\n\n'
  )
  sentences, report = pos_tagging.read_tagged_sentences(
      path, 'conll', conll_tag_column=1
  )
  assert sentences[0].tags == ('DT', 'NN', 'VBD')
  assert report.malformed == []
  sentences, report = pos_tagging.read_tagged_sentences(
      path, 'conll', conll_tag_column=-2
  )
  assert sentences[0].tags == ('DT', 'NN')
  assert [r.line_number for r in report.malformed] == [3]
  with pytest.raises(ValueError, match='conll_tag_column'):
    pos_tagging.read_tagged_sentences(path, 'conll', conll_tag_column=0)


@pytest.mark.parametrize('file_format', ['auto', 'treebank'])
def test_reads_treebank_with_escapes_brackets_and_separators(
    tmp_path, file_format
):
  path = _write(tmp_path, 'wsj_0001.pos', _TREEBANK)
  sentences, report = pos_tagging.read_tagged_sentences(path, file_format)
  assert [(s.words, s.tags, s.line_number) for s in sentences] == [
      (
          ('The', 'cat', 'sat', 'on', '1/2', 'mat', '.'),
          ('DT', 'NN', 'VBD', 'IN', 'CD', 'NN', '.'),
          3,
      ),
      (('The', 'dog', 'ran', '.'), ('DT', 'NN', 'VBD', '.'), 8),
      (('the', 'end'), ('DT', 'NN'), 11),
  ]
  assert report.file_format == 'treebank'
  assert report.counts['ambiguous_tags'] == 1
  assert report.malformed == [
      (path, 9, "expected word/TAG, got token 'broken'")
  ]


def test_treebank_token_splits_at_last_unescaped_slash(tmp_path):
  path = _write(tmp_path, 'slashes.txt', 'and\\/or/CC a\\/b 3\\/4\\/5/CD\n\n')
  sentences, report = pos_tagging.read_tagged_sentences(path)
  assert report.file_format == 'treebank'
  assert sentences[0].words == ('and/or', '3/4/5')
  assert sentences[0].tags == ('CC', 'CD')
  assert report.malformed == [
      (path, 1, "expected word/TAG, got token 'a\\\\/b'")
  ]


def test_auto_keeps_conll_when_words_contain_slashes(tmp_path):
  path = _write(tmp_path, 'conll.txt', '1/2 CD\nand/or CC\n')
  sentences, report = pos_tagging.read_tagged_sentences(path)
  assert report.file_format == 'conll'
  assert sentences[0].words == ('1/2', 'and/or')


def test_missing_empty_all_malformed_and_bad_encoding_files(tmp_path):
  missing = str(tmp_path / 'nope.txt')
  with pytest.raises(FileNotFoundError, match='nope.txt'):
    pos_tagging.read_tagged_sentences(missing)
  with pytest.raises(ValueError, match='empty.txt: no tagged sentence found'):
    pos_tagging.read_tagged_sentences(_write(tmp_path, 'empty.txt', '\n\n'))
  bad = _write(tmp_path, 'bad.txt', '\nlonely\nwords\n')
  with pytest.raises(ValueError, match=r'bad.txt.*2 tagged.*line 2'):
    pos_tagging.read_tagged_sentences(bad, 'conll')
  latin1 = tmp_path / 'latin1.txt'
  latin1.write_bytes(b'the DT\ncaf\xe9 NN\n')
  with pytest.raises(ValueError, match='latin1.txt line 2: not valid UTF-8'):
    pos_tagging.read_tagged_sentences(str(latin1))
  with pytest.raises(ValueError, match='file_format'):
    pos_tagging.read_tagged_sentences(bad, 'xml')


def test_build_label_list_puts_extra_labels_first():
  labels = pos_tagging.build_label_list(
      [_sentence('the cat', 'DT NN'), _sentence('ran .', 'VBD .')]
  )
  assert labels == ('PAD', '##', '.', 'DT', 'NN', 'VBD')
  assert labels.index(pos_tagging.PAD_LABEL) == 0
  with pytest.raises(ValueError, match='line 4.*reserved'):
    pos_tagging.build_label_list([_sentence('a b', 'DT ##', line_number=4)])
  with pytest.raises(ValueError, match='at least one'):
    pos_tagging.build_label_list([])


def test_word_pieces_get_continuation_label_and_zero_weight(tokenizer):
  sentence = _sentence('The unbelievable cat', 'DT JJ NN')
  labels = pos_tagging.build_label_list([sentence])
  pad, cont, dt, jj, nn = (
      labels.index(label) for label in ('PAD', '##', 'DT', 'JJ', 'NN')
  )
  features, report = pos_tagging.convert_to_features(
      [sentence], tokenizer, labels, max_seq_length=9
  )
  np.testing.assert_array_equal(
      features['input_word_ids'],
      [
          [
              _id('[CLS]'),
              _id('the'),
              _id('un'),
              _id('##believ'),
              _id('##able'),
              _id('cat'),
              _id('[SEP]'),
              _id('[PAD]'),
              _id('[PAD]'),
          ]
      ],
  )
  np.testing.assert_array_equal(
      features['label_ids'], [[pad, dt, jj, cont, cont, nn, pad, pad, pad]]
  )
  np.testing.assert_array_equal(
      features['label_weights'], [[0, 1, 1, 0, 0, 1, 0, 0, 0]]
  )
  np.testing.assert_array_equal(
      features['input_mask'], [[1, 1, 1, 1, 1, 1, 1, 0, 0]]
  )
  np.testing.assert_array_equal(features['input_type_ids'], np.zeros((1, 9)))
  for key in ('input_word_ids', 'input_mask', 'input_type_ids', 'label_ids'):
    assert features[key].dtype == np.int32
  assert features['label_weights'].dtype == np.float32
  assert (report.num_features, report.num_words) == (1, 3)
  assert report.num_split_sentences == 0


def test_long_sentence_continues_in_next_features(tokenizer):
  words = 'the cat sat on the mat unbelievable dog'
  tags = 'DT NN VBD IN DT NN JJ NN'
  sentences = [_sentence(words, tags), _sentence('dog ran', 'NN VBD')]
  labels = pos_tagging.build_label_list(sentences)
  features, report = pos_tagging.convert_to_features(
      sentences, tokenizer, labels, max_seq_length=6
  )
  # 4 pieces per feature: [the cat sat on] [the mat] [un ##believ ##able dog].
  assert features['input_word_ids'].shape == (4, 6)
  np.testing.assert_array_equal(
      features['input_mask'].sum(axis=1), [6, 4, 6, 4]
  )
  np.testing.assert_array_equal(
      features['input_word_ids'][1],
      [
          _id('[CLS]'),
          _id('the'),
          _id('mat'),
          _id('[SEP]'),
          _id('[PAD]'),
          _id('[PAD]'),
      ],
  )
  scored = features['label_weights'] == 1.0
  first_pieces = [_VOCAB[i] for i in features['input_word_ids'][scored]]
  assert first_pieces == 'the cat sat on the mat un dog dog ran'.split()
  assert [labels[i] for i in features['label_ids'][scored]] == (
      tags.split() + ['NN', 'VBD']
  )
  assert features['label_weights'].sum() == 10
  assert np.all(features['input_word_ids'][:, 0] == _id('[CLS]'))
  assert (
      report.num_sentences,
      report.num_words,
      report.num_features,
      report.num_split_sentences,
  ) == (2, 10, 4, 1)


def test_empty_and_overlong_words_are_counted(tokenizer):
  # The tokenizer deletes control characters such as BEL.
  sentence = pos_tagging.TaggedSentence(
      ('\x07', 'unbelievable'), ('SYM', 'JJ'), line_number=1
  )
  labels = pos_tagging.build_label_list([sentence])
  features, report = pos_tagging.convert_to_features(
      [sentence], tokenizer, labels, max_seq_length=4
  )
  np.testing.assert_array_equal(
      features['input_word_ids'],
      [
          [_id('[CLS]'), _id('[UNK]'), _id('[SEP]'), _id('[PAD]')],
          [_id('[CLS]'), _id('un'), _id('##believ'), _id('[SEP]')],
      ],
  )
  np.testing.assert_array_equal(
      features['label_weights'], [[0, 1, 0, 0], [0, 1, 0, 0]]
  )
  assert report.num_empty_words == 1
  assert report.num_truncated_words == 1


def test_unknown_tag_raises_naming_file_and_line(tmp_path, tokenizer):
  train = _write(tmp_path, 'train.txt', 'the DT\ncat NN\n')
  dev = _write(tmp_path, 'dev.txt', 'the DT\ncat NN\n\nthe DT\ndog VBZ\n')
  train_sentences, _ = pos_tagging.read_tagged_sentences(train)
  dev_sentences, _ = pos_tagging.read_tagged_sentences(dev)
  labels = pos_tagging.build_label_list(train_sentences)
  with pytest.raises(ValueError, match=r"dev.txt line 4 .*word 2 'dog'.*'VBZ'"):
    pos_tagging.convert_to_features(dev_sentences, tokenizer, labels, 8)


def test_rejects_bad_label_list_vocab_and_length(tmp_path, tokenizer):
  sentence = _sentence('the cat', 'DT NN')
  with pytest.raises(ValueError, match="lacks the extra label '##'"):
    pos_tagging.convert_to_features(
        [sentence], tokenizer, ('PAD', 'DT', 'NN'), 8
    )
  with pytest.raises(ValueError, match='max_seq_length'):
    pos_tagging.convert_to_features(
        [sentence], tokenizer, ('PAD', '##', 'DT', 'NN'), 2
    )
  vocab_file = tmp_path / 'no_cls.txt'
  vocab_file.write_text('[PAD]\n[UNK]\n[SEP]\nthe\n')
  no_cls = tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
  with pytest.raises(
      ValueError, match=r"lacks the special tokens \['\[CLS\]'\]"
  ):
    pos_tagging.convert_to_features(
        [sentence], no_cls, ('PAD', '##', 'DT', 'NN'), 8
    )


def test_tagging_accuracy_by_hand():
  gold = np.array([[0, 3, 4, 1, 0], [0, 5, 3, 0, 0]])
  predicted = np.array([[2, 3, 5, 2, 2], [0, 5, 3, 4, 4]])
  weights = np.array([[0, 1, 1, 0, 0], [0, 1, 1, 0, 0]], np.float32)
  # Words: 3 ok, 4 wrong, 5 ok, 3 ok; mistakes at weight 0 do not count.
  assert pos_tagging.tagging_accuracy(predicted, gold, weights) == 0.75
  with pytest.raises(ValueError, match='same shape'):
    pos_tagging.tagging_accuracy(predicted[:, :4], gold, weights)
  with pytest.raises(ValueError, match='sum to 0'):
    pos_tagging.tagging_accuracy(predicted, gold, np.zeros_like(weights))
