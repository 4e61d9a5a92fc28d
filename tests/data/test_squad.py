"""Tests of SQuAD reading, windowed feature conversion and answer extraction."""

import json

import numpy as np
import pytest

from official.nlp.tools import tokenization
from official_repro.common import cli
from official_repro.data import squad
from official_repro.data import vocab as vocab_lib
from official_repro.metrics import squad_metrics
from tests.data.tokenizer_texts import train_sentencepiece

# [PAD] is deliberately not id 0, to catch code that pads with 0.
_VOCAB = ['[UNK]', '[CLS]', '[SEP]', '[MASK]', '[PAD]'] + (
    "john smith ' s dog jump ##ed over the lazy fox in 1895 . whose ? when "
    'did what cat eat river flows past old trees near town which call sign '
    'alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima '
    'mike nove ##mber oscar papa quebec romeo sierra tango uniform victor '
    'whiskey xray yankee zulu ##s'
).split()
PAD_ID = _VOCAB.index('[PAD]')

DOG_CONTEXT = "John Smith's dog jumped over the lazy fox in 1895."
RIVER_CONTEXT = 'The river flows past old trees near the town.'
# 26 words; "November" is two WordPieces, so the context has 27.
CALL_SIGNS = (
    'alpha bravo charlie delta echo foxtrot golf hotel india juliet '
    'kilo lima Mike November oscar papa quebec romeo sierra tango '
    'uniform victor whiskey xray yankee zulu'
)


@pytest.fixture(
    name='tokenizer',
    scope='module',
    params=['model_garden', 'official_repro'],
)
def fixture_tokenizer(request, tmp_path_factory):
  """Model Garden's `FullTokenizer` and ours: the readers take either."""
  vocab_file = tmp_path_factory.mktemp('vocab') / 'vocab.txt'
  vocab_file.write_text('\n'.join(_VOCAB) + '\n')
  if request.param == 'model_garden':
    return tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
  return vocab_lib.FullTokenizer(str(vocab_file), do_lower_case=True)


def _qa(qid, question, answer=None, context=None, **extra):
  qa = dict(id=qid, question=question, answers=[], **extra)
  if answer is not None:
    qa['answers'] = [dict(text=answer, answer_start=context.index(answer))]
  return qa


def _v1_dataset():
  return {
      'version': '1.1',
      'data': [
          {
              'title': 't',
              'paragraphs': [
                  {
                      'context': DOG_CONTEXT,
                      'qas': [
                          _qa(
                              'q1',
                              'Whose dog jumped?',
                              'John Smith',
                              DOG_CONTEXT,
                          ),
                          _qa(
                              'q2',
                              'When did the dog jump?',
                              '1895',
                              DOG_CONTEXT,
                          ),
                      ],
                  },
                  {
                      'context': RIVER_CONTEXT,
                      'qas': [
                          _qa(
                              'q3',
                              'What flows past old trees?',
                              'The river',
                              RIVER_CONTEXT,
                          )
                      ],
                  },
              ],
          }
      ],
  }


def _v2_dataset():
  return {
      'version': 'v2.0',
      'data': [
          {
              'title': 't',
              'paragraphs': [
                  {
                      'context': DOG_CONTEXT,
                      'qas': [
                          _qa(
                              'a1',
                              'Whose dog jumped?',
                              'John Smith',
                              DOG_CONTEXT,
                              is_impossible=False,
                          ),
                          _qa(
                              'n1', 'What did the cat eat?', is_impossible=True
                          ),
                      ],
                  },
              ],
          }
      ],
  }


def _call_sign_dataset():
  return {
      'data': [
          {
              'paragraphs': [
                  {
                      'context': CALL_SIGNS,
                      'qas': [
                          _qa(
                              'c1',
                              'Which call sign?',
                              'Mike November',
                              CALL_SIGNS,
                          )
                      ],
                  }
              ]
          }
      ]
  }


def _write(tmp_path, dataset, name='squad.json'):
  path = tmp_path / name
  path.write_text(json.dumps(dataset))
  return str(path)


def test_reads_training_positions_as_word_indices(tmp_path):
  examples, report = squad.read_examples(
      _write(tmp_path, _v1_dataset()),
      version_2_with_negative=False,
      is_training=True,
  )
  assert [e.qas_id for e in examples] == ['q1', 'q2', 'q3']
  assert examples[0].doc_tokens == DOG_CONTEXT.split()
  # "John Smith" covers words 0..1 ("John", "Smith's"); "1895" is word 9.
  assert (examples[0].start_position, examples[0].end_position) == (0, 1)
  assert (examples[1].start_position, examples[1].end_position) == (9, 9)
  assert (examples[2].start_position, examples[2].end_position) == (0, 1)
  assert examples[0].orig_answer_text == 'John Smith'
  assert (report.num_records, report.num_examples, report.num_malformed) == (
      3,
      3,
      0,
  )


def test_reads_the_same_from_ram_filesystem(tmp_path, to_ram):
  local = _write(tmp_path, _v2_dataset())
  remote = to_ram(local)
  for is_training in (True, False):
    expected, _ = squad.read_examples(
        local, version_2_with_negative=True, is_training=is_training
    )
    examples, _ = squad.read_examples(
        remote, version_2_with_negative=True, is_training=is_training
    )
    assert [vars(e) for e in examples] == [vars(e) for e in expected]
    assert len(examples) == 2


def test_mismatched_training_answer_is_counted_and_listed(tmp_path):
  dataset = _v1_dataset()
  qas = dataset['data'][0]['paragraphs'][0]['qas']
  # "lazy dog" is not in the context at the offset of "lazy".
  qas.append(
      dict(
          id='bad',
          question='What dog?',
          answers=[
              dict(text='lazy dog', answer_start=DOG_CONTEXT.index('lazy'))
          ],
      )
  )
  qas.append(
      dict(
          id='out',
          question='What?',
          answers=[dict(text='fox', answer_start=500)],
      )
  )
  path = _write(tmp_path, dataset)
  examples, report = squad.read_examples(path, False, is_training=True)
  assert [e.qas_id for e in examples] == ['q1', 'q2', 'q3']
  assert [(record.path, record.line_number) for record in report.malformed] == [
      (path, None),
      (path, None),
  ]
  assert "data[0].paragraphs[0].qas[2] (question id 'bad')" in (
      report.malformed[0].reason
  )
  assert "question id 'out'" in report.malformed[1].reason
  assert (report.num_records, report.num_malformed, report.num_examples) == (
      5,
      2,
      3,
  )
  # Evaluation keeps every question.
  examples, report = squad.read_examples(path, False, is_training=False)
  assert len(examples) == 5 and report.num_malformed == 0


def test_missing_key_names_path_and_json_location(tmp_path):
  dataset = _v1_dataset()
  del dataset['data'][0]['paragraphs'][1]['qas'][0]['question']
  path = _write(tmp_path, dataset)
  with pytest.raises(ValueError) as error:
    squad.read_examples(path, False, is_training=False)
  message = str(error.value)
  assert path in message
  assert 'data[0].paragraphs[1].qas[0]' in message
  assert "'q3'" in message and "'question'" in message


def test_missing_answer_start_names_the_answer(tmp_path):
  dataset = _v1_dataset()
  del dataset['data'][0]['paragraphs'][0]['qas'][1]['answers'][0][
      'answer_start'
  ]
  with pytest.raises(
      ValueError,
      match=r'qas\[1\]\.answers\[0\].*q2.*' r"missing key 'answer_start'",
  ):
    squad.read_examples(_write(tmp_path, dataset), False, is_training=True)


def test_missing_context_names_the_paragraph(tmp_path):
  dataset = _v1_dataset()
  del dataset['data'][0]['paragraphs'][1]['context']
  with pytest.raises(
      ValueError, match=r"data\[0\]\.paragraphs\[1\]: missing key 'context'"
  ):
    squad.read_examples(_write(tmp_path, dataset), False, is_training=False)


def test_duplicate_question_id_is_an_error(tmp_path):
  dataset = _v1_dataset()
  dataset['data'][0]['paragraphs'][1]['qas'][0]['id'] = 'q1'
  with pytest.raises(
      ValueError,
      match=r'duplicate question id .q1.*'
      r'data\[0\]\.paragraphs\[0\]\.qas\[0\]',
  ):
    squad.read_examples(_write(tmp_path, dataset), False, is_training=False)


def test_missing_file_and_invalid_json(tmp_path):
  missing = str(tmp_path / 'nope.json')
  with pytest.raises(FileNotFoundError, match='nope.json'):
    squad.read_examples(missing, False, is_training=False)
  broken = tmp_path / 'broken.json'
  broken.write_text('{"data": [\n  {"paragraphs": [}\n')
  with pytest.raises(
      ValueError, match=r'broken\.json: not valid JSON .*line 2 column'
  ):
    squad.read_examples(str(broken), False, is_training=False)
  no_data = _write(tmp_path, {'version': '1.1'}, name='no_data.json')
  with pytest.raises(
      ValueError, match='no_data.json: top level: missing key ' "'data'"
  ):
    squad.read_examples(no_data, False, is_training=False)


def test_impossible_question_needs_version_2(tmp_path):
  path = _write(tmp_path, _v2_dataset())
  with pytest.raises(ValueError, match=r"qas\[1\].*'n1'.*is_impossible"):
    squad.read_examples(path, version_2_with_negative=False, is_training=True)
  examples, report = squad.read_examples(path, True, is_training=True)
  assert report.counts['impossible'] == 1
  assert examples[1].is_impossible
  assert (examples[1].start_position, examples[1].end_position) == (-1, -1)


def test_windows_point_at_the_answer_or_cls(tmp_path, tokenizer):
  examples, _ = squad.read_examples(
      _write(tmp_path, _call_sign_dataset()), False, is_training=True
  )
  features, metadata = squad.convert_to_features(
      examples,
      tokenizer,
      max_seq_length=16,
      doc_stride=4,
      max_query_length=6,
      is_training=True,
  )
  # Question "which call sign ?" is 4 WordPieces, so each window holds
  # 16 - 4 - 3 = 9 of the 27 context WordPieces; windows start at context
  # pieces 0, 4, 8, 12, 16, 20 (the last one 7 long). The answer is pieces
  # 12..14 (mike nove ##mber): whole only in the windows starting at 8 and 12,
  # at positions 6 + 12 - 8 = 10..12 and 6 + 12 - 12 = 6..8.
  assert len(metadata) == 6
  assert [m.doc_span_index for m in metadata] == list(range(6))
  np.testing.assert_array_equal(
      features['start_positions'], [0, 0, 10, 6, 0, 0]
  )
  np.testing.assert_array_equal(features['end_positions'], [0, 0, 12, 8, 0, 0])
  for row in (2, 3):
    start = features['start_positions'][row]
    end = features['end_positions'][row]
    assert metadata[row].tokens[start : end + 1] == ['mike', 'nove', '##mber']
    np.testing.assert_array_equal(
        features['input_word_ids'][row, start : end + 1],
        tokenizer.convert_tokens_to_ids(['mike', 'nove', '##mber']),
    )
  assert metadata[0].tokens == (
      ['[CLS]', 'which', 'call', 'sign', '?', '[SEP]']
      + 'alpha bravo charlie delta echo foxtrot golf hotel india'.split()
      + ['[SEP]']
  )
  # Window 1 (pieces 4..12) ends inside the answer: labelled [CLS].
  assert metadata[1].tokens[14] == 'mike'
  for name in (
      'input_word_ids',
      'input_mask',
      'input_type_ids',
      'start_positions',
      'end_positions',
  ):
    assert features[name].dtype == np.int32
  assert features['input_word_ids'].shape == (6, 16)


def test_masks_type_ids_and_pad_id(tmp_path, tokenizer):
  examples, _ = squad.read_examples(
      _write(tmp_path, _call_sign_dataset()), False, is_training=False
  )
  features, metadata = squad.convert_to_features(
      examples,
      tokenizer,
      max_seq_length=16,
      doc_stride=4,
      max_query_length=6,
      is_training=False,
  )
  assert 'start_positions' not in features
  # Last window: [CLS] + 4 question + [SEP] + 7 context + [SEP] = 14 tokens.
  last = len(metadata) - 1
  np.testing.assert_array_equal(
      features['input_mask'][last], [1] * 14 + [0] * 2
  )
  np.testing.assert_array_equal(
      features['input_type_ids'][last], [0] * 6 + [1] * 8 + [0] * 2
  )
  np.testing.assert_array_equal(
      features['input_word_ids'][last, 14:], [PAD_ID, PAD_ID]
  )
  assert features['input_word_ids'][last, 0] == _VOCAB.index('[CLS]')
  # Full windows have no padding.
  assert features['input_mask'][:last].min() == 1
  # Context position -> original word; "nove" and "##mber" are both word 13.
  assert metadata[2].token_to_orig_map[11] == 13
  assert metadata[2].token_to_orig_map[12] == 13
  assert 0 not in metadata[2].token_to_orig_map


def test_question_is_truncated_to_max_query_length(tmp_path, tokenizer):
  dataset = _call_sign_dataset()
  dataset['data'][0]['paragraphs'][0]['qas'][0][
      'question'
  ] = 'which call sign which call sign which call'
  examples, _ = squad.read_examples(_write(tmp_path, dataset), False, False)
  _, metadata = squad.convert_to_features(
      examples,
      tokenizer,
      max_seq_length=16,
      doc_stride=4,
      max_query_length=6,
      is_training=False,
  )
  assert metadata[0].tokens[:8] == ['[CLS]'] + (
      'which call sign which call sign'.split()
  ) + ['[SEP]']


def test_impossible_question_is_labelled_cls(tmp_path, tokenizer):
  examples, _ = squad.read_examples(
      _write(tmp_path, _v2_dataset()), True, is_training=True
  )
  features, metadata = squad.convert_to_features(
      examples,
      tokenizer,
      max_seq_length=32,
      doc_stride=8,
      max_query_length=8,
      is_training=True,
  )
  assert [m.example_index for m in metadata] == [0, 1]
  # "whose dog jump ##ed ?" is 5 pieces: the answer john smith is at 7..8.
  np.testing.assert_array_equal(features['start_positions'], [7, 0])
  np.testing.assert_array_equal(features['end_positions'], [8, 0])


def test_bad_window_sizes_and_vocab(tmp_path, tokenizer):
  examples, _ = squad.read_examples(
      _write(tmp_path, _v1_dataset()), False, False
  )
  with pytest.raises(ValueError, match='max_seq_length 9 leaves no room'):
    squad.convert_to_features(
        examples,
        tokenizer,
        max_seq_length=9,
        doc_stride=2,
        max_query_length=6,
        is_training=False,
    )
  with pytest.raises(ValueError, match='doc_stride'):
    squad.convert_to_features(
        examples,
        tokenizer,
        max_seq_length=32,
        doc_stride=0,
        max_query_length=6,
        is_training=False,
    )
  vocab_file = tmp_path / 'no_pad.txt'
  vocab_file.write_text('\n'.join(t for t in _VOCAB if t != '[PAD]') + '\n')
  no_pad = tokenization.FullTokenizer(str(vocab_file), do_lower_case=True)
  with pytest.raises(
      ValueError, match=r"lacks the special tokens \['\[PAD\]'\]"
  ):
    squad.convert_to_features(
        examples,
        no_pad,
        max_seq_length=32,
        doc_stride=8,
        max_query_length=8,
        is_training=False,
    )


def _convert_for_eval(tmp_path, tokenizer, dataset, version_2, **sizes):
  examples, _ = squad.read_examples(
      _write(tmp_path, dataset), version_2, is_training=False
  )
  features, metadata = squad.convert_to_features(
      examples, tokenizer, is_training=False, **sizes
  )
  return examples, features, metadata


def _context_position(feature, token):
  """First position of `token` in the context part of a window."""
  return next(
      position
      for position in sorted(feature.token_to_orig_map)
      if feature.tokens[position] == token
  )


def test_extracts_gold_text_with_original_case(tmp_path, tokenizer):
  examples, features, metadata = _convert_for_eval(
      tmp_path,
      tokenizer,
      _v1_dataset(),
      False,
      max_seq_length=32,
      doc_stride=8,
      max_query_length=8,
  )
  start = np.zeros(features['input_word_ids'].shape, np.float32)
  end = np.zeros_like(start)
  gold = {
      'q1': ('john', 'smith'),
      'q2': ('1895', '1895'),
      'q3': ('the', 'river'),
  }
  for row, feature in enumerate(metadata):
    first, last = gold[examples[feature.example_index].qas_id]
    start[row, _context_position(feature, first)] = 10.0
    end[row, _context_position(feature, last)] = 10.0
  predictions, null_score_diffs = squad.extract_answers(
      examples, metadata, start, end
  )
  # "Smith's" is cut back to "Smith"; case and the original text come back.
  assert predictions == {'q1': 'John Smith', 'q2': '1895', 'q3': 'The river'}
  assert not null_score_diffs


def test_extract_uses_max_context_window_and_max_answer_length(
    tmp_path, tokenizer
):
  examples, features, metadata = _convert_for_eval(
      tmp_path,
      tokenizer,
      _call_sign_dataset(),
      False,
      max_seq_length=16,
      doc_stride=4,
      max_query_length=6,
  )
  start = np.zeros(features['input_word_ids'].shape, np.float32)
  end = np.zeros_like(start)
  # A stronger single-word span "mike" (30 + 8) in window 1, which is not the
  # max context window of "mike" (it is the window's last context token) ...
  start[1, 14] = 30.0
  end[1, 14] = 8.0
  # ... and "mike nove ##mber" (positions 10..12) in window 2, its max context.
  start[2, 10] = 10.0
  end[2, 12] = 10.0
  end[2, 10] = 5.0
  predictions, _ = squad.extract_answers(
      examples, metadata, start, end, max_answer_length=3
  )
  assert predictions == {'c1': 'Mike November'}
  # At most 2 pieces: the 3-piece span is out; "mike" alone (10 + 5) beats
  # e.g. "mike nove" (10 + 0).
  predictions, _ = squad.extract_answers(
      examples, metadata, start, end, max_answer_length=2
  )
  assert predictions == {'c1': 'Mike'}


def test_version_2_null_score_diff(tmp_path, tokenizer):
  examples, features, metadata = _convert_for_eval(
      tmp_path,
      tokenizer,
      _v2_dataset(),
      True,
      max_seq_length=32,
      doc_stride=8,
      max_query_length=8,
  )
  assert len(metadata) == 2
  start = np.zeros(features['input_word_ids'].shape, np.float32)
  end = np.zeros_like(start)
  answerable, impossible = metadata
  start[0, _context_position(answerable, 'john')] = 4.0
  end[0, _context_position(answerable, 'smith')] = 4.0
  start[1, 0] = end[1, 0] = 5.0
  start[1, _context_position(impossible, 'dog')] = 2.0
  end[1, _context_position(impossible, 'dog')] = 1.0
  predictions, null_score_diffs = squad.extract_answers(
      examples, metadata, start, end, version_2_with_negative=True
  )
  # Predictions are the best non-null spans; the caller thresholds the diffs.
  assert predictions == {'a1': 'John Smith', 'n1': 'dog'}
  # a1: null 0 + 0, best span 4 + 4 -> -8. n1: null 5 + 5, "dog" 2 + 1 -> 7.
  assert null_score_diffs == pytest.approx({'a1': -8.0, 'n1': 7.0})
  assert squad_metrics.apply_null_threshold(
      predictions, null_score_diffs, threshold=0.0
  ) == {'a1': 'John Smith', 'n1': ''}


def test_extract_rejects_misaligned_logits(tmp_path, tokenizer):
  examples, features, metadata = _convert_for_eval(
      tmp_path,
      tokenizer,
      _v1_dataset(),
      False,
      max_seq_length=32,
      doc_stride=8,
      max_query_length=8,
  )
  logits = np.zeros(features['input_word_ids'].shape, np.float32)
  with pytest.raises(
      ValueError, match=r'start_logits must be \[num_features=3'
  ):
    squad.extract_answers(examples, metadata, logits[:2], logits[:2])
  with pytest.raises(ValueError, match=r"no feature.*'q3'"):
    squad.extract_answers(examples, metadata[:2], logits[:2], logits[:2])


def test_no_valid_span_gives_empty_prediction(tmp_path, tokenizer):
  examples, features, metadata = _convert_for_eval(
      tmp_path,
      tokenizer,
      _v1_dataset(),
      False,
      max_seq_length=32,
      doc_stride=8,
      max_query_length=8,
  )
  # q1 and q2 (one window each) share the context with "john" and "smith".
  examples, metadata = examples[:2], metadata[:2]
  start = np.zeros((2, 32), np.float32)
  end = np.zeros_like(start)
  # With one candidate each, the best start ("smith") is after the best end
  # ("john"), so no span is valid.
  for row, feature in enumerate(metadata):
    start[row, _context_position(feature, 'smith')] = 5.0
    end[row, _context_position(feature, 'john')] = 5.0
  assert features['input_word_ids'].shape[1] == 32
  predictions, _ = squad.extract_answers(
      examples, metadata, start, end, n_best_size=1
  )
  assert predictions == {'q1': '', 'q2': ''}


def test_a_sentencepiece_vocabulary_is_refused_in_one_line(tmp_path):
  model = train_sentencepiece(['which call sign is mike november'] * 20, 22)
  (tmp_path / 'spiece.model').write_bytes(model)
  tokenizer = vocab_lib.FullTokenizer(str(tmp_path / 'spiece.model'))
  examples, _ = squad.read_examples(
      _write(tmp_path, _call_sign_dataset()), False, is_training=True
  )
  with pytest.raises(cli.UserError, match='^SQuAD here reads WordPiece'):
    squad.convert_to_features(
        examples,
        tokenizer,
        max_seq_length=16,
        doc_stride=4,
        max_query_length=6,
        is_training=True,
    )
