"""Tests of RACE reading, feature conversion and per-level accuracy."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from official.nlp.tools import tokenization
from official_repro.data import race
from official_repro.data import vocab as vocab_lib

# [PAD] is deliberately not id 0: the code must look it up.
VOCAB = (
    'the [UNK] [CLS] [SEP] [MASK] [PAD] cat sat on mat . where did sit ? '
    'in a box under tree at school dog ran to park ##s what is _ big '
    'small red blue one two three four five six seven eight nine ten '
    'who went home'
).split()
ID = {token: i for i, token in enumerate(VOCAB)}
PAD, CLS, SEP = ID['[PAD]'], ID['[CLS]'], ID['[SEP]']

MIDDLE_1 = {
    'article': 'The cat sat on the mat.',
    'questions': ['Where did the cat sit?', 'The cat sat on the _.'],
    'options': [
        ['on the mat', 'in a box', 'under the tree', 'at school'],
        ['box', 'tree', 'mat', 'park'],
    ],
    'answers': ['A', 'C'],
    'id': 'middle1.txt',
}
MIDDLE_2 = {
    'article': 'The dog ran to the park.',
    'questions': ['Who ran?'],
    'options': [['the cat', 'the dog', 'a tree', 'a box']],
    'answers': ['B'],
    'id': 'middle2.txt',
}
HIGH_1 = {
    'article': 'Cats went home.',
    'questions': ['Who went home?', 'What is big?'],
    'options': [
        ['cats', 'dogs', 'trees', 'boxes'],
        ['the cat', 'the dog', 'the park', 'the mat'],
    ],
    'answers': ['A', 'D'],
    'id': 'high1.txt',
}


def _write(path, record):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(record if isinstance(record, str) else json.dumps(record))
  return path


def _race_dir(tmp_path):
  """RACE/train/{middle,high} with 2 middle files and 1 high file."""
  root = tmp_path / 'RACE'
  _write(root / 'train' / 'middle' / '1.txt', MIDDLE_1)
  _write(root / 'train' / 'middle' / '2.txt', MIDDLE_2)
  _write(root / 'train' / 'high' / '1.txt', HIGH_1)
  return root


@pytest.fixture(scope='module', params=['model_garden', 'official_repro'])
def tokenizer(request, tmp_path_factory):
  """Model Garden's `FullTokenizer` and ours: the readers take either."""
  vocab_file = tmp_path_factory.mktemp('vocab') / 'vocab.txt'
  vocab_file.write_text('\n'.join(VOCAB) + '\n')
  if request.param == 'model_garden':
    return tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
  return vocab_lib.FullTokenizer(str(vocab_file), do_lower_case=True)


def _example(
    article='the cat sat',
    question='where ?',
    options=('on the mat', 'in a box', 'cats', 'the dog'),
    label=2,
    level='middle',
):
  return race.RaceExample(
      example_id='x-0',
      level=level,
      article=article,
      question=question,
      options=tuple(options),
      label=label,
  )


def _ids(words):
  return [ID[w] for w in words.split()]


def test_read_examples_counts_and_fields(tmp_path):
  examples, report = race.read_examples(str(_race_dir(tmp_path)), 'train')
  assert [e.example_id for e in examples] == [
      'middle1.txt-0',
      'middle1.txt-1',
      'middle2.txt-0',
      'high1.txt-0',
      'high1.txt-1',
  ]
  assert [e.level for e in examples] == ['middle'] * 3 + ['high'] * 2
  assert [e.label for e in examples] == [0, 2, 1, 0, 3]
  cloze = examples[1]
  assert cloze.question == 'The cat sat on the _.' and cloze.is_cloze
  assert cloze.options == ('box', 'tree', 'mat', 'park')
  assert cloze.article == 'The cat sat on the mat.'
  assert (report.num_records, report.num_examples, report.malformed) == (
      3,
      5,
      [],
  )
  assert report.counts == {
      'files/middle': 2,
      'files/high': 1,
      'questions/middle': 3,
      'questions/high': 2,
      'cloze_questions/middle': 1,
      'cloze_questions/high': 0,
  }


def test_read_one_level(tmp_path):
  examples, report = race.read_examples(
      str(_race_dir(tmp_path)), 'train', levels=('high',)
  )
  assert [e.example_id for e in examples] == ['high1.txt-0', 'high1.txt-1']
  assert report.counts['questions/high'] == 2
  assert 'questions/middle' not in report.counts


def test_read_directory_directly(tmp_path):
  root = _race_dir(tmp_path)
  examples, report = race.read_examples(str(root / 'train' / 'middle'))
  assert len(examples) == 3 and {e.level for e in examples} == {'middle'}
  assert report.counts['files/middle'] == 2 and report.num_records == 2

  # A directory not named after a level: the level comes from "id".
  mixed = tmp_path / 'mixed'
  _write(mixed / 'a.json', MIDDLE_2)
  _write(mixed / 'b.json', HIGH_1)
  examples, report = race.read_examples(str(mixed), levels=('high',))
  assert [e.example_id for e in examples] == ['high1.txt-0', 'high1.txt-1']
  assert report.counts['skipped_files_of_other_levels'] == 1


def test_file_without_questions_is_reported(tmp_path):
  directory = tmp_path / 'middle'
  _write(directory / '1.txt', MIDDLE_2)
  _write(
      directory / '2.txt', dict(MIDDLE_2, questions=[], options=[], answers=[])
  )
  examples, report = race.read_examples(str(directory))
  assert len(examples) == 1
  assert report.malformed == [
      (str(directory / '2.txt'), None, 'holds an article but no question')
  ]
  assert report.counts['files/middle'] == 2


def _bad_options(index, options):
  broken = [list(o) for o in MIDDLE_1['options']]
  broken[index] = options
  return dict(MIDDLE_1, options=broken)


@pytest.mark.parametrize(
    'record, expected',
    [
        ('{"article": "a",\n "questions": [}', 'line 2'),
        ('[1, 2]', 'expected a JSON object'),
        ({k: v for k, v in MIDDLE_1.items() if k != 'answers'}, "['answers']"),
        (dict(MIDDLE_1, answers=['A']), '1 answers'),
        (dict(MIDDLE_1, options=MIDDLE_1['options'][:1]), '1 option lists'),
        (_bad_options(1, ['box', 'tree', 'mat']), 'question index 1'),
        (_bad_options(0, ['a', 'b', 'c', 'd', 'e']), 'question index 0'),
        (_bad_options(1, ['box', 'tree', 3, 'park']), 'question index 1'),
        (dict(MIDDLE_1, answers=['A', 'E']), 'question index 1'),
        (dict(MIDDLE_1, answers=['a', 'B']), 'question index 0'),
        (dict(MIDDLE_1, answers=['A', 'AB']), 'question index 1'),
        (dict(MIDDLE_1, answers=['', 'B']), 'question index 0'),
        (dict(MIDDLE_1, questions=['q', None]), 'question index 1'),
        (dict(MIDDLE_1, article=['not', 'a', 'string']), '"article"'),
    ],
)
def test_malformed_file_names_file_and_place(tmp_path, record, expected):
  root = _race_dir(tmp_path)
  bad = _write(root / 'train' / 'middle' / '3.txt', record)
  with pytest.raises(race.RaceFormatError) as error:
    race.read_examples(str(root), 'train')
  assert str(bad) in str(error.value)
  assert expected in str(error.value)


def test_missing_or_empty_directories(tmp_path):
  root = _race_dir(tmp_path)
  with pytest.raises(FileNotFoundError, match=os.path.join('dev', 'middle')):
    race.read_examples(str(root), 'dev')
  (root / 'test' / 'middle').mkdir(parents=True)
  with pytest.raises(FileNotFoundError, match='holds no'):
    race.read_examples(str(root), 'test', levels=('middle',))
  with pytest.raises(ValueError, match='levels'):
    race.read_examples(str(root), 'train', levels=('college',))


def test_level_unknown_in_direct_directory(tmp_path):
  bad = _write(tmp_path / 'mixed' / '1.txt', dict(MIDDLE_2, id='x1.txt'))
  with pytest.raises(race.RaceFormatError, match='cannot tell the level') as e:
    race.read_examples(str(tmp_path / 'mixed'))
  assert str(bad) in str(e.value)


def test_features_shapes_and_labels(tmp_path, tokenizer):
  examples, _ = race.read_examples(str(_race_dir(tmp_path)), 'train')
  features, report = race.convert_to_features(examples, tokenizer, 24)
  for key in ('input_word_ids', 'input_mask', 'input_type_ids'):
    assert features[key].shape == (5, 4, 24)
    assert features[key].dtype == np.int32
  np.testing.assert_array_equal(features['label_ids'], [0, 2, 1, 0, 3])
  np.testing.assert_array_equal(features['level_ids'], [0, 0, 0, 1, 1])
  assert report.num_examples == 5 and report.num_sequences == 20
  assert report.num_truncated_articles == 0
  # Every sequence starts with [CLS] and its real tokens end in [SEP].
  ids, mask = features['input_word_ids'], features['input_mask']
  assert np.all(ids[:, :, 0] == CLS)
  last = mask.sum(axis=-1) - 1
  assert np.all(np.take_along_axis(ids, last[..., None], -1) == SEP)
  assert np.all(ids[mask == 0] == PAD)


def test_exact_ids_for_tiny_example(tokenizer):
  features, report = race.convert_to_features(
      [_example(article='The cat sat.', question='Where?')], tokenizer, 14
  )
  cls, sep, pad = '[CLS]', '[SEP]', '[PAD]'
  expected = {
      0: f'{cls} the cat sat . {sep} where ? {sep} on the mat {sep} {pad}',
      1: f'{cls} the cat sat . {sep} where ? {sep} in a box {sep} {pad}',
      # "cats" is the wordpieces "cat ##s".
      2: f'{cls} the cat sat . {sep} where ? {sep} cat ##s {sep} {pad} {pad}',
      3: f'{cls} the cat sat . {sep} where ? {sep} the dog {sep} {pad} {pad}',
  }
  for choice, words in expected.items():
    np.testing.assert_array_equal(
        features['input_word_ids'][0, choice], _ids(words)
    )
  np.testing.assert_array_equal(
      features['input_type_ids'][0, 0],
      [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0],
  )
  np.testing.assert_array_equal(
      features['input_mask'][0, 2], [1] * 12 + [0] * 2
  )
  assert features['label_ids'][0] == 2
  assert report.num_truncated_articles == 0
  assert report.num_truncated_segment_b == 0


def test_truncation_cuts_article_end_and_keeps_question_and_option(tokenizer):
  article = ' '.join(['one two three four five six seven eight nine ten'] * 3)
  example = _example(
      article=article,
      question='where did the cat sit ?',
      options=('on the mat', 'a box', 'the red tree', 'home'),
  )
  max_seq_length = 24
  features, report = race.convert_to_features(
      [example], tokenizer, max_seq_length
  )
  ids = features['input_word_ids'][0]
  question = _ids('where did the cat sit ?')
  for choice, option in enumerate(example.options):
    option_ids = _ids(option)
    # Budget 24 - 4 = 20 tokens: the article keeps its first 20 - 6 - |option|.
    kept = 20 - len(question) - len(option_ids)
    expected = (
        [CLS]
        + _ids(article)[:kept]
        + [SEP]
        + question
        + [SEP]
        + option_ids
        + [SEP]
    )
    assert len(expected) == max_seq_length
    np.testing.assert_array_equal(ids[choice], expected)
    np.testing.assert_array_equal(
        features['input_type_ids'][0, choice],
        [0] * (kept + 2) + [1] * (len(question) + len(option_ids) + 2),
    )
  assert features['input_mask'].sum(axis=-1).max() == max_seq_length
  assert report.num_truncated_articles == 4
  assert report.num_truncated_segment_b == 0


def test_truncation_longest_first_when_question_is_long(tokenizer):
  # Budget 9 - 4 = 5 for article 10, question 4, option 2 tokens. Longest
  # first (article on a tie, question on a tie inside segment B) ends at
  # article 2, question 1, option 2.
  example = _example(
      article='one two three four five six seven eight nine ten',
      question='who went home ?',
      options=('a box',) * 4,
  )
  features, report = race.convert_to_features([example], tokenizer, 9)
  np.testing.assert_array_equal(
      features['input_word_ids'][0, 0],
      _ids('[CLS] one two [SEP] who [SEP] a box [SEP]'),
  )
  assert report.num_truncated_articles == 4
  assert report.num_truncated_segment_b == 4


def test_max_query_length_cuts_question(tokenizer):
  features, report = race.convert_to_features(
      [_example(question='where did the cat sit ?')],
      tokenizer,
      24,
      max_query_length=2,
  )
  np.testing.assert_array_equal(
      features['input_word_ids'][0, 0, :12],
      _ids('[CLS] the cat sat [SEP] where did [SEP] on the mat [SEP]'),
  )
  assert report.num_truncated_questions == 4


def test_fill_blank_replaces_blank_with_option(tokenizer):
  cloze = _example(
      article='the cat sat',
      question='the cat sat on the _ .',
      options=('mat', 'a box', 'tree', 'park'),
  )
  plain = _example(article='the cat sat', question='where ?')
  features, report = race.convert_to_features(
      [cloze, plain], tokenizer, 15, fill_blank=True
  )
  np.testing.assert_array_equal(
      features['input_word_ids'][0, 1],
      _ids('[CLS] the cat sat [SEP] the cat sat on the a box . [SEP] [PAD]'),
  )
  np.testing.assert_array_equal(
      features['input_type_ids'][0, 1], [0] * 5 + [1] * 9 + [0]
  )
  # A question without a blank keeps [SEP] question [SEP] option [SEP].
  np.testing.assert_array_equal(
      features['input_word_ids'][1, 0, :12],
      _ids('[CLS] the cat sat [SEP] where ? [SEP] on the mat [SEP]'),
  )
  assert report.num_filled_blanks == 4

  # By default (BERT) the blank stays and the option follows.
  features, report = race.convert_to_features([cloze], tokenizer, 15)
  np.testing.assert_array_equal(
      features['input_word_ids'][0, 0],
      _ids('[CLS] the cat sat [SEP] the cat sat on the _ . [SEP] mat [SEP]'),
  )
  assert report.num_filled_blanks == 0


def test_convert_rejects_bad_arguments(tmp_path, tokenizer):
  with pytest.raises(ValueError, match='max_seq_length'):
    race.convert_to_features([_example()], tokenizer, 6)
  with pytest.raises(ValueError, match='max_query_length'):
    race.convert_to_features([_example()], tokenizer, 16, max_query_length=0)
  vocab_file = tmp_path / 'no_pad.txt'
  vocab_file.write_text('\n'.join(t for t in VOCAB if t != '[PAD]') + '\n')
  no_pad = tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
  with pytest.raises(ValueError, match=r'\[PAD\]'):
    race.convert_to_features([_example()], no_pad, 16)


def test_example_validation():
  with pytest.raises(ValueError, match='4 options'):
    _example(options=('a', 'b', 'c'))
  with pytest.raises(ValueError, match='label'):
    _example(label=4)
  with pytest.raises(ValueError, match='level'):
    _example(level='college')


def test_accuracy_by_level():
  predictions = [0, 1, 2, 3, 0]
  labels = [0, 1, 0, 3, 1]
  names = ['middle', 'middle', 'high', 'high', 'high']
  expected = {'middle': 1.0, 'high': 1 / 3, 'all': 3 / 5}
  assert race.accuracy_by_level(predictions, labels, names) == pytest.approx(
      expected
  )
  assert race.accuracy_by_level(
      np.array(predictions),
      np.array(labels),
      np.array([0, 0, 1, 1, 1], np.int32),
  ) == pytest.approx(expected)
  only_middle = race.accuracy_by_level([1, 2], [1, 3], ['middle', 'middle'])
  assert only_middle == {'middle': 0.5, 'all': 0.5}


def test_accuracy_by_level_bad_input():
  with pytest.raises(ValueError, match='shapes'):
    race.accuracy_by_level([0, 1], [0], ['middle', 'high'])
  with pytest.raises(ValueError, match='at least one'):
    race.accuracy_by_level([], [], [])
  with pytest.raises(ValueError, match='Unknown levels'):
    race.accuracy_by_level([0], [0], ['college'])
  with pytest.raises(ValueError, match='level ids'):
    race.accuracy_by_level([0], [0], [2])


def test_read_examples_from_ram_filesystem(tmp_path, to_ram):
  local = _race_dir(tmp_path)
  # A hidden file is skipped, as glob.glob skips it on a local disk.
  _write(local / 'train' / 'high' / '.2.txt', 'not json')
  remote = to_ram(local)
  assert remote.startswith('ram://')
  for args in [('train',), ('train', ('high',))]:
    expected, expected_report = race.read_examples(str(local), *args)
    examples, report = race.read_examples(remote, *args)
    assert examples == expected
    assert report.counts == expected_report.counts
  examples, _ = race.read_examples(os.path.join(remote, 'train', 'middle'))
  assert len(examples) == 3
  with pytest.raises(
      FileNotFoundError, match=os.path.join(remote, 'dev', 'middle')
  ):
    race.read_examples(remote, 'dev')
  bad = os.path.join(remote, 'train', 'middle', '3.txt')
  with tf.io.gfile.GFile(bad, 'wb') as f:
    f.write(b'{"article": "\xff"}')
  with pytest.raises(
      race.RaceFormatError, match="not valid JSON \\('utf-8' codec"
  ) as error:
    race.read_examples(remote, 'train')
  assert bad in str(error.value)
