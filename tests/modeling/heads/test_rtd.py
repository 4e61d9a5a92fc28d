"""The replaced-token-detection head: output, activation, serialization."""

import numpy as np
import tensorflow as tf
import tf_keras

from official_repro.modeling.heads import rtd


def test_logits_are_the_two_dense_layers():
  head = rtd.ReplacedTokenDetectionHead(hidden_size=6)
  states = tf.random.stateless_normal([2, 5, 6], seed=[1, 2])
  logits = head(states)
  assert logits.shape == (2, 5)
  inner = states @ head.dense.kernel + head.dense.bias
  gelu = (
      0.5
      * inner
      * (1 + tf.tanh(np.sqrt(2 / np.pi) * (inner + 0.044715 * inner**3)))
  )
  expected = (gelu @ head.logit.kernel + head.logit.bias)[..., 0]
  np.testing.assert_allclose(logits, expected, atol=1e-5)


def test_config_round_trip():
  head = rtd.ReplacedTokenDetectionHead(
      hidden_size=6, activation='relu', initializer_range=0.1
  )
  states = tf.ones([1, 3, 6])
  head(states)
  clone = tf_keras.layers.deserialize(tf_keras.layers.serialize(head))
  assert isinstance(clone, rtd.ReplacedTokenDetectionHead)
  assert clone.get_config() == head.get_config()
  clone(states)
  clone.set_weights(head.get_weights())
  np.testing.assert_allclose(clone(states), head(states))
