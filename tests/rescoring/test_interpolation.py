"""Rescoring and grid search on hand-made N-best lists.

Dev set (5 reference words), hypotheses as (text, first pass, LM, errors):

  u1 'the cat sat':  r1 'the cat sat down' -1.0 -10 (1 ins)
                     r2 'the cat sat'      -2.0  -4 (0)
                     r3 'a cat'            -3.0  -2 (1 sub + 1 del)
  u2 'hello world':  r1 'hello word'       -1.0  -8 (1 sub)
                     r2 'hello world'      -1.5  -6 (0)

With length bonus 0, u1 picks r1 for w < 1/6, r2 for 1/6 < w < 1/2 (and at
the tie w = 1/2), r3 above; u2 picks r1 for w < 1/4, r2 above. Dev errors:
2 for w < 1/6, 1 up to 1/4, 0 up to 1/2, 2 above: on the grid 0, 0.1, ...,
1 the first zero-error weight is 0.3.

Test set (7 reference words) at w = 0.3:

  v1 'good morning sir': r1 'good morning' -1 -9 (1 del): -3.7
                         r2 'good morning sir' -1.2 -5 (0): -2.7, chosen
                         r3 'could morning sir sir' -4 -1 (2): -4.3
  v2 'yes':              r1 'yes' -0.5 -3 (0): -1.4, chosen
                         r2 'yes yes' -2 -4 (1 ins): -3.2
  v3 'open the door':    r1 'open a door' -1 -6 (1 sub): -2.8, chosen
                         r2 'open the door' -3 -7 (0): -5.1

First pass 2/7, rescored 1/7, oracle 0/7.
"""

import numpy as np
import pytest

from official_repro.data import nbest
from official_repro.rescoring import interpolation
from tests.rescoring.nbest_lists import DEV
from tests.rescoring.nbest_lists import TEST

WEIGHTS = tuple(round(0.1 * i, 10) for i in range(11))


def _scored_set(name, utterances):
  lists, references, scores = [], [], {}
  for utterance_id, (reference, hypotheses) in utterances.items():
    lists.append(
        nbest.NBestList(
            utterance_id,
            tuple(
                nbest.Hypothesis(rank, text, first_pass)
                for rank, (text, first_pass, _) in enumerate(
                    hypotheses, start=1
                )
            ),
        )
    )
    references.append(reference)
    for rank, (_, _, lm) in enumerate(hypotheses, start=1):
      scores[(utterance_id, rank)] = lm
  return interpolation.build_scored_set(name, lists, references, scores), lists


def test_scored_set_counts_each_hypothesis():
  dev, _ = _scored_set('dev', DEV)
  assert dev.errors.tolist() == [[1, 0, 2], [1, 0, 0]]
  assert dev.valid.tolist() == [[True, True, True], [True, True, False]]
  assert dev.num_words.tolist() == [[4, 3, 2], [2, 2, 0]]
  assert dev.reference_words.tolist() == [3, 2]
  assert dev.num_hypotheses == 5


def test_grid_search_picks_hand_predicted_weight():
  dev, _ = _scored_set('dev', DEV)
  grid = interpolation.grid_search(dev, WEIGHTS, (0.0,))
  errors = {point.weight: point.errors.errors for point in grid.points}
  assert errors == {
      0.0: 2,
      0.1: 2,
      0.2: 1,
      0.3: 0,
      0.4: 0,
      0.5: 0,
      0.6: 2,
      0.7: 2,
      0.8: 2,
      0.9: 2,
      1.0: 2,
  }
  assert (grid.best.weight, grid.best.length_bonus) == (0.3, 0.0)
  assert grid.best.errors.wer == 0.0


def test_grid_search_picks_hand_predicted_length_bonus():
  # 'a b' (-1, 1 deletion) vs 'a b c' (-1.5, correct): the longer wins
  # only for a bonus above 0.5.
  lists = [
      nbest.NBestList(
          'u',
          (
              nbest.Hypothesis(1, 'a b', -1.0),
              nbest.Hypothesis(2, 'a b c', -1.5),
          ),
      )
  ]
  scored = interpolation.build_scored_set(
      'dev', lists, ['a b c'], {('u', 1): 0.0, ('u', 2): 0.0}
  )
  grid = interpolation.grid_search(scored, (0.0, 1.0), (-1.0, 0.0, 0.5, 1.0))
  assert [p.errors.errors for p in grid.points] == [1, 1, 1, 0] * 2
  assert (grid.best.weight, grid.best.length_bonus) == (0.0, 1.0)


def test_test_set_first_pass_rescored_and_oracle_wer():
  test, lists = _scored_set('test', TEST)
  result = interpolation.evaluate(test, 0.3, 0.0)
  assert result.first_pass.errors == 2 and result.first_pass.deletions == 1
  assert result.rescored.errors == 1 and result.rescored.substitutions == 1
  assert result.oracle.errors == 0
  assert result.first_pass.wer == pytest.approx(2 / 7)
  assert result.rescored.wer == pytest.approx(1 / 7)
  assert (result.num_utterances, result.num_hypotheses) == (3, 7)
  assert result.num_rank1_not_best_first_pass == 0
  columns = interpolation.select(test, 0.3, 0.0)
  assert columns.tolist() == [1, 0, 0]
  assert interpolation.selected_texts(lists, columns) == [
      ('v1', 'good morning sir'),
      ('v2', 'yes'),
      ('v3', 'open a door'),
  ]


def test_final_score_formula_and_padding():
  dev, _ = _scored_set('dev', DEV)
  scores = interpolation.final_scores(dev, 0.5, 2.0)
  # first_pass + 0.5 * lm + 2 * words.
  assert scores[0].tolist() == [-1 - 5 + 8, -2 - 2 + 6, -3 - 1 + 4]
  assert scores[1, 2] == -np.inf


def test_rank1_that_is_not_the_first_pass_best_is_counted():
  lists = [
      nbest.NBestList(
          'u', (nbest.Hypothesis(1, 'a', 5.0), nbest.Hypothesis(2, 'b', 1.0))
      )
  ]
  scored = interpolation.build_scored_set(
      'costs', lists, ['a'], {('u', 1): 0.0, ('u', 2): 0.0}
  )
  assert interpolation.evaluate(scored, 0.0, 0.0).rescored.errors == 0
  lists = [
      nbest.NBestList(
          'u', (nbest.Hypothesis(1, 'a', 1.0), nbest.Hypothesis(2, 'b', 5.0))
      )
  ]
  scored = interpolation.build_scored_set(
      'costs', lists, ['a'], {('u', 1): 0.0, ('u', 2): 0.0}
  )
  result = interpolation.evaluate(scored, 0.0, 0.0)
  assert result.num_rank1_not_best_first_pass == 1
  assert (result.first_pass.errors, result.rescored.errors) == (0, 1)


def test_missing_lm_score_and_empty_grid_are_errors():
  lists = [nbest.NBestList('u', (nbest.Hypothesis(1, 'a', 0.0),))]
  with pytest.raises(ValueError, match='lm.tsv: 1 of 1 hypotheses'):
    interpolation.build_scored_set('dev', lists, ['a'], {}, 'lm.tsv')
  scored = interpolation.build_scored_set('dev', lists, ['a'], {('u', 1): 0.0})
  with pytest.raises(ValueError, match='grid is empty'):
    interpolation.grid_search(scored, (), (0.0,))
