"""Attention concentration (002 Table 1) against hand-computed maps."""

import numpy as np
import pytest

from official_repro.metrics import attention_concentration as ac


def _uniform(length, real_length=None):
  """[length, length]: every row uniform over the first real_length keys."""
  real_length = real_length or length
  probs = np.zeros((length, length))
  probs[:, :real_length] = 1.0 / real_length
  return probs


def _banded(length, half_width):
  """[length, length]: row i uniform over keys with |i - j| <= half_width."""
  positions = np.arange(length)
  band = np.abs(positions[:, None] - positions[None, :]) <= half_width
  return band / band.sum(axis=1, keepdims=True)


def _single(probs, real_length=None):
  """One map as a batch of one head, and its mask."""
  mask = np.zeros((1, probs.shape[0]))
  mask[0, : real_length or probs.shape[0]] = 1
  return probs[None, None], mask


def test_uniform_map_is_the_ratio_of_pair_counts():
  # T = 8: of the 64 pairs, |i - j| = 5, 6, 7 holds 2 * (3 + 2 + 1) = 12;
  # the other 52 are within 4. Each pair carries 1/8.
  maps = ac.map_concentration(*_single(_uniform(8)))
  np.testing.assert_allclose(maps.near_mass, [[52 / 8]])
  np.testing.assert_allclose(maps.far_mass, [[12 / 8]])
  np.testing.assert_allclose(maps.concentration, [[52 / 12]])
  assert maps.included.tolist() == [[True]]


def test_banded_map_and_window_argument():
  # Rows uniform over |i - j| <= 2, T = 8, window 1. Band sizes per row:
  # 3, 4, 5, 5, 5, 5, 4, 3; keys within 1 per row: 2, 3, 3, 3, 3, 3, 3, 2.
  # near = 2/3 + 3/4 + 4 * 3/5 + 3/4 + 2/3 = 157/30,
  # far  = 1/3 + 1/4 + 4 * 2/5 + 1/4 + 1/3 = 83/30.
  probs, mask = _single(_banded(8, 2))
  maps = ac.map_concentration(probs, mask, window=1)
  np.testing.assert_allclose(maps.near_mass, [[157 / 30]])
  np.testing.assert_allclose(maps.far_mass, [[83 / 30]])
  np.testing.assert_allclose(maps.concentration, [[157 / 83]])
  # Within window 2 (or the default 4) the map puts no mass beyond: no C.
  for window in (2, 4):
    maps = ac.map_concentration(probs, mask, window=window)
    np.testing.assert_allclose(maps.near_mass, [[8.0]])
    assert maps.far_mass.tolist() == [[0.0]]
    assert maps.included.tolist() == [[False]]
    assert np.isnan(maps.concentration).all()
  # Window 0: only the diagonal is near.
  maps = ac.map_concentration(*_single(_uniform(8)), window=0)
  np.testing.assert_allclose(maps.concentration, [[8 / 56]])


def test_padding_is_excluded():
  # The T = 6 map, then padded to 9 with mass on padding keys and rows.
  rng = np.random.default_rng(0)
  real = rng.dirichlet(np.ones(6), size=6)
  padded = rng.uniform(size=(9, 9))
  padded[:6, :6] = real
  unpadded = ac.map_concentration(*_single(real))
  with_padding = ac.map_concentration(*_single(padded, real_length=6))
  np.testing.assert_allclose(with_padding.concentration, unpadded.concentration)
  np.testing.assert_allclose(with_padding.far_mass, unpadded.far_mass)
  # Uniform over 6 real tokens: 2 pairs (|i - j| = 5) of 36 are far.
  maps = ac.map_concentration(*_single(_uniform(9, 6), real_length=6))
  np.testing.assert_allclose(maps.concentration, [[34 / 2]])


def test_short_sequences_are_excluded_and_counted():
  probs = np.stack([_uniform(8, 5), _uniform(8, 6)])[:, None]
  mask = np.zeros((2, 8))
  mask[0, :5] = 1  # 5 = window + 1: no pair is more than 4 apart.
  mask[1, :6] = 1
  maps = ac.map_concentration(probs, mask)
  assert maps.included.tolist() == [[False], [True]]
  accumulator = ac.ConcentrationAccumulator()
  accumulator.update([probs], mask)
  result = accumulator.result()
  assert (result['num_maps'], result['num_excluded']) == (2, 1)
  assert result['mean_concentration'] == pytest.approx(17.0)


def test_accumulator_mean_versus_mass_ratio():
  # Examples: 8 real tokens (C = 52/12, near 52/8, far 12/8), 6 real tokens
  # (C = 17, near 34/6, far 2/6) and 4 real tokens (no C). Two heads; layer
  # 1 repeats layer 0 in both heads, layer 2 is banded (window 1 test).
  probs = np.stack([_uniform(8), _uniform(8, 6), _uniform(8, 4)])
  mask = np.zeros((3, 8))
  for row, real in enumerate((8, 6, 4)):
    mask[row, :real] = 1
  layer0 = np.repeat(probs[:, None], 2, axis=1)
  layer1 = np.repeat(np.repeat(_banded(8, 5)[None, None], 3, 0), 2, 1)
  accumulator = ac.ConcentrationAccumulator()
  # Two batches: the first two examples, then the third.
  accumulator.update([layer0[:2], layer1[:2]], mask[:2])
  accumulator.update([layer0[2:], layer1[2:]], mask[2:])
  result = accumulator.result()
  first = ac.map_concentration(layer1, mask)
  assert first.included.tolist() == [[True, True], [True, True], [False, False]]
  layer0_mean = (52 / 12 + 17) / 2
  layer0_ratio = (52 / 8 + 34 / 6) / (12 / 8 + 2 / 6)  # = 73/11.
  layer1_mean = float(np.mean(first.concentration[:2]))
  assert result['per_layer'][0] == pytest.approx(
      dict(
          mean_concentration=layer0_mean,
          mass_ratio=layer0_ratio,
          num_maps=6,
          num_excluded=2,
      )
  )
  assert result['per_layer'][1]['mean_concentration'] == pytest.approx(
      layer1_mean
  )
  assert result['mean_concentration'] == pytest.approx(
      (layer0_mean + layer1_mean) / 2
  )
  near = 2 * (52 / 8 + 34 / 6) + np.sum(first.near_mass[:2])
  far = 2 * (12 / 8 + 2 / 6) + np.sum(first.far_mass[:2])
  assert result['mass_ratio'] == pytest.approx(near / far)
  assert result['mean_concentration'] != pytest.approx(result['mass_ratio'])
  assert (result['num_maps'], result['num_excluded']) == (12, 4)
  assert (result['num_layers'], result['num_heads'], result['window']) == (
      2,
      2,
      4,
  )


def test_errors():
  accumulator = ac.ConcentrationAccumulator()
  with pytest.raises(ValueError, match='No attention scores'):
    accumulator.result()
  probs, mask = _single(_uniform(5))
  accumulator.update([probs], mask)
  with pytest.raises(ValueError, match='None of the 1 attention maps'):
    accumulator.result()
  with pytest.raises(ValueError, match='2 layers'):
    accumulator.update([probs, probs], mask)
  with pytest.raises(ValueError, match='input_mask'):
    ac.map_concentration(probs, np.ones((1, 4)))
  with pytest.raises(ValueError, match=r'\[batch, heads, T, T\]'):
    ac.map_concentration(probs[0], mask)


def test_uniform_attention_spreads_over_real_tokens():
  mask = np.array([[1] * 8 + [0] * 3, [1] * 6 + [0] * 5])
  maps = ac.uniform_attention(mask)
  assert maps.shape == (2, 1, 11, 11)
  np.testing.assert_allclose(maps[0, 0, 2], [1 / 8] * 8 + [0] * 3)
  # Same C as the unpadded uniform maps: 52/12 for 8 tokens, 34/2 for 6.
  np.testing.assert_allclose(
      ac.map_concentration(maps, mask).concentration, [[52 / 12], [34 / 2]]
  )
