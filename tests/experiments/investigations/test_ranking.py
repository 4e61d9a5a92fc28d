"""The exact ROC AUC against a count over every pair."""

import itertools

import numpy as np
import pytest

from experiments.investigations import ranking

pytestmark = pytest.mark.slow


def pairwise_auc(labels, scores):
  """P(positive scores above negative), ties one half, by every pair."""
  wins = 0.0
  positives = [s for y, s in zip(labels, scores) if y]
  negatives = [s for y, s in zip(labels, scores) if not y]
  for p, n in itertools.product(positives, negatives):
    wins += 1.0 if p > n else 0.5 if p == n else 0.0
  return wins / (len(positives) * len(negatives))


def test_auc_is_the_pairwise_win_rate_with_ties_halved():
  rng = np.random.RandomState(0)
  labels = rng.rand(200) < 0.3
  scores = np.round(rng.normal(size=200) + labels, 1)  # many ties
  assert ranking.auc(labels, scores) == pytest.approx(
      pairwise_auc(labels, scores), abs=1e-12
  )


def test_auc_of_a_perfect_reversed_and_constant_scorer():
  labels = np.array([0, 1, 0, 1, 1])
  assert ranking.auc(labels, labels * 2.0) == 1.0
  assert ranking.auc(labels, -labels * 2.0) == 0.0
  assert ranking.auc(labels, np.ones(5)) == 0.5


def test_auc_is_nan_without_both_classes():
  assert np.isnan(ranking.auc(np.zeros(3), np.arange(3.0)))
  assert np.isnan(ranking.auc(np.ones(3), np.arange(3.0)))
