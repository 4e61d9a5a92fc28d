"""Tests of the shared static/dynamic masking function."""

import numpy as np
import pytest
import tensorflow as tf

from official_repro.data import masking

PAD, UNK, CLS, SEP, MASK = 0, 1, 2, 3, 4
SPECIAL = (PAD, UNK, CLS, SEP, MASK)
VOCAB_SIZE = 50


def _batch(batch_size=64, seq_length=40, real_lengths=None, seed=0):
  """[CLS] a.. [SEP] b.. [SEP] [PAD].. with ids from the non-special set."""
  rng = np.random.default_rng(seed)
  ids = np.zeros((batch_size, seq_length), np.int32)
  mask = np.zeros((batch_size, seq_length), np.int32)
  for row in range(batch_size):
    length = (
        real_lengths[row]
        if real_lengths is not None
        else rng.integers(10, seq_length + 1)
    )
    ids[row, :length] = rng.integers(5, VOCAB_SIZE, size=length)
    ids[row, 0] = CLS
    ids[row, length // 2] = SEP
    ids[row, length - 1] = SEP
    mask[row, :length] = 1
  return ids, mask


def _mask(ids, mask, config, seed=(1, 2)):
  out = masking.mask_batch(
      tf.constant(ids),
      tf.constant(mask),
      config=config,
      mask_token_id=MASK,
      special_token_ids=SPECIAL,
      vocab_size=VOCAB_SIZE,
      seed=tf.constant(seed, tf.int64),
  )
  return {k: v.numpy() for k, v in out.items()}


def test_never_chooses_special_or_padding_and_no_repeats():
  ids, mask = _batch()
  config = masking.MaskingConfig(mask_rate=0.3, max_predictions_per_seq=12)
  out = _mask(ids, mask, config)
  for row in range(ids.shape[0]):
    chosen = out['masked_lm_positions'][row][out['masked_lm_weights'][row] > 0]
    assert len(set(chosen.tolist())) == len(chosen), 'sampled twice'
    assert np.all(mask[row, chosen] == 1), 'chose padding'
    assert not np.isin(ids[row, chosen], SPECIAL).any(), 'chose a special'
    assert np.all(np.diff(chosen) > 0), 'positions not ascending'
    np.testing.assert_array_equal(
        out['masked_lm_ids'][row][out['masked_lm_weights'][row] > 0],
        ids[row, chosen],
    )
    unchosen = np.setdiff1d(np.arange(ids.shape[1]), chosen)
    np.testing.assert_array_equal(
        out['input_word_ids'][row, unchosen], ids[row, unchosen]
    )


def test_count_follows_rate_and_cap():
  lengths = [40] * 8 + [12] * 8
  ids, mask = _batch(batch_size=16, real_lengths=lengths)
  config = masking.MaskingConfig(mask_rate=0.15, max_predictions_per_seq=4)
  out = _mask(ids, mask, config)
  counts = out['masked_lm_weights'].sum(axis=1)
  # 40 tokens - 3 specials = 37 candidates: round(5.55) = 6, capped at 4.
  assert np.all(counts[:8] == 4)
  # 12 - 3 = 9 candidates: round(1.35) = 1.
  assert np.all(counts[8:] == 1)


def test_mask_random_keep_split():
  ids, mask = _batch(batch_size=512, seq_length=64, real_lengths=[64] * 512)
  config = masking.MaskingConfig(
      mask_rate=0.15,
      max_predictions_per_seq=10,
      mask_token_fraction=0.8,
      random_token_fraction=0.1,
  )
  out = _mask(ids, mask, config)
  real = out['masked_lm_weights'] > 0
  new = np.take_along_axis(
      out['input_word_ids'], out['masked_lm_positions'], axis=1
  )[real]
  original = out['masked_lm_ids'][real]
  n = real.sum()
  masked = (new == MASK).mean()
  kept = (new == original).mean()
  # Random replacements can coincide with the original (p = 1/45).
  assert abs(masked - 0.8) < 4 * np.sqrt(0.16 / n)
  assert abs(kept - (0.1 + 0.1 / 45)) < 4 * np.sqrt(0.09 / n)
  assert not np.isin(new[new != MASK], SPECIAL).any()
  # 64 tokens - 3 specials = 61 candidates: round(0.15 * 61) = 9.
  assert np.all(real.sum(axis=1) == 9)


def test_electra_split_never_draws_random_tokens():
  ids, mask = _batch(batch_size=128, real_lengths=[40] * 128)
  config = masking.MaskingConfig(
      mask_token_fraction=0.85, random_token_fraction=0.0
  )
  out = _mask(ids, mask, config)
  real = out['masked_lm_weights'] > 0
  new = np.take_along_axis(
      out['input_word_ids'], out['masked_lm_positions'], axis=1
  )[real]
  assert np.all((new == MASK) | (new == out['masked_lm_ids'][real]))


def test_seed_determines_mask():
  ids, mask = _batch()
  config = masking.MaskingConfig()
  first = _mask(ids, mask, config, seed=(3, 4))
  again = _mask(ids, mask, config, seed=(3, 4))
  other = _mask(ids, mask, config, seed=(5, 6))
  np.testing.assert_array_equal(
      first['input_word_ids'], again['input_word_ids']
  )
  assert (first['masked_lm_positions'] != other['masked_lm_positions']).any()


def test_random_ids_are_uniform_over_non_special():
  special = tf.constant(sorted(SPECIAL), tf.int32)
  draws = masking._sample_non_special_ids(  # pylint: disable=protected-access
      tf.constant([20000]), special, VOCAB_SIZE, tf.constant([7, 8], tf.int64)
  ).numpy()
  assert draws.min() >= 5 and draws.max() == VOCAB_SIZE - 1
  counts = np.bincount(draws, minlength=VOCAB_SIZE)[5:]
  expected = 20000 / 45
  chi2 = ((counts - expected) ** 2 / expected).sum()
  assert chi2 < 80  # 44 dof: p(chi2 > 80) ~ 1e-3


def test_default_max_predictions():
  assert masking.default_max_predictions(128, 0.15) == 19
  assert masking.default_max_predictions(512, 0.15) == 79


@pytest.mark.parametrize(
    'kwargs',
    [
        dict(mask_rate=0.0),
        dict(max_predictions_per_seq=0),
        dict(mask_token_fraction=0.9, random_token_fraction=0.2),
    ],
)
def test_bad_config(kwargs):
  with pytest.raises(ValueError):
    masking.MaskingConfig(**kwargs)
