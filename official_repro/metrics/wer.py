"""Word error rate, computed by the `jiwer` library.

Corpus WER is total word edits over total reference words (not a mean of
per-utterance rates); words split at whitespace, other normalisation is the
caller's. An empty reference counts every hypothesis word as an insertion.
"""

import dataclasses
from typing import List, Sequence

import jiwer


@dataclasses.dataclass(frozen=True)
class ErrorCounts:
  """Word edits of a hypothesis (or a set of them) against its reference."""

  substitutions: int = 0
  deletions: int = 0
  insertions: int = 0
  reference_words: int = 0

  @property
  def errors(self) -> int:
    """Total edits: substitutions + deletions + insertions."""
    return self.substitutions + self.deletions + self.insertions

  @property
  def wer(self) -> float:
    """The word error rate, errors / reference_words (needs some words)."""
    if self.reference_words == 0:
      raise ValueError('WER is undefined: the references have no words.')
    return self.errors / self.reference_words

  def __add__(self, other: 'ErrorCounts') -> 'ErrorCounts':
    return ErrorCounts(
        *(
            getattr(self, f.name) + getattr(other, f.name)
            for f in dataclasses.fields(self)
        )
    )

  def as_dict(self) -> dict:
    """The counts, the total and the WER (None without reference words)."""
    return {
        'substitutions': self.substitutions,
        'deletions': self.deletions,
        'insertions': self.insertions,
        'errors': self.errors,
        'reference_words': self.reference_words,
        'wer': self.wer if self.reference_words else None,
    }


def utterance_error_counts(
    references: Sequence[str], hypotheses: Sequence[str]
) -> List[ErrorCounts]:
  """The edits of each hypothesis against its reference (one jiwer call)."""
  if len(references) != len(hypotheses):
    raise ValueError(
        f'{len(references)} references but {len(hypotheses)} '
        'hypotheses; expected one hypothesis per reference.'
    )
  if not references:
    return []
  references = [_normalize_spaces(text) for text in references]
  hypotheses = [_normalize_spaces(text) for text in hypotheses]
  output = jiwer.process_words(references, hypotheses)
  counts = []
  for reference_words, alignment in zip(output.references, output.alignments):
    edits = {'substitute': 0, 'delete': 0, 'insert': 0}
    for chunk in alignment:
      if chunk.type == 'insert':
        edits['insert'] += chunk.hyp_end_idx - chunk.hyp_start_idx
      elif chunk.type in edits:
        edits[chunk.type] += chunk.ref_end_idx - chunk.ref_start_idx
    counts.append(
        ErrorCounts(
            substitutions=edits['substitute'],
            deletions=edits['delete'],
            insertions=edits['insert'],
            reference_words=len(reference_words),
        )
    )
  return counts


def corpus_error_counts(
    references: Sequence[str], hypotheses: Sequence[str]
) -> ErrorCounts:
  """Total edits and reference words of a set (its `.wer` is corpus WER)."""
  return sum(utterance_error_counts(references, hypotheses), ErrorCounts())


def _normalize_spaces(text: str) -> str:
  """Words joined by single spaces: any whitespace separates words."""
  return ' '.join(text.split())
