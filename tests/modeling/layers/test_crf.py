"""Linear-chain CRF checked against brute-force enumeration of tag paths."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from official_repro.modeling.layers import crf

NUM_TAGS = 3
SEQ_LENGTH = 4
LENGTHS = (4, 1, 2)


def _layer(seed=0):
  """A CRF whose transition variables hold large random values."""
  rng = np.random.default_rng(seed)
  layer = crf.CRF(NUM_TAGS)
  layer.transitions.assign(rng.normal(size=(NUM_TAGS, NUM_TAGS)))
  layer.start_transitions.assign(rng.normal(size=NUM_TAGS))
  layer.end_transitions.assign(rng.normal(size=NUM_TAGS))
  return layer


def _inputs(lengths=LENGTHS, seed=1):
  """Random potentials, random tags (garbage past each end) and masks."""
  rng = np.random.default_rng(seed)
  batch = len(lengths)
  potentials = rng.normal(size=(batch, SEQ_LENGTH, NUM_TAGS)).astype(np.float32)
  mask = (np.arange(SEQ_LENGTH)[None, :] < np.array(lengths)[:, None]).astype(
      np.int32
  )
  tags = rng.integers(0, NUM_TAGS, size=(batch, SEQ_LENGTH)).astype(np.int32)
  tags = np.where(mask == 1, tags, -7).astype(np.int32)
  return potentials, tags, mask


def _path_score(layer, potentials, path):
  """score(y) from the module docstring, for one unpadded sequence."""
  transitions = layer.transitions.numpy()
  score = layer.start_transitions.numpy()[path[0]]
  score += layer.end_transitions.numpy()[path[-1]]
  for t, tag in enumerate(path):
    score += potentials[t, tag]
    if t > 0:
      score += transitions[path[t - 1], tag]
  return score


def _all_paths(layer, potentials, length):
  """Every tag path of `length` and its score, by enumeration."""
  paths = list(itertools.product(range(NUM_TAGS), repeat=length))
  scores = np.array([_path_score(layer, potentials, p) for p in paths])
  return paths, scores


def _logsumexp(values):
  top = np.max(values)
  return top + np.log(np.sum(np.exp(values - top)))


def test_log_partition_matches_brute_force():
  layer = _layer()
  potentials, _, mask = _inputs()
  log_z = layer.log_partition(potentials, mask).numpy()
  for row, length in enumerate(LENGTHS):
    _, scores = _all_paths(layer, potentials[row], length)
    assert len(scores) == NUM_TAGS**length
    np.testing.assert_allclose(log_z[row], _logsumexp(scores), rtol=1e-5)


def test_sequence_score_and_log_likelihood_match_brute_force():
  layer = _layer()
  potentials, tags, mask = _inputs()
  scores = layer.sequence_score(potentials, tags, mask).numpy()
  log_likelihood = layer.log_likelihood(potentials, tags, mask).numpy()
  for row, length in enumerate(LENGTHS):
    path = tuple(tags[row, :length])
    expected_score = _path_score(layer, potentials[row], path)
    _, all_scores = _all_paths(layer, potentials[row], length)
    np.testing.assert_allclose(scores[row], expected_score, rtol=1e-5)
    np.testing.assert_allclose(
        log_likelihood[row],
        expected_score - _logsumexp(all_scores),
        rtol=1e-5,
        atol=1e-5,
    )
  assert np.all(log_likelihood < 0)


def test_viterbi_matches_brute_force_argmax():
  layer = _layer(seed=2)
  potentials, _, mask = _inputs(seed=3)
  tags, best_scores = layer.viterbi_decode(potentials, mask)
  tags, best_scores = tags.numpy(), best_scores.numpy()
  assert tags.dtype == np.int32 and tags.shape == (3, SEQ_LENGTH)
  for row, length in enumerate(LENGTHS):
    paths, scores = _all_paths(layer, potentials[row], length)
    best = int(np.argmax(scores))
    np.testing.assert_array_equal(tags[row, :length], paths[best])
    np.testing.assert_array_equal(tags[row, length:], 0)
    np.testing.assert_allclose(best_scores[row], scores[best], rtol=1e-5)
  np.testing.assert_array_equal(layer(potentials, mask=mask).numpy(), tags)


def test_viterbi_follows_strong_transitions():
  """Flat potentials: the path is decided by start, transitions and end."""
  layer = crf.CRF(NUM_TAGS)
  layer.transitions.assign(
      np.full((3, 3), -10.0)
      + 20.0 * np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]])
  )
  layer.start_transitions.assign([5.0, 0.0, 0.0])
  layer.end_transitions.assign([0.0, 0.0, 0.0])
  tags = layer(np.zeros((1, 4, 3), np.float32)).numpy()
  np.testing.assert_array_equal(tags, [[0, 1, 2, 0]])


def test_probabilities_of_all_paths_sum_to_one():
  layer = _layer(seed=4)
  potentials, _, _ = _inputs(lengths=(3,), seed=5)
  paths = np.array(list(itertools.product(range(NUM_TAGS), repeat=3)))
  num_paths = len(paths)
  tiled = np.repeat(potentials, num_paths, axis=0)
  tags = np.concatenate([paths, np.zeros((num_paths, 1), np.int64)], axis=1)
  mask = np.tile([[1, 1, 1, 0]], (num_paths, 1))
  log_likelihood = layer.log_likelihood(tiled, tags, mask).numpy()
  np.testing.assert_allclose(np.exp(log_likelihood).sum(), 1.0, rtol=1e-5)


def test_empty_sequences_are_zero_not_nan():
  layer = _layer()
  potentials, tags, mask = _inputs(lengths=(0, 2))
  potentials = tf.constant(potentials)
  with tf.GradientTape() as tape:
    tape.watch(potentials)
    log_likelihood = layer.log_likelihood(potentials, tags, mask)
    empty_log_likelihood = log_likelihood[0]
  gradient = tape.gradient(empty_log_likelihood, potentials).numpy()
  assert log_likelihood.numpy()[0] == 0.0
  assert np.all(np.isfinite(log_likelihood.numpy()))
  np.testing.assert_array_equal(gradient, 0.0)
  assert layer.log_partition(potentials, mask).numpy()[0] == 0.0
  assert layer.sequence_score(potentials, tags, mask).numpy()[0] == 0.0
  tags, best_scores = layer.viterbi_decode(potentials, mask)
  np.testing.assert_array_equal(tags.numpy()[0], 0)
  assert best_scores.numpy()[0] == 0.0


def test_no_mask_means_full_length():
  layer = _layer()
  potentials, tags, _ = _inputs(lengths=(4, 4))
  full_mask = np.ones((2, SEQ_LENGTH), np.int32)
  np.testing.assert_allclose(
      layer.log_likelihood(potentials, tags).numpy(),
      layer.log_likelihood(potentials, tags, full_mask).numpy(),
  )
  np.testing.assert_array_equal(
      layer(potentials).numpy(), layer(potentials, mask=full_mask).numpy()
  )


def test_gradients_reach_potentials_and_transitions():
  layer = _layer()
  potentials, tags, mask = _inputs()
  potentials = tf.constant(potentials)
  with tf.GradientTape() as tape:
    tape.watch(potentials)
    loss = -tf.reduce_sum(layer.log_likelihood(potentials, tags, mask))
  variables = [
      layer.transitions,
      layer.start_transitions,
      layer.end_transitions,
  ]
  gradients = tape.gradient(loss, [potentials] + variables)
  for gradient in gradients:
    gradient = gradient.numpy()
    assert np.all(np.isfinite(gradient))
    assert np.any(np.abs(gradient) > 1e-4)
  # Masked-out positions receive no gradient.
  np.testing.assert_array_equal(gradients[0].numpy()[1, 1:], 0.0)
  assert {
      v.name.split('/')[-1].split(':')[0] for v in layer.trainable_variables
  } == {'transitions', 'start_transitions', 'end_transitions'}


def test_initial_transitions_are_small():
  layer = crf.CRF(8)
  values = layer.transitions.numpy()
  assert values.shape == (8, 8)
  assert 0.0 < np.abs(values).max() <= 2 * 0.02 + 1e-6


def test_config_round_trip():
  layer = crf.CRF(NUM_TAGS, initializer_range=0.05, name='pos_crf')
  config = layer.get_config()
  assert config['num_tags'] == NUM_TAGS
  assert config['initializer_range'] == 0.05
  clone = crf.CRF.from_config(config)
  assert clone.get_config() == config
  assert [w.shape for w in clone.weights] == [
      (NUM_TAGS, NUM_TAGS),
      (NUM_TAGS,),
      (NUM_TAGS,),
  ]
  assert [w.shape for w in clone.weights] == [w.shape for w in layer.weights]
  clone.set_weights(layer.get_weights())
  potentials, _, mask = _inputs()
  np.testing.assert_array_equal(
      clone(potentials, mask=mask).numpy(), layer(potentials, mask=mask).numpy()
  )
  restored = tf_keras.layers.deserialize(tf_keras.layers.serialize(layer))
  assert isinstance(restored, crf.CRF) and restored.num_tags == NUM_TAGS


def test_tf_function_with_unknown_batch_and_length():
  layer = _layer()
  spec = tf.TensorSpec([None, None, NUM_TAGS], tf.float32)
  int_spec = tf.TensorSpec([None, None], tf.int32)

  @tf.function(input_signature=[spec, int_spec, int_spec])
  def run(potentials, tags, mask):
    return (
        layer.log_likelihood(potentials, tags, mask),
        layer.viterbi_decode(potentials, mask),
    )

  potentials, tags, mask = _inputs()
  log_likelihood, (decoded, best) = run(potentials, tags, mask)
  np.testing.assert_allclose(
      log_likelihood.numpy(),
      layer.log_likelihood(potentials, tags, mask).numpy(),
      rtol=1e-6,
  )
  eager_tags, eager_best = layer.viterbi_decode(potentials, mask)
  np.testing.assert_array_equal(decoded.numpy(), eager_tags.numpy())
  np.testing.assert_allclose(best.numpy(), eager_best.numpy(), rtol=1e-6)
  short = run(potentials[:2, :1], tags[:2, :1], mask[:2, :1])[1][0]
  np.testing.assert_array_equal(
      short.numpy(),
      np.argmax(
          potentials[:2, :1]
          + layer.start_transitions.numpy()
          + layer.end_transitions.numpy(),
          axis=-1,
      ),
  )


def test_xla_matches_eager():
  layer = _layer()
  potentials, tags, mask = _inputs()
  compiled = tf.function(
      lambda p, t, m: (
          layer.log_likelihood(p, t, m),
          layer.viterbi_decode(p, m)[0],
      ),
      jit_compile=True,
  )
  log_likelihood, decoded = compiled(potentials, tags, mask)
  np.testing.assert_allclose(
      log_likelihood.numpy(),
      layer.log_likelihood(potentials, tags, mask).numpy(),
      rtol=1e-5,
  )
  np.testing.assert_array_equal(
      decoded.numpy(), layer.viterbi_decode(potentials, mask)[0].numpy()
  )


def test_composes_on_keras_logits():
  words = tf_keras.Input(shape=(None, 5))
  logits = tf_keras.layers.Dense(NUM_TAGS)(words)
  tags = crf.CRF(NUM_TAGS)(logits)
  model = tf_keras.Model(words, tags)
  out = model(np.random.default_rng(0).normal(size=(2, 6, 5)))
  assert out.shape == (2, 6) and out.dtype == tf.int32


def test_half_precision_potentials_computed_in_float32():
  layer = _layer()
  potentials, tags, mask = _inputs()
  half = layer.log_likelihood(tf.cast(potentials, tf.float16), tags, mask)
  assert half.dtype == tf.float32
  np.testing.assert_allclose(
      half.numpy(),
      layer.log_likelihood(potentials, tags, mask).numpy(),
      atol=1e-2,
  )


def test_rejects_bad_arguments():
  with pytest.raises(ValueError, match='num_tags'):
    crf.CRF(0)
  with pytest.raises(ValueError, match='initializer_range'):
    crf.CRF(3, initializer_range=-1.0)
