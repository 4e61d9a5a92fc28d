"""Samplers against exact distributions and brute force."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from official_repro.modeling.pretrainers import sampling

_LOGITS = np.array([1.5, 0.5, 0.0, -1.0], np.float32)
_CHI2_P001 = {
    2: 13.82,
    3: 16.27,
    11: 31.26,
}  # chi-square critical values, p = 0.001


def _chi2(counts, expected):
  return float(((counts - expected) ** 2 / expected).sum())


def _softmax(logits):
  e = np.exp(logits - logits.max())
  return e / e.sum()


@pytest.mark.parametrize('temperature', [0.8, 1.0, 2.0])
@pytest.mark.parametrize('seed', [None, tf.constant([5, 6], tf.int64)])
def test_sample_from_logits_follows_the_tempered_softmax(seed, temperature):
  tf.random.set_seed(0)  # the stateful case, so that the test cannot flake
  n = 30000
  draws = sampling.sample_from_logits(
      tf.tile(_LOGITS[None, None], [n // 10, 10, 1]), temperature, seed=seed
  ).numpy()
  assert draws.shape == (n // 10, 10)
  counts = np.bincount(draws.ravel(), minlength=4)
  expected = _softmax(_LOGITS / temperature) * n
  assert _chi2(counts, expected) < _CHI2_P001[3]


def test_sample_from_logits_never_draws_a_disallowed_id():
  # Each row's disallowed id is its most likely one; the others keep their
  # renormalised probabilities.
  n = 20000
  logits = tf.tile(_LOGITS[None], [n, 1])
  draws = sampling.sample_from_logits(
      logits,
      disallowed_ids=tf.zeros([n], tf.int32),
      seed=tf.constant([7, 8], tf.int64),
  ).numpy()
  assert not np.any(draws == 0)
  p = _softmax(_LOGITS[1:])
  counts = np.bincount(draws, minlength=4)[1:]
  assert _chi2(counts, p * n) < _CHI2_P001[2]


def test_sample_from_logits_is_a_function_of_its_seed():
  logits = tf.random.stateless_normal([50, 100], [0, 1])
  first = sampling.sample_from_logits(logits, seed=tf.constant([1, 2]))
  again = sampling.sample_from_logits(logits, seed=tf.constant([1, 2]))
  other = sampling.sample_from_logits(logits, seed=tf.constant([1, 3]))
  np.testing.assert_array_equal(first, again)
  assert np.any(first.numpy() != other.numpy())


def test_sample_distinct_matches_sequential_sampling_without_replacement():
  n, temperature = 30000, 0.8
  draws = sampling.sample_distinct(
      tf.tile(_LOGITS[None], [n, 1]),
      num_samples=2,
      temperature=temperature,
      seed=tf.constant([3, 4], tf.int64),
  ).numpy()
  assert draws.shape == (n, 2)
  assert np.all(draws[:, 0] != draws[:, 1])
  # Exact: P(i then j) = p_i * p_j / (1 - p_i), p = softmax(logits / T).
  p = _softmax(_LOGITS / temperature)
  pairs = list(itertools.permutations(range(4), 2))
  expected = np.array([p[i] * p[j] / (1 - p[i]) for i, j in pairs]) * n
  index = {pair: k for k, pair in enumerate(pairs)}
  counts = np.bincount([index[tuple(d)] for d in draws], minlength=len(pairs))
  assert _chi2(counts, expected) < _CHI2_P001[11]


def test_sample_distinct_never_repeats_nor_returns_the_excluded_id():
  logits = tf.random.stateless_normal([64, 5, 12], seed=[1, 2])
  excluded = tf.random.stateless_uniform(
      [64, 5], seed=[3, 4], maxval=12, dtype=tf.int32
  )
  draws = sampling.sample_distinct(
      logits, num_samples=11, excluded_ids=excluded
  ).numpy()
  for row, excluded_id in zip(
      draws.reshape(-1, 11), excluded.numpy().reshape(-1)
  ):
    assert len(set(row)) == 11
    assert excluded_id not in row


def test_top_k_excluding_is_the_k_most_likely_other_ids():
  logits = tf.random.stateless_normal([3, 4, 9], seed=[5, 6]).numpy()
  excluded = np.array([[0, 3, 8, 2]] * 3, np.int32)
  top = sampling.top_k_excluding(logits, 3, excluded).numpy()
  for b, p in itertools.product(range(3), range(4)):
    order = [i for i in np.argsort(-logits[b, p]) if i != excluded[b, p]]
    assert list(top[b, p]) == order[:3]


def test_gumbel_softmax_argmax_follows_the_softmax():
  n = 20000
  relaxed = sampling.gumbel_softmax(
      tf.tile(_LOGITS[None], [n, 1]),
      temperature=1.0,
      seed=tf.constant([7, 8], tf.int64),
  )
  np.testing.assert_allclose(tf.reduce_sum(relaxed, -1), 1.0, rtol=1e-5)
  counts = np.bincount(np.argmax(relaxed, -1), minlength=4)
  assert _chi2(counts, _softmax(_LOGITS) * n) < _CHI2_P001[3]


def test_gumbel_softmax_low_temperature_limit_is_argmax_of_perturbed_logits():
  seed = tf.constant([9, 10], tf.int64)
  logits = tf.random.stateless_normal([50, 7], seed=[1, 1])
  noise = sampling.gumbel_noise(tf.shape(logits), seed)
  hard = tf.one_hot(tf.argmax(logits + noise, -1), 7)
  cold = sampling.gumbel_softmax(logits, temperature=1e-4, seed=seed)
  np.testing.assert_allclose(cold, hard, atol=1e-4)
  warm = sampling.gumbel_softmax(logits, temperature=10.0, seed=seed)
  assert float(tf.reduce_max(warm)) < 0.5  # Towards uniform.


def test_straight_through_is_one_hot_forward_relaxed_backward():
  seed = tf.constant([11, 12], tf.int64)
  logits = tf.Variable(tf.random.stateless_normal([4, 6], seed=[2, 2]))
  weights = tf.random.stateless_normal([4, 6], seed=[3, 3])
  with tf.GradientTape(persistent=True) as tape:
    hard = sampling.gumbel_softmax(
        logits, 0.5, straight_through=True, seed=seed
    )
    soft = sampling.gumbel_softmax(logits, 0.5, seed=seed)
    hard_loss = tf.reduce_sum(hard * weights)
    soft_loss = tf.reduce_sum(soft * weights)
  assert set(np.unique(hard.numpy())) == {0.0, 1.0}
  np.testing.assert_array_equal(tf.argmax(hard, -1), tf.argmax(soft, -1))
  np.testing.assert_allclose(
      tape.gradient(hard_loss, logits),
      tape.gradient(soft_loss, logits),
      rtol=1e-5,
  )


@pytest.mark.parametrize(
    'sampler',
    [
        lambda logits: sampling.sample_from_logits(logits, 0.0),
        lambda logits: sampling.sample_distinct(logits, 2, temperature=-1.0),
        lambda logits: sampling.gumbel_softmax(logits, 0.0),
    ],
)
def test_temperature_must_be_positive(sampler):
  with pytest.raises(ValueError, match='temperature must be > 0'):
    sampler(tf.zeros([2, 4]))


def test_scatter_ignores_padded_slots():
  ids = tf.constant([[10, 11, 12, 13]])
  out = sampling.scatter_at_positions(
      ids,
      positions=tf.constant([[2, 0, 0]]),
      values=tf.constant([[7, 8, 9]]),
      weights=tf.constant([[1.0, 0.0, 0.0]]),
  )
  np.testing.assert_array_equal(out.numpy(), [[10, 11, 7, 13]])
