"""N-best rescoring by log-linear interpolation, tuned by grid search.

The final score of hypothesis h is

  first_pass(h) + weight * lm_score(h) + length_bonus * num_words(h)

and each utterance's output is its hypothesis with the highest final score
(on a tie, the lowest rank). `weight` and `length_bonus` are chosen on a dev
set by grid search (the fewest word errors; on a tie, the first point in
grid order: weights outer, length bonuses inner) and applied unchanged to
the other sets. Each set reports three WERs from the same hypotheses:

  * first pass: the rank-1 (lowest-rank) hypothesis, the first pass's output;
  * rescored: the hypothesis the interpolated score selects;
  * oracle: the hypothesis with the fewest word errors (a lower bound for
    any rescoring of these lists).

The first-pass and oracle WERs need no LM scores (`evaluate_without_lm`).

Word errors are counted once per hypothesis (`metrics.wer`, i.e. jiwer);
selecting hypotheses then only sums counts, so a grid point costs one
vectorised argmax.
"""

import dataclasses
import itertools
from typing import List, Mapping, Optional, Sequence, Tuple

import numpy as np

from official_repro.common import cli
from official_repro.data import nbest
from official_repro.metrics import wer
from official_repro.rescoring import lm_scores


@dataclasses.dataclass(frozen=True)
class ScoredSet:
  """One set's hypotheses as `[utterances, max hypotheses]` arrays.

  Row u holds utterance u's hypotheses by rank, padded to the longest list;
  `valid` marks the real entries (padding never wins a selection).

  Attributes:
    name: the set's name.
    utterance_ids: the id of each row.
    valid: bool, a hypothesis (not padding).
    first_pass: first-pass scores.
    lm: second-pass LM scores (zeros for a set built without them).
    num_words: words per hypothesis.
    substitutions: per-hypothesis word substitutions against the reference.
    deletions: per-hypothesis deletions.
    insertions: per-hypothesis insertions.
    reference_words: `[utterances]`, words of each reference.
  """

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
  """The WERs of one set at one `(weight, length_bonus)`.

  Attributes:
    name: the set's name.
    num_utterances: N-best lists.
    num_hypotheses: hypotheses in them.
    weight: the LM weight applied (None without LM scores).
    length_bonus: the per-word bonus applied (None without LM scores).
    first_pass: edits of the rank-1 hypotheses.
    rescored: edits of the rescored selection (None without LM scores).
    oracle: edits of the best hypothesis of each list.
    num_rank1_not_best_first_pass: lists whose rank-1 hypothesis does not
      have the highest first-pass score (more than a few suggest the scores
      are costs, lower-is-better, rather than log-probabilities).
  """

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
    return {
        'num_utterances': self.num_utterances,
        'num_hypotheses': self.num_hypotheses,
        'weight': self.weight,
        'length_bonus': self.length_bonus,
        'first_pass': self.first_pass.as_dict(),
        'rescored': self.rescored.as_dict() if self.rescored else None,
        'oracle': self.oracle.as_dict(),
        'num_rank1_not_best_first_pass': self.num_rank1_not_best_first_pass,
    }


@dataclasses.dataclass(frozen=True)
class GridPoint:
  """The dev-set edits at one `(weight, length_bonus)`."""

  weight: float
  length_bonus: float
  errors: wer.ErrorCounts


@dataclasses.dataclass(frozen=True)
class GridSearchResult:
  """Every grid point's dev edits and the chosen point.

  Attributes:
    dev_set: the name of the set searched on.
    points: one `GridPoint` per `(weight, length_bonus)`, in grid order.
    best: the point with the fewest errors (the first of equals).
  """

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
  """Counts every hypothesis' word errors and gathers its scores.

  Args:
    name: the set's name.
    nbest_lists: its N-best lists (each with at least one hypothesis).
    references: the reference of each list (`nbest.match_references`).
    scores: LM scores by `(utterance_id, rank)`; None for a set without
      them, whose `lm` is zero (for `evaluate_without_lm`).
    scores_source: where `scores` came from, for error messages.

  Returns:
    The set as arrays.

  Raises:
    ValueError: no lists, `references` of another length, or a hypothesis
      without an LM score.
  """
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
  arrays.update(
      {
          key: np.zeros(shape, dtype=np.int64)
          for key in ('num_words', 'substitutions', 'deletions', 'insertions')
      }
  )
  valid = np.zeros(shape, dtype=bool)
  pair_references, pair_hypotheses, positions = [], [], []
  for row, (nbest_list, reference) in enumerate(zip(nbest_lists, references)):
    for column, hypothesis in enumerate(nbest_list.hypotheses):
      valid[row, column] = True
      arrays['first_pass'][row, column] = hypothesis.first_pass_score
      if scores is not None:
        arrays['lm'][row, column] = scores[
            (nbest_list.utterance_id, hypothesis.rank)
        ]
      arrays['num_words'][row, column] = hypothesis.num_words
      pair_references.append(reference)
      pair_hypotheses.append(hypothesis.text)
      positions.append((row, column))
  counts = wer.utterance_error_counts(pair_references, pair_hypotheses)
  for (row, column), count in zip(positions, counts):
    arrays['substitutions'][row, column] = count.substitutions
    arrays['deletions'][row, column] = count.deletions
    arrays['insertions'][row, column] = count.insertions
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


def oracle_columns(scored_set: ScoredSet) -> np.ndarray:
  """The column of each row's fewest errors (lowest rank on a tie)."""
  errors = np.where(scored_set.valid, scored_set.errors, np.iinfo(np.int64).max)
  return np.argmin(errors, axis=1)


def selection_errors(
    scored_set: ScoredSet, columns: np.ndarray
) -> wer.ErrorCounts:
  """The summed edits of the hypotheses at `columns` (one per row)."""
  rows = np.arange(len(columns))
  return wer.ErrorCounts(
      substitutions=int(scored_set.substitutions[rows, columns].sum()),
      deletions=int(scored_set.deletions[rows, columns].sum()),
      insertions=int(scored_set.insertions[rows, columns].sum()),
      reference_words=int(scored_set.reference_words.sum()),
  )


def grid_search(
    dev_set: ScoredSet,
    weights: Sequence[float],
    length_bonuses: Sequence[float],
) -> GridSearchResult:
  """Finds the `(weight, length_bonus)` with the fewest dev word errors.

  Args:
    dev_set: the set to tune on.
    weights: LM weights to try.
    length_bonuses: per-word bonuses to try.

  Returns:
    Every point's errors and the best point (the first of equals, in the
    order weights outer, length bonuses inner).

  Raises:
    ValueError: an empty grid.
  """
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
    scored_set: ScoredSet, weight: float, length_bonus: float
) -> SetResult:
  """First-pass, rescored and oracle edits of one set.

  Args:
    scored_set: the set.
    weight: the LM weight.
    length_bonus: the per-word bonus.

  Returns:
    The set's result.
  """
  return dataclasses.replace(
      evaluate_without_lm(scored_set),
      weight=float(weight),
      length_bonus=float(length_bonus),
      rescored=selection_errors(
          scored_set, select(scored_set, weight, length_bonus)
      ),
  )


def evaluate_without_lm(scored_set: ScoredSet) -> SetResult:
  """First-pass and oracle edits of one set (no rescoring, no LM scores).

  Args:
    scored_set: the set.

  Returns:
    The set's result, with `weight`, `length_bonus` and `rescored` None.
  """
  first_pass_best = np.argmax(
      np.where(scored_set.valid, scored_set.first_pass, -np.inf), axis=1
  )
  return SetResult(
      name=scored_set.name,
      num_utterances=len(scored_set.utterance_ids),
      num_hypotheses=scored_set.num_hypotheses,
      weight=None,
      length_bonus=None,
      first_pass=selection_errors(
          scored_set, np.zeros(len(scored_set.utterance_ids), dtype=np.int64)
      ),
      rescored=None,
      oracle=selection_errors(scored_set, oracle_columns(scored_set)),
      num_rank1_not_best_first_pass=int(
          (
              scored_set.first_pass[:, 0]
              < scored_set.first_pass[
                  np.arange(len(first_pass_best)), first_pass_best
              ]
          ).sum()
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
