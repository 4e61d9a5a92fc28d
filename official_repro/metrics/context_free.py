"""The best masked-LM accuracy without context, and a model's beside it.

A context-free model maps the shown token ([MASK], kept or random) to a
prediction. `ContextFreePredictor` is the best such map in expectation,
from training-split frequencies p: behind [MASK] the most frequent token;
behind s a copy when `keep p(s) + random p(s)/R >= random max_{o!=s} p(o)/R`
(R ids to draw replacements from), else the most frequent. It is fixed by
the training split and scored on held-out slots, so it is not fitted to them.
"""

import dataclasses
from typing import Callable, Dict, Iterable, Mapping, Sequence, Tuple

import numpy as np

from official_repro.data import records


def token_counts(
    record_dir: str, split: str = 'train'
) -> Tuple[np.ndarray, Sequence[int]]:
  """`(int [vocab_size] counts, sorted special ids)` of a split's tokens."""
  metadata = records.load_metadata(record_dir)
  special = sorted(set(metadata['special_token_ids'].values()))
  examples = records.read_split(record_dir, split)
  ids = examples['input_ids']
  words = ids[(examples['input_mask'] == 1) & ~np.isin(ids, special)]
  return np.bincount(words, minlength=metadata['vocab_size']), special


@dataclasses.dataclass(frozen=True)
class ContextFreePredictor:
  """The best prediction from the shown token alone, in expectation."""

  counts: np.ndarray
  mask_token_id: int
  mask_token_fraction: float
  random_token_fraction: float
  num_replacements: int

  @classmethod
  def from_records(
      cls,
      record_dir: str,
      mask_token_fraction: float,
      random_token_fraction: float,
  ) -> 'ContextFreePredictor':
    """The predictor for records masked with the given fractions."""
    counts, special = token_counts(record_dir, 'train')
    metadata = records.load_metadata(record_dir)
    return cls(
        counts=counts,
        mask_token_id=metadata['special_token_ids']['mask'],
        mask_token_fraction=mask_token_fraction,
        random_token_fraction=random_token_fraction,
        num_replacements=len(counts) - len(special),
    )

  def table(self) -> np.ndarray:
    """The prediction for each shown token id, int `[vocab_size]`."""
    share = self.counts / max(1, self.counts.sum())
    ranked = np.argsort(-share, kind='stable')
    top, second = int(ranked[0]), int(ranked[min(1, len(ranked) - 1)])
    best_other = np.where(
        np.arange(len(share)) == top, share[second], share[top]
    )
    keep = 1.0 - self.mask_token_fraction - self.random_token_fraction
    random = self.random_token_fraction / self.num_replacements
    copy = (keep + random) * share >= random * best_other
    table = np.where(copy, np.arange(len(share)), top)
    table[self.mask_token_id] = top
    return table

  def predict(self, shown: np.ndarray) -> np.ndarray:
    """The predictions for shown ids (any shape)."""
    return self.table()[shown]


def slots(batch: Mapping[str, np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
  """`(shown, original)` ids of a batch's real masked slots, flat."""
  real = np.asarray(batch['masked_lm_weights']) > 0
  shown = np.take_along_axis(
      np.asarray(batch['input_word_ids']),
      np.asarray(batch['masked_lm_positions']),
      axis=1,
  )
  return shown[real], np.asarray(batch['masked_lm_ids'])[real]


def masked_lm_report(
    predict: Callable[[Mapping[str, np.ndarray]], np.ndarray],
    batches: Iterable[Mapping[str, np.ndarray]],
    context_free: ContextFreePredictor,
) -> Dict[str, float]:
  """A model's masked-LM accuracy beside the context-free ceiling."""
  parts = []
  for batch in batches:
    real = np.asarray(batch['masked_lm_weights']) > 0
    parts.append((*slots(batch), np.asarray(predict(batch))[real]))
  shown, original, predicted = (np.concatenate(part) for part in zip(*parts))
  correct = predicted == original
  guessed = context_free.predict(shown) == original
  masked = shown == context_free.mask_token_id
  return dict(
      accuracy=float(correct.mean()),
      context_free=float(guessed.mean()),
      mask_token_accuracy=float(correct[masked].mean()),
      mask_token_context_free=float(guessed[masked].mean()),
      slots=int(len(shown)),
      mask_token_slots=int(masked.sum()),
  )
