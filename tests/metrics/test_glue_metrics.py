"""Tests of the GLUE metrics against hand-computed values."""

import math

import numpy as np
import pytest

from official_repro.metrics import glue_metrics

# Confusion matrix TP=3, FP=1, FN=1, TN=3.
_PREDICTIONS = [1, 1, 1, 0, 0, 0, 0, 1]
_LABELS = [1, 1, 0, 0, 0, 1, 0, 1]


class TestClassificationMetrics:

  def test_accuracy(self):
    assert glue_metrics.accuracy(_PREDICTIONS, _LABELS) == 0.75
    assert glue_metrics.accuracy([2, 0, 1], [2, 1, 1]) == pytest.approx(2 / 3)

  def test_f1(self):
    # 2 TP / (2 TP + FP + FN) = 6 / 8.
    assert glue_metrics.f1(_PREDICTIONS, _LABELS) == 0.75
    # TP=2, FP=1, FN=0 for class 1: 4 / 5; TP=1, FP=0, FN=1 for class 0: 2 / 3.
    assert glue_metrics.f1([1, 1, 1, 0], [1, 1, 0, 0]) == pytest.approx(0.8)
    assert glue_metrics.f1(
        [1, 1, 1, 0], [1, 1, 0, 0], positive=0
    ) == pytest.approx(2 / 3)

  def test_f1_without_positives_is_zero(self):
    assert glue_metrics.f1([0, 0], [0, 0]) == 0.0

  def test_mcc_by_hand(self):
    # (3*3 - 1*1) / sqrt(4 * 4 * 4 * 4) = 8 / 16.
    assert glue_metrics.matthews_corrcoef(_PREDICTIONS, _LABELS) == 0.5
    # TP=2, TN=1, FP=1, FN=0: (2 - 0) / sqrt(3 * 2 * 2 * 1).
    assert glue_metrics.matthews_corrcoef(
        [1, 1, 1, 0], [1, 1, 0, 0]
    ) == pytest.approx(2 / math.sqrt(12))

  def test_mcc_extremes_and_degenerate(self):
    assert glue_metrics.matthews_corrcoef([1, 0, 1], [1, 0, 1]) == 1.0
    assert glue_metrics.matthews_corrcoef([0, 1, 0], [1, 0, 1]) == -1.0
    assert glue_metrics.matthews_corrcoef([1, 1, 1], [1, 0, 1]) == 0.0
    assert glue_metrics.matthews_corrcoef([0, 1, 0], [1, 1, 1]) == 0.0

  def test_mcc_large_counts_do_not_overflow(self):
    predictions = np.array([1] * 60000 + [0] * 60000)
    assert glue_metrics.matthews_corrcoef(predictions, predictions) == 1.0

  def test_mcc_rejects_non_binary(self):
    with pytest.raises(ValueError, match='0 or 1'):
      glue_metrics.matthews_corrcoef([0, 2], [0, 1])


class TestCorrelations:

  def test_pearson_by_hand(self):
    # Deviations x: -1.5 -.5 .5 1.5, y: -3 -1 0 4; 11 / sqrt(5 * 26).
    assert glue_metrics.pearson([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(
        11 / math.sqrt(130)
    )

  def test_spearman_with_ties_by_hand(self):
    # Ranks x: 1 2.5 2.5 4, y: 1 3 2 4; 4.5 / sqrt(4.5 * 5).
    assert glue_metrics.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(
        4.5 / math.sqrt(22.5)
    )

  def test_spearman_is_one_for_monotone(self):
    x, y = [1, 2, 3, 4], [1, 8, 27, 64]
    assert glue_metrics.spearman(x, y) == pytest.approx(1.0)
    assert glue_metrics.pearson(x, y) < 0.99

  def test_constant_input_gives_zero(self):
    assert glue_metrics.pearson([1, 1, 1], [1, 2, 3]) == 0.0
    assert glue_metrics.spearman([1, 2, 3], [4, 4, 4]) == 0.0

  def test_rejects_non_finite_and_single_value(self):
    with pytest.raises(ValueError, match='NaN'):
      glue_metrics.pearson([1.0, float('nan')], [1.0, 2.0])
    with pytest.raises(ValueError, match='at least 2'):
      glue_metrics.spearman([1.0], [1.0])


@pytest.mark.parametrize(
    'metric',
    [
        glue_metrics.accuracy,
        glue_metrics.f1,
        glue_metrics.matthews_corrcoef,
        glue_metrics.pearson,
        glue_metrics.spearman,
    ],
)
def test_validation_of_lengths_and_emptiness(metric):
  with pytest.raises(ValueError, match='differ in length: 3 .* 2'):
    metric([0, 1, 1], [0, 1])
  with pytest.raises(ValueError, match='empty'):
    metric([], [])
  with pytest.raises(ValueError, match='1-D'):
    metric([[0, 1]], [[0, 1]])


class TestTaskMetrics:

  def test_cola(self):
    assert glue_metrics.task_metrics('cola', _PREDICTIONS, _LABELS) == {
        'mcc': 0.5,
        'accuracy': 0.75,
    }

  def test_mrpc_and_qqp(self):
    expected = {'accuracy': 0.75, 'f1': 0.75, 'acc_and_f1': 0.75}
    assert glue_metrics.task_metrics('mrpc', _PREDICTIONS, _LABELS) == expected
    scores = glue_metrics.task_metrics('qqp', [1, 1, 1, 0], [1, 1, 0, 0])
    assert scores == pytest.approx(
        {'accuracy': 0.75, 'f1': 0.8, 'acc_and_f1': 0.775}
    )

  def test_stsb(self):
    scores = glue_metrics.task_metrics('stsb', [1, 2, 2, 3], [1, 3, 2, 4])
    # Pearson: deviations -1 0 0 1 and -1.5 .5 -.5 1.5; 3 / sqrt(2 * 5).
    assert scores == pytest.approx(
        {
            'pearson': 3 / math.sqrt(10),
            'spearman': 4.5 / math.sqrt(22.5),
            'corr': (3 / math.sqrt(10) + 4.5 / math.sqrt(22.5)) / 2,
        }
    )

  def test_accuracy_only_tasks(self):
    for task in ('sst2', 'mnli', 'qnli', 'rte'):
      assert glue_metrics.task_metrics(task, [0, 2], [0, 1]) == {
          'accuracy': 0.5
      }

  def test_unknown_task(self):
    with pytest.raises(ValueError, match='wnli'):
      glue_metrics.task_metrics('wnli', [0], [0])


class TestHeadlineAndAverage:

  def test_headline_score(self):
    assert (
        glue_metrics.headline_score('cola', {'mcc': 0.5, 'accuracy': 0.8})
        == 0.5
    )
    stsb = {'pearson': 0.8, 'spearman': 0.9, 'corr': 0.85}
    assert glue_metrics.headline_score('stsb', stsb) == 0.9
    assert (
        glue_metrics.headline_score('stsb', stsb, stsb_metric='pearson') == 0.8
    )
    mrpc = {'accuracy': 0.8, 'f1': 0.85, 'acc_and_f1': 0.825}
    assert glue_metrics.headline_score('mrpc', mrpc) == 0.8
    assert glue_metrics.headline_score('mrpc', mrpc, use_f1=True) == 0.85
    assert (
        glue_metrics.headline_score('rte', {'accuracy': 0.6}, use_f1=True)
        == 0.6
    )

  def test_headline_score_errors(self):
    with pytest.raises(ValueError, match="lack 'mcc'"):
      glue_metrics.headline_score('cola', {'accuracy': 0.8})
    with pytest.raises(ValueError, match='stsb_metric'):
      glue_metrics.headline_score('stsb', {'pearson': 0.8}, stsb_metric='r2')

  def test_glue_average_counts_mnli_once(self):
    scores = dict(
        cola=60.0,
        sst2=90.0,
        mrpc=86.0,
        stsb=87.0,
        qqp=89.0,
        mnli=81.0,
        qnli=88.0,
        rte=67.0,
        mnli_mismatched=0.0,
    )
    assert glue_metrics.glue_average(scores, require_all=True) == (
        pytest.approx(648.0 / 8)
    )

  def test_glue_average_partial_and_required(self):
    assert glue_metrics.glue_average({'cola': 50.0, 'rte': 70.0}) == 60.0
    with pytest.raises(ValueError, match=r"missing \['sst2', 'mrpc'"):
      glue_metrics.glue_average({'cola': 50.0, 'rte': 70.0}, require_all=True)

  def test_glue_average_errors(self):
    with pytest.raises(ValueError, match="Unknown GLUE tasks \\['wnli'\\]"):
      glue_metrics.glue_average({'wnli': 1.0, 'rte': 2.0})
    with pytest.raises(ValueError, match='No GLUE task'):
      glue_metrics.glue_average({'mnli_mismatched': 80.0})
