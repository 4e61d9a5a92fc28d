"""Held-out text with the words of each segment shuffled: a context control.

A masked LM that predicts from context loses accuracy when the words around
a masked slot are shuffled; one that has learned only which tokens are
frequent (or which occur together, whatever their order) scores the same.
`shuffle_segments` permutes the real, non-special tokens within each
segment of each example and leaves [CLS], [SEP], padding and segment
lengths in place, so dynamic masking with the same seed chooses the same
positions and the same replacements.
"""

from typing import Dict, Sequence

import numpy as np


def shuffle_segments(
    features: Dict[str, np.ndarray], special_ids: Sequence[int], seed: int = 0
) -> Dict[str, np.ndarray]:
  """`features` with each segment's words in a random order.

  Args:
    features: `input_ids`, `input_mask`, `segment_ids` int `[N, T]`.
    special_ids: ids that stay in place.
    seed: seeds the permutations.

  Returns:
    A copy of `features` with `input_ids` shuffled.
  """
  special = np.asarray(sorted(set(int(i) for i in special_ids)))
  rng = np.random.default_rng(seed)
  shuffled = features['input_ids'].copy()
  for row, (ids, mask, segments) in enumerate(
      zip(
          features['input_ids'], features['input_mask'], features['segment_ids']
      )
  ):
    words = (mask == 1) & ~np.isin(ids, special)
    for segment in np.unique(segments[words]):
      places = np.flatnonzero(words & (segments == segment))
      shuffled[row, places] = ids[rng.permutation(places)]
  return dict(features, input_ids=shuffled)
