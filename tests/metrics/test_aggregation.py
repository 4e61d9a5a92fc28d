"""Tests of run aggregation, per-paper protocols and evaluation selection."""

import math

import numpy as np
import pytest
from scipy import stats

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


class TestCompare:

  def test_noise_is_twice_welchs_standard_error(self):
    a, b = [0.30, 0.34, 0.33, 0.31], [0.25, 0.29, 0.24]
    welch = stats.ttest_ind(a, b, equal_var=False)
    gap = np.mean(a) - np.mean(b)
    result = aggregation.compare(a, b)
    assert result.gap == pytest.approx(gap)
    # Welch's t is the gap over its standard error.
    assert result.noise == pytest.approx(2.0 * gap / welch.statistic)
    assert result.verdict == 'ahead'
    assert aggregation.compare(b, a).verdict == 'behind'

  def test_a_gap_inside_the_noise(self):
    result = aggregation.compare([0.30, 0.40], [0.33, 0.36])
    assert abs(result.gap) < result.noise
    assert result.verdict == 'within noise'

  def test_one_value_has_no_spread(self):
    with pytest.raises(ValueError, match='at least 2 values'):
      aggregation.compare([0.3], [0.2, 0.1])
