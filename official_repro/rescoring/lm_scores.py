"""Second-pass LM scores of N-best hypotheses, keyed by `(utterance_id, rank)`.

Two sources give the same `LmScores`: a precomputed `utt_id<TAB>rank<TAB>score`
file (`read_lm_scores`; malformed lines are skipped and reported, a key given
twice is an error) or a `Scorer` called on batches of texts (`score_nbest`).
"""

import dataclasses
import math
import re
from typing import Dict, Iterable, List, Mapping, Protocol, Sequence, Tuple

from absl import logging
import numpy as np

from official_repro.common import cli
from official_repro.common import progress
from official_repro.data import nbest
from official_repro.data import text_files

LmScores = Dict[Tuple[str, int], float]

_MAX_LOGGED_PROBLEMS = 5
_MAX_NAMED_IDS = 5


class Scorer(Protocol):
  """Scores sentences with a language model (the pluggable second pass)."""

  def __call__(self, sentences: Sequence[str]) -> np.ndarray:
    """Float `[len(sentences)]` log-scores (higher is better) of texts."""


@dataclasses.dataclass(frozen=True)
class ScoresReport:
  """What `read_lm_scores` read; `malformed` is `(location, description)`s."""

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
  """Scores each distinct hypothesis text once, `batch_size` per call."""
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
  """`(scores by (utterance_id, rank), report)` of a scores file."""
  scores = {}
  first_line = {}
  malformed = []
  lines = text_files.read_lines(path, 'LM scores file')
  for line_number, line in enumerate(lines, start=1):
    if not line.strip():
      continue
    location = f'{path} line {line_number}'
    parsed = _parse_line(line)
    if isinstance(parsed, str):
      malformed.append((location, parsed))
      continue
    key, score = parsed
    utterance_id, rank = key
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


def _parse_line(line: str):
  """`((utterance_id, rank), score)` of a line, or what is wrong with it."""
  fields = line.split('\t')
  if len(fields) != 3:
    return (
        f'{len(fields)} tab-separated fields; expected 3: utt_id, rank, score'
    )
  utterance_id, rank, score = (field.strip() for field in fields)
  rank = int(rank) if re.fullmatch(r'[0-9]+', rank) else 0
  try:
    score = float(score)
  except ValueError:
    score = math.nan
  if not utterance_id or rank < 1 or not math.isfinite(score):
    return (
        'expected a non-empty utt_id, an integer rank >= 1 and a finite score'
    )
  return (utterance_id, rank), score


def check_complete(
    scores: Mapping[Tuple[str, int], float],
    nbest_lists: Sequence[nbest.NBestList],
    source: str,
):
  """Raises UserError if a hypothesis has no score (`source` in the message)."""
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
