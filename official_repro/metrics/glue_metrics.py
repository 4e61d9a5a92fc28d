"""GLUE dev-set metrics (scikit-learn and scipy), and the GLUE average.

A constant input has no correlation; 0 is returned (scipy gives NaN) so an
early one-score evaluation does not poison a mean. The GLUE score is the
unweighted mean over the eight tasks, MNLI once by its matched dev score, as
in TEAMS and ELECTRA.
"""

from typing import Dict, Mapping, Tuple

import numpy as np
from scipy import stats
from sklearn import metrics as sklearn_metrics

from official_repro.data import glue

# Reported beside MNLI (matched) in tables but not part of the average.
MNLI_MISMATCHED = 'mnli_mismatched'
STSB_METRICS = ('pearson', 'spearman', 'corr')
_F1_TASKS = ('mrpc', 'qqp')


def _validate_pair(predictions, labels) -> Tuple[np.ndarray, np.ndarray]:
  """Both as 1-D arrays of equal, non-zero length; ValueError otherwise."""
  predictions = np.asarray(predictions)
  labels = np.asarray(labels)
  if predictions.ndim != 1 or labels.ndim != 1:
    raise ValueError(
        f'Expected 1-D inputs, got shapes {predictions.shape} '
        f'and {labels.shape}.'
    )
  if predictions.shape != labels.shape:
    raise ValueError(
        f'Inputs differ in length: {predictions.shape[0]} '
        f'predictions vs {labels.shape[0]} labels.'
    )
  if predictions.shape[0] == 0:
    raise ValueError('Inputs are empty.')
  return predictions, labels


def _validate_binary(predictions, labels) -> Tuple[np.ndarray, np.ndarray]:
  """Validated inputs whose values are all 0 or 1."""
  predictions, labels = _validate_pair(predictions, labels)
  for name, values in (('predictions', predictions), ('labels', labels)):
    if not np.isin(values, (0, 1)).all():
      raise ValueError(
          f'Binary {name} must be 0 or 1, got values '
          f'{sorted(set(np.unique(values).tolist()))}.'
      )
  return predictions.astype(np.int64), labels.astype(np.int64)


def _validate_real(x, y) -> Tuple[np.ndarray, np.ndarray]:
  """Validated float64 inputs, finite, with at least two values."""
  x, y = _validate_pair(x, y)
  x = x.astype(np.float64)
  y = y.astype(np.float64)
  if not (np.isfinite(x).all() and np.isfinite(y).all()):
    raise ValueError('Correlation inputs contain NaN or infinite values.')
  if x.shape[0] < 2:
    raise ValueError('A correlation needs at least 2 values.')
  return x, y


def accuracy(predictions, labels) -> float:
  """Fraction of `predictions` equal to `labels` (both int [N])."""
  predictions, labels = _validate_pair(predictions, labels)
  return float(sklearn_metrics.accuracy_score(labels, predictions))


def f1(predictions, labels, positive: int = 1) -> float:
  """F1 of class `positive` of int [N] predictions and labels (0 if none)."""
  predictions, labels = _validate_pair(predictions, labels)
  return float(
      sklearn_metrics.f1_score(
          labels == positive, predictions == positive, zero_division=0
      )
  )


def matthews_corrcoef(predictions, labels) -> float:
  """Matthews correlation of binary int [N] predictions and labels."""
  predictions, labels = _validate_binary(predictions, labels)
  return float(sklearn_metrics.matthews_corrcoef(labels, predictions))


def pearson(x, y) -> float:
  """Pearson correlation of float [N] `x` and `y` (0.0 if one is constant)."""
  return _correlation(stats.pearsonr, x, y)


def spearman(x, y) -> float:
  """Spearman rank correlation of float [N] `x` and `y` (ties: mean ranks)."""
  return _correlation(stats.spearmanr, x, y)


def _correlation(function, x, y) -> float:
  x, y = _validate_real(x, y)
  if np.ptp(x) == 0 or np.ptp(y) == 0:
    return 0.0
  return float(function(x, y).statistic)


def task_metrics(task: str, predictions, labels) -> Dict[str, float]:
  """All dev metrics of a GLUE task (corr, acc_and_f1: means of the pair)."""
  glue.get_task_spec(task)
  if task == 'stsb':
    scores = dict(
        pearson=pearson(predictions, labels),
        spearman=spearman(predictions, labels),
    )
    scores['corr'] = (scores['pearson'] + scores['spearman']) / 2.0
    return scores
  scores = dict(accuracy=accuracy(predictions, labels))
  if task == 'cola':
    scores['mcc'] = matthews_corrcoef(predictions, labels)
  elif task in _F1_TASKS:
    scores['f1'] = f1(predictions, labels)
    scores['acc_and_f1'] = (scores['accuracy'] + scores['f1']) / 2.0
  return scores


def headline_score(
    task: str,
    metrics: Mapping[str, float],
    stsb_metric: str = 'spearman',
    use_f1: bool = False,
) -> float:
  """The number a paper's GLUE table shows for `task`, from `task_metrics`."""
  glue.get_task_spec(task)
  if stsb_metric not in STSB_METRICS:
    raise ValueError(
        f'stsb_metric must be one of {STSB_METRICS}, got {stsb_metric!r}.'
    )
  default = 'f1' if task in _F1_TASKS and use_f1 else 'accuracy'
  key = {'cola': 'mcc', 'stsb': stsb_metric}.get(task, default)
  if key not in metrics:
    raise ValueError(f'Metrics of {task} lack {key!r}; got {sorted(metrics)}.')
  return float(metrics[key])


def glue_average(
    scores: Mapping[str, float], require_all: bool = False
) -> float:
  """The mean of headline scores (MNLI matched only; `require_all`: all 8)."""
  tasks = glue.GLUE_TASK_NAMES
  unknown = sorted(set(scores) - set(tasks) - {MNLI_MISMATCHED})
  if unknown:
    raise ValueError(
        f'Unknown GLUE tasks {unknown}; expected names in '
        f'{list(tasks)} (or {MNLI_MISMATCHED!r}).'
    )
  present = [task for task in tasks if task in scores]
  missing = [task for task in tasks if task not in scores]
  if require_all and missing:
    raise ValueError(f'GLUE average needs all 8 tasks; missing {missing}.')
  if not present:
    raise ValueError('No GLUE task scores to average.')
  return float(np.mean([scores[task] for task in present]))
