"""Held-out text with the words of each segment shuffled: a context control.

A masked LM predicting from context loses accuracy on shuffled words; one
that learned only frequencies does not. `shuffle_segments` permutes real
non-special tokens within segments, leaving specials, padding and lengths in
place, so seeded dynamic masking picks the same positions and replacements.
"""

from typing import Dict, Sequence

import numpy as np


def shuffle_segments(
    features: Dict[str, np.ndarray], special_ids: Sequence[int], seed: int = 0
) -> Dict[str, np.ndarray]:
  """`features` (int `[N, T]`) with each segment's words seeded-shuffled."""
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
