"""The original ELECTRA classification head: first token, dropout, dense."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from official_repro.modeling.heads import first_token


def test_logits_are_a_dense_layer_of_the_first_token():
  head = first_token.FirstTokenHead(3, dropout_rate=0.5)
  sequence = np.random.default_rng(0).normal(size=(2, 5, 8)).astype(np.float32)
  logits = head(tf.constant(sequence), training=False).numpy()
  kernel, bias = (w.numpy() for w in head.out_proj.weights)
  np.testing.assert_allclose(
      logits, sequence[:, 0] @ kernel + bias, rtol=1e-6, atol=1e-6
  )
  # Only the first position counts.
  changed = sequence.copy()
  changed[:, 1:] += 1.0
  np.testing.assert_allclose(head(tf.constant(changed), training=False), logits)
  # Dropout acts in training only.
  assert not np.allclose(head(tf.constant(sequence), training=True), logits)


def test_the_kernel_starts_glorot_uniform():
  """tf.layers.dense's default: uniform in +-sqrt(6 / (fan_in + fan_out))."""
  tf_keras.utils.set_random_seed(0)
  head = first_token.FirstTokenHead(2)
  head(tf.zeros([1, 3, 600]))
  kernel = head.out_proj.kernel.numpy()
  limit = np.sqrt(6.0 / (600 + 2))
  assert np.abs(kernel).max() <= limit
  # Uniform: standard deviation limit / sqrt(3), and no truncated normal's
  # stddev 0.02.
  assert kernel.std() == pytest.approx(limit / np.sqrt(3), rel=0.1)
  np.testing.assert_array_equal(head.out_proj.bias.numpy(), 0.0)


def test_the_head_serializes():
  head = first_token.FirstTokenHead(4, dropout_rate=0.2, name='cls')
  clone = first_token.FirstTokenHead.from_config(head.get_config())
  assert clone.get_config() == head.get_config()
  restored = tf_keras.layers.deserialize(tf_keras.layers.serialize(head))
  assert isinstance(restored, first_token.FirstTokenHead)


@pytest.mark.parametrize(
    'kwargs, message',
    [(dict(num_classes=0), 'num_classes'), (dict(dropout_rate=1.0), 'dropout')],
)
def test_bad_arguments_are_refused(kwargs, message):
  with pytest.raises(ValueError, match=message):
    first_token.FirstTokenHead(**{'num_classes': 2, **kwargs})
