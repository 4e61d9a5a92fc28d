"""What a masked LM scores without context, and what it scores with it.

A masked slot shows the model a token: [MASK], the original (kept) or a
random one. A model that ignores context can only map the token shown to a
prediction. `best_accuracy` is the best any such mapping scores on the given
slots, computed exactly: for each token shown, the original that most
often stands behind it (behind [MASK] the most frequent token, behind a
kept token itself, unless random replacements say otherwise). Under 80/10/10
masking it is about 0.1 + 0.8 x the most frequent token's share: the kept
tenth copied, the [MASK] slots guessed, the random tenth lost. Accuracy above
it needs context. The mapping is fitted on the scored slots themselves, so
the ceiling is generous: where a shown token is rare it also memorises what
stood behind it.

`masked_lm_report` scores a model on fixed masked batches against that
ceiling, overall and on the slots shown as [MASK] alone (where copying is
impossible).
"""

import collections
from typing import Callable, Dict, Iterable, Mapping, Tuple

import numpy as np


def slots(batch: Mapping[str, np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
  """`(shown, original)` ids of the real masked slots of a batch, flat.

  Args:
    batch: `input_word_ids` `[B, T]` (the masked ids), `masked_lm_positions`,
      `masked_lm_ids`, `masked_lm_weights` `[B, P]`.
  """
  real = np.asarray(batch['masked_lm_weights']) > 0
  shown = np.take_along_axis(
      np.asarray(batch['input_word_ids']),
      np.asarray(batch['masked_lm_positions']),
      axis=1,
  )
  return shown[real], np.asarray(batch['masked_lm_ids'])[real]


def best_accuracy(shown: np.ndarray, original: np.ndarray) -> float:
  """The best accuracy of any prediction that depends on the shown token only.

  Args:
    shown: int `[N]`, the token each slot shows.
    original: int `[N]`, the token to predict there.

  Returns:
    `sum over shown tokens s of max over o of #(s, o)`, over N.
  """
  counts = collections.Counter(zip(shown.tolist(), original.tolist()))
  best = collections.defaultdict(int)
  for (token, _), count in counts.items():
    best[token] = max(best[token], count)
  return sum(best.values()) / max(1, len(shown))


def masked_lm_report(
    predict: Callable[[Mapping[str, np.ndarray]], np.ndarray],
    batches: Iterable[Mapping[str, np.ndarray]],
    mask_token_id: int,
) -> Dict[str, float]:
  """A model's masked-LM accuracy beside the context-free ceiling.

  Args:
    predict: batch -> int `[B, P]` predicted ids at its masked positions.
    batches: masked batches (`slots`' keys).
    mask_token_id: the id of [MASK].

  Returns:
    `accuracy` and `context_free` over every real masked slot,
    `mask_token_accuracy` and `mask_token_context_free` over the slots shown
    as [MASK], and their counts `slots`, `mask_token_slots`.
  """
  shown_all, original_all, predicted_all = [], [], []
  for batch in batches:
    shown, original = slots(batch)
    real = np.asarray(batch['masked_lm_weights']) > 0
    predicted_all.append(np.asarray(predict(batch))[real])
    shown_all.append(shown)
    original_all.append(original)
  shown = np.concatenate(shown_all)
  original = np.concatenate(original_all)
  correct = np.concatenate(predicted_all) == original
  masked = shown == mask_token_id
  return dict(
      accuracy=float(correct.mean()),
      context_free=best_accuracy(shown, original),
      mask_token_accuracy=float(correct[masked].mean()),
      mask_token_context_free=best_accuracy(shown[masked], original[masked]),
      slots=int(len(shown)),
      mask_token_slots=int(masked.sum()),
  )
