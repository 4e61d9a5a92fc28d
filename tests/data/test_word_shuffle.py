"""Shuffled segments keep their words, markers and masked positions."""

import collections

import numpy as np
import tensorflow as tf

from official_repro.data import masking
from official_repro.data import word_shuffle


def _features():
  rng = np.random.default_rng(0)
  ids = rng.integers(10, 200, size=(6, 20))
  mask = np.ones_like(ids)
  segments = np.zeros_like(ids)
  ids[:, 0], ids[:, 9], ids[:, 15] = 2, 3, 3  # [CLS] a [SEP] b [SEP]
  segments[:, 10:16] = 1
  ids[:, 16:], mask[:, 16:], segments[:, 16:] = 0, 0, 0
  return dict(input_ids=ids, input_mask=mask, segment_ids=segments)


def test_each_segment_keeps_its_words_and_markers_stay():
  features = _features()
  shuffled = word_shuffle.shuffle_segments(features, [0, 2, 3], seed=1)
  before, after = features['input_ids'], shuffled['input_ids']
  np.testing.assert_array_equal(after[:, [0, 9, 15]], before[:, [0, 9, 15]])
  np.testing.assert_array_equal(after[:, 16:], before[:, 16:])
  for row in range(len(before)):
    for span in (slice(1, 9), slice(10, 15)):
      assert collections.Counter(after[row, span]) == collections.Counter(
          before[row, span]
      )
  assert np.mean(after != before) > 0.5
  np.testing.assert_array_equal(
      word_shuffle.shuffle_segments(features, [0, 2, 3], seed=1)['input_ids'],
      after,
  )


def test_dynamic_masking_with_one_seed_masks_the_same_places():
  features = _features()
  shuffled = word_shuffle.shuffle_segments(features, [0, 2, 3], seed=1)

  def mask(ids):
    return masking.mask_batch(
        tf.constant(ids),
        tf.constant(features['input_mask']),
        config=masking.MaskingConfig(max_predictions_per_seq=4),
        mask_token_id=4,
        special_token_ids=[0, 1, 2, 3, 4],
        vocab_size=200,
        seed=tf.constant([7, 7]),
    )

  plain, moved = mask(features['input_ids']), mask(shuffled['input_ids'])
  for name in ('masked_lm_positions', 'masked_lm_weights'):
    np.testing.assert_array_equal(plain[name], moved[name])
  assert np.any(plain['masked_lm_ids'] != moved['masked_lm_ids'])
