"""Tests of SQuAD normalization, EM/F1 and the v1.1 / v2.0 evaluators."""

import json

import pytest

from official_repro.metrics import squad_metrics


def _question(qid, *answers):
  return {
      'id': qid,
      'question': 'q?',
      'answers': [{'text': a, 'answer_start': 0} for a in answers],
  }


def _dataset(*questions):
  return {
      'version': 'x',
      'data': [
          {
              'title': 't',
              'paragraphs': [
                  {'context': 'unused by evaluation', 'qas': list(questions)}
              ],
          }
      ],
  }


V1 = _dataset(
    _question('q1', 'Denver Broncos', 'the Denver Broncos'),
    _question('q2', 'Santa Clara, California', "Levi's Stadium"),
    _question('q3', 'gold'),
)

# Answerable q1, q3, q4; unanswerable q2, q5.
V2 = _dataset(
    _question('q1', 'red apple'),
    _question('q2'),
    _question('q3', 'green pear tree'),
    _question('q4', 'old oak'),
    _question('q5'),
)


@pytest.mark.parametrize(
    'text, expected',
    [
        ('The  Eiffel-Tower!', 'eiffeltower'),
        ('an apple, a pear and THE plum.', 'apple pear and plum'),
        ('  Theory\tof   anything ', 'theory of anything'),
        ("Levi's Stadium", 'levis stadium'),
        ('a', ''),
    ],
)
def test_normalize_answer(text, expected):
  assert squad_metrics.normalize_answer(text) == expected


def test_exact_match_is_max_over_gold_answers():
  assert squad_metrics.exact_match('the Denver Broncos.', 'denver broncos') == 1
  assert (
      squad_metrics.exact_match('Broncos', ['Denver Broncos', 'broncos']) == 1
  )
  assert squad_metrics.exact_match('Broncos', ['Denver Broncos']) == 0
  with pytest.raises(ValueError, match='ground_truths is empty'):
    squad_metrics.exact_match('x', [])


def test_f1_partial_overlap_and_max():
  # Prediction tokens: cat sat on mat (4); gold: cat sat on red mat (5);
  # common 4 -> P = 1, R = 4/5, F1 = 2 * 0.8 / 1.8 = 8/9.
  assert squad_metrics.f1('the cat sat on mat', 'a cat sat on the red mat') == (
      pytest.approx(8 / 9)
  )
  # "santa clara" vs "santa clara california": P = 1, R = 2/3 -> F1 = 0.8;
  # vs "levis stadium": 0. The max is 0.8.
  assert squad_metrics.f1(
      'Santa Clara', ['Santa Clara, California', "Levi's Stadium"]
  ) == (pytest.approx(0.8))
  # Repeated tokens count once per match: pred "go go go" vs gold "go":
  # common 1 -> P = 1/3, R = 1, F1 = 0.5.
  assert squad_metrics.f1('go go go', 'go') == pytest.approx(0.5)
  assert squad_metrics.f1('blue', 'red apple') == 0.0
  # No-answer agreement (SQuAD 2.0 rule).
  assert squad_metrics.f1('', '') == 1.0
  assert squad_metrics.f1('apple', '') == 0.0


def test_evaluate_v1_gold_answers_score_100(tmp_path):
  predictions = {
      'q1': 'the Denver Broncos',
      'q2': "Levi's Stadium",
      'q3': 'Gold',
  }
  path = tmp_path / 'dev-v1.1.json'
  path.write_text(json.dumps(V1))
  for dataset in (V1, str(path), path, V1['data']):
    result = squad_metrics.evaluate_v1(dataset, predictions)
    assert result == {'exact_match': 100.0, 'f1': 100.0, 'total': 3}


def test_evaluate_v1_hand_computed():
  # q1 exact (1, 1); q2 "Santa Clara" (0, 0.8); q3 wrong (0, 0).
  predictions = {
      'q1': 'Denver Broncos',
      'q2': 'Santa Clara',
      'q3': 'silver',
      'unknown': 'ignored',
  }
  result = squad_metrics.evaluate_v1(V1, predictions)
  assert result['exact_match'] == pytest.approx(100 / 3)
  assert result['f1'] == pytest.approx(100 * 1.8 / 3)


def test_evaluate_v1_rejects_missing_predictions_and_answers():
  with pytest.raises(ValueError, match=r"no prediction for 1 of 3 .*'q3'"):
    squad_metrics.evaluate_v1(V1, {'q1': 'a', 'q2': 'b'})
  with pytest.raises(ValueError, match=r"qas\[1\].*'q2'.*no gold answers"):
    squad_metrics.evaluate_v1(V2, {f'q{i}': '' for i in range(1, 6)})


def test_evaluate_malformed_dataset_names_location(tmp_path):
  dataset = _dataset(_question('q1', 'x'), _question('q2', 'y'))
  del dataset['data'][0]['paragraphs'][0]['qas'][1]['answers'][0]['text']
  path = tmp_path / 'bad.json'
  path.write_text(json.dumps(dataset))
  with pytest.raises(ValueError) as error:
    squad_metrics.evaluate_v1(str(path), {'q1': 'x', 'q2': 'y'})
  assert str(path) in str(error.value)
  assert "data[0].paragraphs[0].qas[1].answers[0] (question id 'q2')" in str(
      error.value
  )
  assert "missing key 'text'" in str(error.value)
  with pytest.raises(FileNotFoundError, match='missing.json'):
    squad_metrics.evaluate_v1(str(tmp_path / 'missing.json'), {})


def test_evaluate_v2_gold_answers_score_100():
  predictions = {
      'q1': 'red apple',
      'q2': '',
      'q3': 'green pear tree',
      'q4': 'old oak',
      'q5': '',
  }
  # Answerable questions are far from null, unanswerable ones far above.
  diffs = {'q1': -20.0, 'q2': 20.0, 'q3': -20.0, 'q4': -20.0, 'q5': 20.0}
  result = squad_metrics.evaluate_v2(V2, predictions, diffs)
  for key in (
      'exact',
      'f1',
      'HasAns_exact',
      'HasAns_f1',
      'NoAns_exact',
      'NoAns_f1',
      'best_exact',
      'best_f1',
  ):
    assert result[key] == 100.0, key
  assert (result['total'], result['HasAns_total'], result['NoAns_total']) == (
      5,
      3,
      2,
  )


# Best non-null predictions and null score diffs for V2.
SEARCH_PREDICTIONS = {
    'q1': 'red apple',
    'q2': 'blue',
    'q3': 'green pear',
    'q4': 'old oak',
    'q5': 'stone',
}
SEARCH_DIFFS = {'q1': -4.0, 'q2': -2.0, 'q3': 1.0, 'q4': 3.0, 'q5': 6.0}


def test_evaluate_v2_threshold_search():
  result = squad_metrics.evaluate_v2(V2, SEARCH_PREDICTIONS, SEARCH_DIFFS)
  # At threshold 0: q1 answered right; q2 answered (wrong); q3, q4 null
  # (wrong); q5 null (right). EM = F1 = 2/5.
  assert result['exact'] == pytest.approx(40.0)
  assert result['f1'] == pytest.approx(40.0)
  assert result['HasAns_exact'] == pytest.approx(100 / 3)
  assert result['NoAns_exact'] == pytest.approx(50.0)
  # Search: start with all null (2 unanswerable right = 2), then switch on
  # questions by increasing diff. EM: q1 +1 -> 3 (best, thresh -4), q2 -1 -> 2,
  # q3 +0 -> 2, q4 +1 -> 3 (not better), q5 -1 -> 2. Best 3/5 at -4.
  assert result['best_exact'] == pytest.approx(60.0)
  assert result['best_exact_thresh'] == -4.0
  # F1 ("green pear" vs "green pear tree": P 1, R 2/3, F1 0.8):
  # q1 +1 -> 3 (thresh -4), q2 -1 -> 2, q3 +0.8 -> 2.8, q4 +1 -> 3.8 (best,
  # thresh 3), q5 -1 -> 2.8. Best 3.8/5 at 3.
  assert result['best_f1'] == pytest.approx(76.0)
  assert result['best_f1_thresh'] == 3.0


def test_evaluate_v2_at_the_searched_threshold_reproduces_best():
  best = squad_metrics.evaluate_v2(V2, SEARCH_PREDICTIONS, SEARCH_DIFFS)
  at_f1_thresh = squad_metrics.evaluate_v2(
      V2,
      SEARCH_PREDICTIONS,
      SEARCH_DIFFS,
      null_score_diff_threshold=best['best_f1_thresh'],
  )
  assert at_f1_thresh['f1'] == pytest.approx(best['best_f1'])
  at_exact_thresh = squad_metrics.evaluate_v2(
      V2,
      SEARCH_PREDICTIONS,
      SEARCH_DIFFS,
      null_score_diff_threshold=best['best_exact_thresh'],
  )
  assert at_exact_thresh['exact'] == pytest.approx(best['best_exact'])


def test_evaluate_v2_requires_every_prediction_and_diff():
  with pytest.raises(ValueError, match=r"no null score diff for 1 of 5.*'q5'"):
    squad_metrics.evaluate_v2(
        V2,
        SEARCH_PREDICTIONS,
        {k: v for k, v in SEARCH_DIFFS.items() if k != 'q5'},
    )
  with pytest.raises(ValueError, match=r"no prediction for 2 of 5.*'q1', 'q2'"):
    squad_metrics.evaluate_v2(
        V2,
        {k: v for k, v in SEARCH_PREDICTIONS.items() if k > 'q2'},
        SEARCH_DIFFS,
    )


def test_apply_null_threshold():
  thresholded = squad_metrics.apply_null_threshold(
      SEARCH_PREDICTIONS, SEARCH_DIFFS, threshold=1.0
  )
  # Null only where diff > 1: q4 (3) and q5 (6); q3 (diff == 1) keeps its text.
  assert thresholded == {
      'q1': 'red apple',
      'q2': 'blue',
      'q3': 'green pear',
      'q4': '',
      'q5': '',
  }
  with pytest.raises(ValueError, match=r"first ids: \['q5'\]"):
    squad_metrics.apply_null_threshold(
        SEARCH_PREDICTIONS, {'q1': 0.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.0}, 0.0
    )
