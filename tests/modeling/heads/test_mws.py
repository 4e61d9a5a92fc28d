"""The MWS head against a loop over positions and candidates (003 Eq. 7)."""

import numpy as np
import tensorflow as tf
import tf_keras

from official_repro.modeling.heads import mws


def _layer_norm(x, gamma, beta, epsilon=1e-12):
  mean = x.mean(-1, keepdims=True)
  variance = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def test_logits_are_embedding_dot_transformed_state_per_candidate():
  rng = np.random.default_rng(0)
  batch, length, hidden, width, vocab, positions, candidates = (
      2,
      7,
      6,
      4,
      11,
      3,
      5,
  )
  head = mws.MultiWordSelectionHead(embedding_width=width, activation='relu')
  states = rng.normal(size=(batch, length, hidden)).astype(np.float32)
  masked = rng.integers(0, length, size=(batch, positions)).astype(np.int32)
  candidate_ids = rng.integers(0, vocab, (batch, positions, candidates))
  table = rng.normal(size=(vocab, width)).astype(np.float32)
  logits = head(states, masked, candidate_ids.astype(np.int32), table).numpy()

  kernel, bias = (w.numpy() for w in head.dense.weights)
  gamma, beta = (w.numpy() for w in head.layer_norm.weights)
  expected = np.zeros((batch, positions, candidates))
  for b in range(batch):
    for p in range(positions):
      h = np.maximum(states[b, masked[b, p]] @ kernel + bias, 0.0)
      h = _layer_norm(h, gamma, beta)
      for c in range(candidates):
        expected[b, p, c] = table[candidate_ids[b, p, c]] @ h
  np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-5)


def test_rebuilds_from_its_config_with_the_same_logits():
  head = mws.MultiWordSelectionHead(embedding_width=4, name='mws')
  states = tf.random.stateless_normal([1, 5, 8], seed=[1, 2])
  table = tf.random.stateless_normal([9, 4], seed=[3, 4])
  arguments = (states, tf.constant([[0, 3]]), tf.constant([[[1, 2], [3, 8]]]))
  logits = head(*arguments, table)
  rebuilt = tf_keras.layers.deserialize(tf_keras.layers.serialize(head))
  rebuilt(*arguments, table)
  rebuilt.set_weights(head.get_weights())
  assert rebuilt.get_config() == head.get_config()
  np.testing.assert_allclose(rebuilt(*arguments, table), logits, rtol=1e-6)
