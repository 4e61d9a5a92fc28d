"""The context-free ceiling against brute force and the 80/10/10 estimate."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from official_repro.data import masking
from official_repro.metrics import context_free


def _brute_force(shown, original, vocab_size):
  """The best accuracy over every map from shown token to prediction."""
  tokens = sorted(set(shown.tolist()))
  best = 0
  for guesses in itertools.product(range(vocab_size), repeat=len(tokens)):
    mapping = dict(zip(tokens, guesses))
    best = max(
        best, sum(mapping[s] == o for s, o in zip(shown.tolist(), original))
    )
  return best / len(shown)


@pytest.mark.parametrize('seed', range(5))
def test_best_accuracy_is_the_best_of_every_context_free_map(seed):
  rng = np.random.default_rng(seed)
  shown = rng.integers(0, 4, size=15)
  original = np.where(rng.random(15) < 0.4, shown, rng.integers(0, 4, size=15))
  assert context_free.best_accuracy(shown, original) == pytest.approx(
      _brute_force(shown, original, 4)
  )


def _masked_batch(share, seed=0):
  """Sequences where token 10 has `share` of the words, masked 80/10/10."""
  rng = np.random.default_rng(seed)
  size, length, vocab_size = 2000, 64, 60
  words = np.where(
      rng.random((size, length)) < share,
      10,
      rng.integers(11, vocab_size, size=(size, length)),
  )
  words[:, 0], words[:, -1] = 2, 3  # [CLS], [SEP]
  config = masking.MaskingConfig(
      mask_rate=0.15,
      mask_token_fraction=0.8,
      random_token_fraction=0.1,
      max_predictions_per_seq=10,
  )
  batch = masking.mask_batch(
      tf.constant(words),
      tf.ones_like(words),
      config=config,
      mask_token_id=4,
      special_token_ids=[0, 1, 2, 3, 4],
      vocab_size=vocab_size,
      seed=tf.constant([seed, 1]),
  )
  return {name: value.numpy() for name, value in batch.items()}


@pytest.mark.parametrize('share', [0.05, 0.3])
def test_under_80_10_10_the_ceiling_copies_kept_tokens_and_guesses(share):
  batch = _masked_batch(share)
  shown, original = context_free.slots(batch)
  # Kept tenth copied, [MASK] slots answered with the frequent token; a
  # random replacement hides its original. (Few distinct tokens, so that the
  # ceiling, fitted on these very slots, cannot memorise rare ones.)
  assert context_free.best_accuracy(shown, original) == pytest.approx(
      0.1 + 0.8 * share, abs=0.02
  )


def test_report_scores_predictions_on_every_slot_and_on_mask_slots():
  batch = _masked_batch(0.3)
  shown, original = context_free.slots(batch)
  copy = context_free.masked_lm_report(
      lambda b: np.take_along_axis(
          b['input_word_ids'], b['masked_lm_positions'], axis=1
      ),
      [batch],
      mask_token_id=4,
  )
  masked = shown == 4
  assert copy['slots'] == len(shown) == int(batch['masked_lm_weights'].sum())
  assert copy['mask_token_slots'] == int(masked.sum())
  assert copy['accuracy'] == pytest.approx(np.mean(shown == original))
  assert copy['mask_token_accuracy'] == 0.0
  assert copy['mask_token_context_free'] == pytest.approx(
      np.mean(original[masked] == 10)
  )
  oracle = context_free.masked_lm_report(
      lambda b: b['masked_lm_ids'], [batch], mask_token_id=4
  )
  assert oracle['accuracy'] == oracle['mask_token_accuracy'] == 1.0
  assert oracle['context_free'] == copy['context_free']
