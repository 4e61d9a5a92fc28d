"""The frequent-token baseline of masked-LM accuracy.

A model that has not learned to use context predicts the tokens that are
frequent. Its floor is the accuracy of always predicting the training
split's most frequent token; dynamic masking draws the masked positions
uniformly among the non-special tokens, so the expected accuracy on a split
is that token's share of the split's non-special tokens, computed here
exactly rather than sampled.
"""

from typing import Dict

import numpy as np

from official_repro.data import records


def _word_counts(
    directory: str, split: str, vocab_size: int, special_ids
) -> np.ndarray:
  """Occurrences of each token id among the split's real, non-special tokens."""
  examples = records.read_split(directory, split)
  ids = examples['input_ids']
  words = ids[(examples['input_mask'] == 1) & ~np.isin(ids, special_ids)]
  return np.bincount(words, minlength=vocab_size)


def frequent_token_baseline(directory: str) -> Dict[str, float]:
  """The accuracy of always predicting the most frequent training token.

  The accuracy of always predicting the training split's most frequent
  token on the eval split.

  Args:
    directory: a record directory with both splits.

  Returns:
    {token_id, train_share (its share of the training tokens), accuracy
    (its share of the eval tokens that masking chooses from)}.
  """
  metadata = records.load_metadata(directory)
  special = sorted(set(metadata['special_token_ids'].values()))
  train = _word_counts(directory, 'train', metadata['vocab_size'], special)
  held = _word_counts(directory, 'eval', metadata['vocab_size'], special)
  token = int(np.argmax(train))
  return dict(
      token_id=token,
      train_share=float(train[token] / train.sum()),
      accuracy=float(held[token] / held.sum()),
  )
