"""Tests of run aggregation, per-paper protocols and evaluation selection."""

import math

import pytest

from official_repro.metrics import aggregation


class TestAggregate:

  def test_median_odd_and_even(self):
    assert aggregation.aggregate([3.0, 1.0, 2.0], 'median') == 2.0
    assert aggregation.aggregate([4.0, 1.0, 3.0, 2.0], 'median') == 2.5
    assert aggregation.aggregate([7.0], 'median') == 7.0

  def test_max_and_mean(self):
    values = [80.0, 82.5, 79.0, 81.0]
    assert aggregation.aggregate(values, 'max') == 82.5
    assert aggregation.aggregate(values, 'mean') == 322.5 / 4

  def test_errors(self):
    with pytest.raises(ValueError, match=r"'best'.*'max', 'median', 'mean'"):
      aggregation.aggregate([1.0], 'best')
    with pytest.raises(ValueError, match='non-empty'):
      aggregation.aggregate([], 'max')
    with pytest.raises(ValueError, match='finite'):
      aggregation.aggregate([1.0, float('nan')], 'mean')


class TestSummarize:

  def test_values(self):
    summary = aggregation.summarize([4.0, 1.0, 3.0, 2.0])
    # Sample variance: (2.25 + .25 + .25 + 2.25) / 3 = 5 / 3.
    assert summary == pytest.approx(
        dict(
            n=4,
            max=4.0,
            median=2.5,
            mean=2.5,
            min=1.0,
            std=math.sqrt(5 / 3),
            sem=math.sqrt(5 / 3) / 2,
        )
    )

  def test_single_run_has_zero_spread(self):
    summary = aggregation.summarize([0.7])
    assert (summary['n'], summary['std'], summary['sem']) == (1, 0.0, 0.0)


class TestSelectEval:

  _HISTORY = [
      {'step': 100, 'accuracy': 0.70},
      {'step': 200, 'accuracy': 0.78},
      {'step': 300, 'accuracy': 0.78},
      {'step': 400, 'accuracy': 0.74},
  ]

  def test_best_vs_last(self):
    best = aggregation.select_eval(self._HISTORY, 'accuracy', 'best')
    last = aggregation.select_eval(self._HISTORY, 'accuracy', 'last')
    # The tie at 0.78 goes to the earlier evaluation.
    assert best['step'] == 200
    assert last['step'] == 400

  def test_errors(self):
    with pytest.raises(ValueError, match="'max'.*'best', 'last'"):
      aggregation.select_eval(self._HISTORY, 'accuracy', 'max')
    with pytest.raises(ValueError, match='empty'):
      aggregation.select_eval([], 'accuracy', 'best')
    with pytest.raises(ValueError, match=r"\[1\] .*'mcc'"):
      aggregation.select_eval([{'mcc': 0.1}, {'accuracy': 0.2}], 'mcc', 'best')
