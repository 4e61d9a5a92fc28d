"""N-best rescoring by log-linear interpolation, tuned by grid search.

A hypothesis scores first_pass + weight * lm_score + length_bonus * words;
each utterance outputs its best-scoring hypothesis (lowest rank on a tie).
The grid point with the fewest dev word errors (the first in grid order on a
tie: weights outer) is applied to every set, which reports the first-pass
(rank 1), rescored and oracle WERs. Word errors are counted once per
hypothesis (`metrics.wer`), so a grid point costs one vectorised argmax.
"""

import dataclasses
import itertools
from typing import List, Mapping, Optional, Sequence, Tuple

import numpy as np

from official_repro.common import cli
from official_repro.data import nbest
from official_repro.metrics import wer
from official_repro.rescoring import lm_scores

# The word edits of `wer.ErrorCounts`, arrays of `ScoredSet`.
_EDITS = ('substitutions', 'deletions', 'insertions')


@dataclasses.dataclass(frozen=True)
class ScoredSet:
  """One set's hypotheses by rank as `[utterances, max hypotheses]` arrays."""

  name: str
  utterance_ids: Tuple[str, ...]
  valid: np.ndarray
  first_pass: np.ndarray
  lm: np.ndarray
  num_words: np.ndarray
  substitutions: np.ndarray
  deletions: np.ndarray
  insertions: np.ndarray
  reference_words: np.ndarray

  @property
  def errors(self) -> np.ndarray:
    """Word errors of each hypothesis."""
    return self.substitutions + self.deletions + self.insertions

  @property
  def num_hypotheses(self) -> int:
    """The number of hypotheses (padding excluded)."""
    return int(self.valid.sum())


@dataclasses.dataclass(frozen=True)
class SetResult:
  """The WERs of one set at one `(weight, length_bonus)` (None without LM)."""

  name: str
  num_utterances: int
  num_hypotheses: int
  weight: Optional[float]
  length_bonus: Optional[float]
  first_pass: wer.ErrorCounts
  rescored: Optional[wer.ErrorCounts]
  oracle: wer.ErrorCounts
  num_rank1_not_best_first_pass: int

  def as_dict(self) -> dict:
    """The result as JSON-serialisable values."""
    values = dataclasses.asdict(self)
    del values['name']
    return {
        **values,
        'first_pass': self.first_pass.as_dict(),
        'rescored': self.rescored.as_dict() if self.rescored else None,
        'oracle': self.oracle.as_dict(),
    }


@dataclasses.dataclass(frozen=True)
class GridPoint:
  """The dev-set edits at one `(weight, length_bonus)`."""

  weight: float
  length_bonus: float
  errors: wer.ErrorCounts


@dataclasses.dataclass(frozen=True)
class GridSearchResult:
  """Every grid point's dev edits, in grid order, and the chosen point."""

  dev_set: str
  points: Tuple[GridPoint, ...]
  best: GridPoint


def build_scored_set(
    name: str,
    nbest_lists: Sequence[nbest.NBestList],
    references: Sequence[str],
    scores: Optional[Mapping[Tuple[str, int], float]],
    scores_source: str = 'LM scores',
) -> ScoredSet:
  """Counts every hypothesis' word errors and gathers its scores."""
  if not nbest_lists:
    raise cli.UserError(f'Set {name!r} has no N-best lists.')
  if len(references) != len(nbest_lists):
    raise cli.UserError(
        f'Set {name!r}: {len(references)} references for '
        f'{len(nbest_lists)} N-best lists; expected one each.'
    )
  if scores is not None:
    lm_scores.check_complete(scores, nbest_lists, scores_source)
  shape = (len(nbest_lists), max(len(n.hypotheses) for n in nbest_lists))
  arrays = {key: np.zeros(shape) for key in ('first_pass', 'lm')}
  for key in ('num_words', *_EDITS):
    arrays[key] = np.zeros(shape, dtype=np.int64)
  valid = np.zeros(shape, dtype=bool)
  pair_references, pair_hypotheses, positions = [], [], []
  for row, (nbest_list, reference) in enumerate(zip(nbest_lists, references)):
    for column, hypothesis in enumerate(nbest_list.hypotheses):
      valid[row, column] = True
      arrays['first_pass'][row, column] = hypothesis.first_pass_score
      if scores is not None:
        key = (nbest_list.utterance_id, hypothesis.rank)
        arrays['lm'][row, column] = scores[key]
      arrays['num_words'][row, column] = hypothesis.num_words
      pair_references.append(reference)
      pair_hypotheses.append(hypothesis.text)
      positions.append((row, column))
  counts = wer.utterance_error_counts(pair_references, pair_hypotheses)
  for (row, column), count in zip(positions, counts):
    for key in _EDITS:
      arrays[key][row, column] = getattr(count, key)
  reference_words = np.array(
      [len(reference.split()) for reference in references], dtype=np.int64
  )
  return ScoredSet(
      name=name,
      utterance_ids=tuple(n.utterance_id for n in nbest_lists),
      valid=valid,
      reference_words=reference_words,
      **arrays,
  )


def final_scores(
    scored_set: ScoredSet, weight: float, length_bonus: float
) -> np.ndarray:
  """first_pass + weight * lm + length_bonus * num_words; -inf on padding."""
  scores = (
      scored_set.first_pass
      + weight * scored_set.lm
      + length_bonus * scored_set.num_words
  )
  return np.where(scored_set.valid, scores, -np.inf)


def select(
    scored_set: ScoredSet, weight: float, length_bonus: float
) -> np.ndarray:
  """The column of each row's best final score (lowest rank on a tie)."""
  return np.argmax(final_scores(scored_set, weight, length_bonus), axis=1)


def selection_errors(
    scored_set: ScoredSet, columns: np.ndarray
) -> wer.ErrorCounts:
  """The summed edits of the hypotheses at `columns` (one per row)."""
  rows = np.arange(len(columns))
  return wer.ErrorCounts(
      **{
          key: int(getattr(scored_set, key)[rows, columns].sum())
          for key in _EDITS
      },
      reference_words=int(scored_set.reference_words.sum()),
  )


def grid_search(
    dev_set: ScoredSet,
    weights: Sequence[float],
    length_bonuses: Sequence[float],
) -> GridSearchResult:
  """Every point's dev errors and the best (first of equals, weights outer)."""
  if not weights or not length_bonuses:
    raise cli.UserError(
        'The grid is empty; expected at least one weight and '
        'one length bonus.'
    )
  points = tuple(
      GridPoint(
          float(weight),
          float(length_bonus),
          selection_errors(dev_set, select(dev_set, weight, length_bonus)),
      )
      for weight, length_bonus in itertools.product(weights, length_bonuses)
  )
  best = min(points, key=lambda point: point.errors.errors)
  return GridSearchResult(dev_set.name, points, best)


def evaluate(
    scored_set: ScoredSet,
    weight: Optional[float] = None,
    length_bonus: float = 0.0,
) -> SetResult:
  """First-pass and oracle edits of one set; rescored ones given a `weight`."""
  rows = len(scored_set.utterance_ids)
  rescored = None
  if weight is not None:
    columns = select(scored_set, weight, length_bonus)
    rescored = selection_errors(scored_set, columns)
  # The fewest errors, lowest rank on a tie.
  errors = np.where(scored_set.valid, scored_set.errors, np.iinfo(np.int64).max)
  first_pass = np.where(scored_set.valid, scored_set.first_pass, -np.inf)
  return SetResult(
      name=scored_set.name,
      num_utterances=rows,
      num_hypotheses=scored_set.num_hypotheses,
      weight=None if rescored is None else float(weight),
      length_bonus=None if rescored is None else float(length_bonus),
      first_pass=selection_errors(scored_set, np.zeros(rows, np.int64)),
      rescored=rescored,
      oracle=selection_errors(scored_set, np.argmin(errors, axis=1)),
      num_rank1_not_best_first_pass=int(
          (scored_set.first_pass[:, 0] < first_pass.max(axis=1)).sum()
      ),
  )


def selected_texts(
    nbest_lists: Sequence[nbest.NBestList], columns: np.ndarray
) -> List[Tuple[str, str]]:
  """`(utterance_id, text)` of the hypothesis at each list's column."""
  return [
      (nbest_list.utterance_id, nbest_list.hypotheses[column].text)
      for nbest_list, column in zip(nbest_lists, columns)
  ]
