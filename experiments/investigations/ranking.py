"""Ranking metrics of a binary scorer on numpy arrays.

The replaced-token detector is judged by the area under its ROC curve, as
google-research/electra's `disc_auc` judges it. Model Garden's streaming
`tf_keras.metrics.AUC` approximates it on 200 thresholds; analyses of saved
logits (`dynamics_parity.py`, `discriminator_probe_lib.py`) need it exactly,
from average ranks.
"""

import numpy as np
from scipy import stats


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
  """ROC AUC of float `[n]` scores for `[n]` labels (> 0: positive).

  The Mann-Whitney statistic by average ranks (ties count one half); NaN
  when either class is empty.
  """
  positives = np.asarray(labels) > 0
  n_positive = int(positives.sum())
  n_negative = positives.size - n_positive
  if not n_positive or not n_negative:
    return float('nan')
  ranks = stats.rankdata(np.asarray(scores, np.float64))
  return float(
      (ranks[positives].sum() - n_positive * (n_positive + 1) / 2.0)
      / (n_positive * n_negative)
  )
