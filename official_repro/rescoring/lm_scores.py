r"""Second-pass language-model scores of N-best hypotheses, from any source.

Rescoring needs one log-score (higher is better) per hypothesis, keyed by
`(utterance_id, rank)`. Two sources give the same `LmScores` mapping:

  * a file precomputed by any tool, one hypothesis a line,
    `utt_id<TAB>rank<TAB>score` (`read_lm_scores`; `write_lm_scores` writes
    one);
  * a `Scorer` object called on batches of hypothesis texts
    (`score_nbest`). A masked-LM pseudo-log-likelihood scorer plugs in as

        scores = lm_scores.score_nbest(PllScorer(...), nbest_set.lists)

Malformed lines of a scores file are skipped and reported (file and line);
a `(utterance_id, rank)` given twice is an error, and so is a hypothesis
without a score (`check_complete`).
"""

import dataclasses
import math
import re
from typing import Dict, Iterable, List, Mapping, Protocol, Sequence, Tuple

from absl import logging
import numpy as np

from official_repro.common import cli
from official_repro.common import progress
from official_repro.common import json_files
from official_repro.data import nbest
from official_repro.data import text_files

LmScores = Dict[Tuple[str, int], float]

_MAX_LOGGED_PROBLEMS = 5
_MAX_NAMED_IDS = 5


class Scorer(Protocol):
  """Scores sentences with a language model (the pluggable second pass)."""

  def __call__(self, sentences: Sequence[str]) -> np.ndarray:
    """The log-score of each sentence.

    Args:
      sentences: a batch of texts, words separated by single spaces (already
        lower-cased where the reader was asked to).

    Returns:
      A float array of shape `[len(sentences)]`: the log-score (e.g. a
      pseudo-log-likelihood, natural log) of each sentence, higher is better.
    """


@dataclasses.dataclass(frozen=True)
class ScoresReport:
  """What `read_lm_scores` read and skipped.

  Attributes:
    path: the file read.
    num_scores: scores returned.
    malformed: `(location, description)` of each skipped line.
  """

  path: str
  num_scores: int
  malformed: Tuple[Tuple[str, str], ...]

  def as_dict(self) -> dict:
    """The report as JSON-serialisable values."""
    return {
        'path': self.path,
        'num_scores': self.num_scores,
        'num_malformed': len(self.malformed),
        'malformed': [
            {'location': location, 'description': description}
            for location, description in self.malformed
        ],
    }


def score_nbest(
    scorer: Scorer,
    nbest_lists: Iterable[nbest.NBestList],
    batch_size: int = 64,
    progress_label: str = '',
) -> LmScores:
  """Scores every hypothesis with `scorer`, `batch_size` texts per call.

  A text that occurs in several hypotheses is scored once.

  Args:
    scorer: the language model.
    nbest_lists: the N-best lists.
    batch_size: the most texts passed to one `scorer` call.
    progress_label: logs the texts scored under this label
      (`progress.Progress`); '' for no log.

  Returns:
    The score of each `(utterance_id, rank)`.

  Raises:
    ValueError: `batch_size` < 1, or `scorer` returned a wrong shape or a
      score that is not finite.
  """
  if batch_size < 1:
    raise cli.UserError(f'batch_size must be >= 1, got {batch_size}.')
  keys_by_text: Dict[str, List[Tuple[str, int]]] = {}
  for nbest_list in nbest_lists:
    for hypothesis in nbest_list.hypotheses:
      keys_by_text.setdefault(hypothesis.text, []).append(
          (nbest_list.utterance_id, hypothesis.rank)
      )
  texts = list(keys_by_text)
  reporter = progress.Progress(len(texts), progress_label, 'texts')
  scores = {}
  for start in range(0, len(texts), batch_size):
    batch = texts[start : start + batch_size]
    batch_scores = np.asarray(scorer(batch), dtype=np.float64)
    if batch_scores.shape != (len(batch),):
      raise cli.UserError(
          f'The scorer returned shape {batch_scores.shape} for '
          f'{len(batch)} sentences; expected ({len(batch)},).'
      )
    for text, score in zip(batch, batch_scores):
      if not math.isfinite(score):
        raise cli.UserError(
            f'The scorer returned {score} for {text!r}; '
            'expected a finite log-score.'
        )
      for key in keys_by_text[text]:
        scores[key] = float(score)
    reporter.advance(len(batch))
  return scores


def read_lm_scores(path: str) -> Tuple[LmScores, ScoresReport]:
  """Reads `utt_id<TAB>rank<TAB>score` lines (blank lines are skipped).

  Args:
    path: the file (anything `tf.io.gfile` opens).

  Returns:
    The scores by `(utterance_id, rank)` and a report.

  Raises:
    FileNotFoundError: `path` does not exist.
    ValueError: a line that is not UTF-8, a `(utt_id, rank)` given twice, or
      no score at all.
  """
  scores = {}
  first_line = {}
  malformed = []
  for line_number, line in enumerate(
      text_files.read_lines(path, 'LM scores file'), start=1
  ):
    if not line.strip():
      continue
    location = f'{path} line {line_number}'
    fields = line.split('\t')
    if len(fields) != 3:
      malformed.append(
          (
              location,
              f'{len(fields)} tab-separated fields; '
              'expected 3: utt_id, rank, score',
          )
      )
      continue
    utterance_id, rank, score = (field.strip() for field in fields)
    rank = int(rank) if re.fullmatch(r'[0-9]+', rank) else 0
    try:
      score = float(score)
    except ValueError:
      score = math.nan
    if not utterance_id or rank < 1 or not math.isfinite(score):
      malformed.append(
          (
              location,
              'expected a non-empty utt_id, an integer '
              'rank >= 1 and a finite score',
          )
      )
      continue
    key = (utterance_id, rank)
    if key in first_line:
      raise cli.UserError(
          f'{location}: rank {rank} of utterance {utterance_id!r} was already '
          f'scored at line {first_line[key]}; expected one score per '
          'hypothesis.'
      )
    first_line[key] = line_number
    scores[key] = score
  report = ScoresReport(path, len(scores), tuple(malformed))
  if not scores:
    detail = (
        f'; all {len(malformed)} lines are malformed, the first at '
        f'{malformed[0][0]}: {malformed[0][1]}'
        if malformed
        else ''
    )
    raise cli.UserError(f'{path}: no LM score could be read{detail}.')
  logging.info(
      '%s: %d LM scores, %d malformed lines.', path, len(scores), len(malformed)
  )
  for location, description in malformed[:_MAX_LOGGED_PROBLEMS]:
    logging.warning('%s: %s', location, description)
  return scores, report


def write_lm_scores(path: str, scores: Mapping[Tuple[str, int], float]):
  """Writes `utt_id<TAB>rank<TAB>score` lines (what `read_lm_scores` reads).

  Args:
    path: the destination (anything `tf.io.gfile` opens); written to
      a unique temporary name and renamed, so it is never left half-written.
    scores: the scores by `(utterance_id, rank)`, written in this order.
  """
  json_files.write_text(
      path,
      ''.join(
          f'{utterance_id}\t{rank}\t{score!r}\n'
          for (utterance_id, rank), score in scores.items()
      ),
  )


def check_complete(
    scores: Mapping[Tuple[str, int], float],
    nbest_lists: Sequence[nbest.NBestList],
    source: str,
):
  """Raises if a hypothesis of `nbest_lists` has no score.

  Args:
    scores: scores by `(utterance_id, rank)`.
    nbest_lists: the hypotheses that need scores.
    source: where the scores came from, for the message.

  Raises:
    ValueError: naming how many hypotheses lack a score and a few of them.
  """
  missing = [
      (nbest_list.utterance_id, hypothesis.rank)
      for nbest_list in nbest_lists
      for hypothesis in nbest_list.hypotheses
      if (nbest_list.utterance_id, hypothesis.rank) not in scores
  ]
  if missing:
    total = sum(len(n.hypotheses) for n in nbest_lists)
    raise cli.UserError(
        f'{source}: {len(missing)} of {total} hypotheses have no LM score, '
        f'e.g. (utt_id, rank) {missing[:_MAX_NAMED_IDS]}; expected a score '
        'for every hypothesis of the N-best lists.'
    )
