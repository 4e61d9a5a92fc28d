"""How each reproduced paper turns several fine-tuning runs into one number.

Fine-tuning scores on small GLUE tasks vary a lot with the random seed, and
the four papers aggregate runs differently, so a reproduction must use the
same rule before comparing numbers:

* 001 (ALE): the maximum of 10 runs.
* 002 (ConvBERT rebuttal): the median of 9 runs, plus mean and spread in its
  Table 6.
* 003 (TEAMS): the median of 15 runs; within a run, the best GLUE evaluation
  during fine-tuning, but the SQuAD score at the end of fine-tuning.
* 004 (SCRIPT): the mean of 8 runs.

Two choices are made per run (`select_eval`: the 'best' or the 'last' of the
evaluations made during fine-tuning) and across runs (`aggregate`: 'max',
'median' or 'mean'). A paper that does not say how it picks an evaluation
within a run gets 'last', the score of the fine-tuned model as trained. The
papers' choices are gin (`run_protocol` in `gin/finetune/<paper>/protocol.gin`),
each line citing the paper.

`compare` is the one verdict every experiment and report gives on two sets
of per-seed values: 'ahead', 'behind' or 'within noise', by whether the gap
of their means exceeds twice its standard error.
"""

import math
import dataclasses
from typing import Dict, Mapping, Sequence

import numpy as np

AGGREGATIONS = ('max', 'median', 'mean')
SELECTIONS = ('best', 'last')


def _validate_values(values: Sequence[float]) -> np.ndarray:
  """float64 [n] of finite values, n >= 1; ValueError otherwise."""
  array = np.asarray(values, dtype=np.float64)
  if array.ndim != 1 or array.shape[0] == 0:
    raise ValueError(
        f'Expected a non-empty list of run scores, got shape ' f'{array.shape}.'
    )
  if not np.isfinite(array).all():
    raise ValueError(f'Run scores must be finite, got {array.tolist()}.')
  return array


def aggregate(values: Sequence[float], method: str) -> float:
  """Combines the scores of several runs into one.

  Args:
    values: n >= 1 run scores.
    method: 'max', 'median' or 'mean'. The median is the middle value of the
      sorted scores for odd n and the mean of the two middle values for even n.

  Returns:
    The aggregated score.

  Raises:
    ValueError: unknown method, or empty or non-finite values.
  """
  if method not in AGGREGATIONS:
    raise ValueError(
        f'Unknown aggregation {method!r}; expected one of ' f'{AGGREGATIONS}.'
    )
  array = _validate_values(values)
  if method == 'max':
    return float(array.max())
  if method == 'mean':
    return float(array.mean())
  ordered = np.sort(array)
  middle = len(ordered) // 2
  if len(ordered) % 2:
    return float(ordered[middle])
  return float((ordered[middle - 1] + ordered[middle]) / 2.0)


def summarize(values: Sequence[float]) -> Dict[str, float]:
  """Summary statistics of run scores.

  Args:
    values: n >= 1 run scores.

  Returns:
    A dict with 'n', 'max', 'median', 'mean', 'min', 'std' (sample standard
    deviation, ddof=1; 0 for n = 1) and 'sem' (standard error of the mean,
    std / sqrt(n)). 002 says "mean and standard error" for its "±" column
    without saying which of the two it shows, so both are given.
  """
  array = _validate_values(values)
  n = array.shape[0]
  std = float(array.std(ddof=1)) if n > 1 else 0.0
  return dict(
      n=n,
      max=float(array.max()),
      median=aggregate(array, 'median'),
      mean=float(array.mean()),
      min=float(array.min()),
      std=std,
      sem=std / math.sqrt(n),
  )


VERDICTS = ('ahead', 'behind', 'within noise')


@dataclasses.dataclass(frozen=True)
class Comparison:
  """`a` against `b`: the gap of their means, its noise and the verdict."""

  gap: float
  noise: float
  verdict: str


def compare(a: Sequence[float], b: Sequence[float]) -> Comparison:
  """Whether `a`'s mean differs from `b`'s beyond noise.

  Args:
    a: n_a >= 2 per-seed values.
    b: n_b >= 2 per-seed values.

  Returns:
    gap = mean(a) - mean(b); noise = twice its standard error,
    2 sqrt(s_a^2 / n_a + s_b^2 / n_b) (Welch's, sample variances); verdict
    'ahead' (gap > noise), 'behind' (gap < -noise) or 'within noise'.

  Raises:
    ValueError: fewer than two values on a side (no spread to judge by).
  """
  if len(a) < 2 or len(b) < 2:
    raise ValueError(
        f'compare needs at least 2 values a side, got {len(a)} and {len(b)}.'
    )
  return compare_summaries(summarize(a), summarize(b))


def compare_summaries(
    a: Mapping[str, float], b: Mapping[str, float]
) -> Comparison:
  """`compare` of two `summarize` results (their 'n', 'mean' and 'std')."""
  gap = a['mean'] - b['mean']
  noise = 2.0 * math.sqrt(a['std'] ** 2 / a['n'] + b['std'] ** 2 / b['n'])
  if gap > noise:
    verdict = 'ahead'
  elif gap < -noise:
    verdict = 'behind'
  else:
    verdict = 'within noise'
  return Comparison(gap=gap, noise=noise, verdict=verdict)


def select_eval(
    history: Sequence[Mapping[str, float]], key: str, selection: str
) -> Mapping[str, float]:
  """Picks the evaluation of one fine-tuning run that is reported.

  Args:
    history: the metric dicts of the run's evaluations, in time order.
    key: the metric that decides 'best' (higher is better, as for every GLUE
      and SQuAD metric); the earliest evaluation wins a tie.
    selection: 'best' (highest `key`) or 'last' (the final evaluation).

  Returns:
    The chosen metric dict, unchanged.

  Raises:
    ValueError: unknown selection, empty history, or an evaluation without
      `key`.
  """
  if selection not in SELECTIONS:
    raise ValueError(
        f'Unknown selection {selection!r}; expected one of ' f'{SELECTIONS}.'
    )
  if not history:
    raise ValueError('The evaluation history is empty.')
  lacking = [i for i, metrics in enumerate(history) if key not in metrics]
  if lacking:
    raise ValueError(f'Evaluations {lacking} (0-based) lack metric {key!r}.')
  if selection == 'last':
    return history[-1]
  best = max(range(len(history)), key=lambda i: history[i][key])
  return history[best]
