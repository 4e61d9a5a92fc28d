"""How each reproduced paper turns several fine-tuning runs into one number.

Seeds vary a lot on small GLUE tasks and the papers aggregate differently:
001 the max of 10 runs, 002 the median of 9, 003 the median of 15 (best GLUE
eval within a run, SQuAD at the end), 004 the mean of 8. `select_eval` picks
a run's 'best' or 'last' eval ('last' where a paper does not say) and
`aggregate` combines runs; the choices are gin (`run_protocol`). `compare`
is the one verdict on two sets of per-seed values: 'ahead', 'behind' or
'within noise' (gap of means beyond twice its standard error).
"""

import math
import dataclasses
from typing import Dict, Mapping, Sequence

import numpy as np

_AGGREGATORS = {'max': np.max, 'median': np.median, 'mean': np.mean}
AGGREGATIONS = tuple(_AGGREGATORS)
SELECTIONS = ('best', 'last')


def _validate_values(values: Sequence[float]) -> np.ndarray:
  """float64 [n] of finite values, n >= 1; ValueError otherwise."""
  array = np.asarray(values, dtype=np.float64)
  if array.ndim != 1 or array.shape[0] == 0:
    raise ValueError(
        f'Expected a non-empty list of run scores, got shape {array.shape}.'
    )
  if not np.isfinite(array).all():
    raise ValueError(f'Run scores must be finite, got {array.tolist()}.')
  return array


def aggregate(values: Sequence[float], method: str) -> float:
  """Combines n >= 1 run scores by 'max', 'median' or 'mean'."""
  if method not in AGGREGATIONS:
    raise ValueError(
        f'Unknown aggregation {method!r}; expected one of {AGGREGATIONS}.'
    )
  return float(_AGGREGATORS[method](_validate_values(values)))


def summarize(values: Sequence[float]) -> Dict[str, float]:
  """'n', 'max', 'median', 'mean', 'min', 'std' (ddof=1) and 'sem' (002's ±)."""
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


@dataclasses.dataclass(frozen=True)
class Comparison:
  """`a` against `b`: the gap of their means, its noise and the verdict."""

  gap: float
  noise: float
  verdict: str


def compare(a: Sequence[float], b: Sequence[float]) -> Comparison:
  """Whether mean(a) - mean(b) exceeds 2 sqrt(s_a^2/n_a + s_b^2/n_b)."""
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
  verdict = 'within noise'
  if abs(gap) > noise:
    verdict = 'ahead' if gap > 0 else 'behind'
  return Comparison(gap=gap, noise=noise, verdict=verdict)


def select_eval(
    history: Sequence[Mapping[str, float]], key: str, selection: str
) -> Mapping[str, float]:
  """A run's reported eval: 'best' `key` (earliest on a tie) or 'last'."""
  if selection not in SELECTIONS:
    raise ValueError(
        f'Unknown selection {selection!r}; expected one of {SELECTIONS}.'
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
