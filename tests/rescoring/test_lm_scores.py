"""Tests of LM score files and of the batched `Scorer` interface."""

import numpy as np
import pytest

from official_repro.data import nbest
from official_repro.rescoring import lm_scores


def _list(utterance_id, *texts):
  return nbest.NBestList(
      utterance_id,
      tuple(
          nbest.Hypothesis(rank, text, 0.0)
          for rank, text in enumerate(texts, start=1)
      ),
  )


class _WordCountScorer:
  """log-score = -(number of words); records each batch it is given."""

  def __init__(self):
    self.batches = []

  def __call__(self, sentences):
    self.batches.append(list(sentences))
    return np.array([-float(len(s.split())) for s in sentences])


def test_score_nbest_batches_and_scores_each_text_once():
  lists = [_list('u1', 'a b', 'a', 'a b c'), _list('u2', 'a', 'd e f g')]
  scorer = _WordCountScorer()
  scores = lm_scores.score_nbest(scorer, lists, batch_size=2)
  assert scores == {
      ('u1', 1): -2.0,
      ('u1', 2): -1.0,
      ('u1', 3): -3.0,
      ('u2', 1): -1.0,
      ('u2', 2): -4.0,
  }
  # 'a' is scored once; 4 distinct texts in batches of at most 2.
  assert scorer.batches == [['a b', 'a'], ['a b c', 'd e f g']]


def test_score_nbest_rejects_bad_scorer_output():
  lists = [_list('u1', 'a', 'b')]
  with pytest.raises(ValueError, match=r'shape \(1,\) for 2 sentences'):
    lm_scores.score_nbest(lambda s: np.zeros(1), lists)
  with pytest.raises(ValueError, match="nan for 'a'"):
    lm_scores.score_nbest(lambda s: np.full(len(s), np.nan), lists)
  with pytest.raises(ValueError, match='batch_size'):
    lm_scores.score_nbest(lambda s: np.zeros(len(s)), lists, batch_size=0)


def test_read_lm_scores_skips_and_names_malformed_lines(tmp_path):
  path = tmp_path / 'lm.tsv'
  path.write_text(
      'u1\t1\t-3.5\nu1\t2\t-1e1\n\nu1 3 -2\nu2\t0\t-1\n'
      'u2\t1\tnan\nu2\t1\t-2\n'
  )
  scores, report = lm_scores.read_lm_scores(str(path))
  assert scores == {('u1', 1): -3.5, ('u1', 2): -10.0, ('u2', 1): -2.0}
  assert [location for location, _ in report.malformed] == [
      f'{path} line {n}' for n in (4, 5, 6)
  ]
  assert report.as_dict()['num_scores'] == 3


def test_read_lm_scores_errors(tmp_path):
  duplicate = tmp_path / 'dup.tsv'
  duplicate.write_text('u1\t1\t-1\nu1\t1\t-2\n')
  with pytest.raises(
      ValueError,
      match='line 2: rank 1 of utterance ' "'u1' was already scored at line 1",
  ):
    lm_scores.read_lm_scores(str(duplicate))
  empty = tmp_path / 'empty.tsv'
  empty.write_text('u1 1 -1\n')
  with pytest.raises(ValueError, match='no LM score could be read; all 1'):
    lm_scores.read_lm_scores(str(empty))
  with pytest.raises(FileNotFoundError, match='LM scores file not found'):
    lm_scores.read_lm_scores(str(tmp_path / 'missing.tsv'))


def test_write_then_read_round_trip(tmp_path):
  scores = {('u1', 1): -1.25, ('u1', 2): -0.1 - 0.2, ('spk-u2', 10): 3.0}
  path = str(tmp_path / 'lm.tsv')
  with open(path, 'w') as f:
    for (utterance_id, rank), score in scores.items():
      f.write(f'{utterance_id}\t{rank}\t{score!r}\n')
  assert lm_scores.read_lm_scores(path)[0] == scores


def test_check_complete_names_missing_hypotheses():
  lists = [_list('u1', 'a', 'b')]
  lm_scores.check_complete({('u1', 1): 0.0, ('u1', 2): 0.0}, lists, 'x')
  with pytest.raises(
      ValueError,
      match=r'lm.tsv: 1 of 2 hypotheses have no '
      r"LM score, e.g. \(utt_id, rank\) \[\('u1', 2\)\]",
  ):
    lm_scores.check_complete({('u1', 1): 0.0}, lists, 'lm.tsv')
