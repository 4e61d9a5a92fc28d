"""The per-token FFN head (003 Table 3) against a NumPy forward pass."""

import numpy as np
import tensorflow as tf
import tf_keras

from official_repro.modeling.heads import token_ffn


def _numpy_forward(head, states):
  w1, b1 = (w.numpy() for w in head.intermediate.weights)
  w2, b2 = (w.numpy() for w in head.output_dense.weights)
  gamma, beta = (w.numpy() for w in head.layer_norm.weights)
  x = states + np.maximum(states @ w1 + b1, 0.0) @ w2 + b2
  mean = x.mean(-1, keepdims=True)
  variance = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(variance + 1e-12) * gamma + beta


def test_forward_is_residual_ffn_then_layer_norm():
  head = token_ffn.TokenFeedForwardHead(
      hidden_size=6, intermediate_size=10, activation='relu'
  )
  states = np.random.default_rng(0).normal(size=(2, 5, 6)).astype(np.float32)
  outputs = head(states, training=False).numpy()
  np.testing.assert_allclose(
      outputs, _numpy_forward(head, states), rtol=1e-4, atol=1e-5
  )


def test_no_token_sees_another():
  head = token_ffn.TokenFeedForwardHead(hidden_size=4, intermediate_size=8)
  states = tf.random.stateless_normal([1, 6, 4], seed=[0, 1])
  changed = tf.tensor_scatter_nd_update(states, [[0, 5]], [[9.0, 9, 9, 9]])
  before, after = head(states), head(changed)
  np.testing.assert_array_equal(before[:, :5], after[:, :5])
  assert not np.allclose(before[:, 5], after[:, 5])


def test_rebuilds_from_its_config_with_the_same_outputs():
  head = token_ffn.TokenFeedForwardHead(4, 8, dropout_rate=0.2, name='ffn')
  states = tf.random.stateless_normal([2, 3, 4], seed=[5, 6])
  outputs = head(states)
  rebuilt = tf_keras.layers.deserialize(tf_keras.layers.serialize(head))
  rebuilt(states)
  rebuilt.set_weights(head.get_weights())
  assert rebuilt.get_config() == head.get_config()
  np.testing.assert_allclose(rebuilt(states), outputs, rtol=1e-6)
