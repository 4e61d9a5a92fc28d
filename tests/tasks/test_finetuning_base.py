"""The fine-tuning tasks' shared loss pieces, against numpy."""

import numpy as np
import pytest
import tensorflow as tf

from official_repro.tasks import finetuning_base
from tests.tasks import numpy_losses


def test_masked_mean_is_the_weighted_mean_and_zero_without_weights():
  values = tf.constant([1.0, 2.0, 4.0, 8.0])
  weights = tf.constant([1, 0, 1, 0])
  assert float(finetuning_base.masked_mean(values, weights)) == 2.5
  nothing = finetuning_base.masked_mean(values, tf.zeros([4], tf.int32))
  assert float(nothing) == 0.0


def test_softmax_cross_entropy_adds_the_auxiliary_losses():
  logits = np.random.default_rng(3).normal(size=(4, 3)).astype(np.float32)
  labels = np.array([2, 0, 1, 1])
  expected = numpy_losses.cross_entropy(logits, labels)
  loss = finetuning_base.softmax_cross_entropy(labels, tf.constant(logits))
  assert float(loss) == pytest.approx(expected, rel=1e-5)
  aux = [tf.constant(0.5), tf.constant(0.25)]
  with_aux = finetuning_base.softmax_cross_entropy(
      labels, tf.constant(logits, tf.bfloat16), aux
  )
  assert with_aux.dtype == tf.float32
  assert float(with_aux) == pytest.approx(expected + 0.75, rel=2e-2)
  assert finetuning_base.plus_aux_losses(loss, []) is loss


def test_a_sparse_gradient_keeps_each_row_once_with_its_copies_summed():
  gradient = tf.IndexedSlices(
      tf.constant([[1.0, 1.0], [2.0, 0.0], [4.0, 4.0]]),
      tf.constant([3, 1, 3]),
      tf.constant([5, 2]),
  )
  merged = finetuning_base._deduplicated(gradient)  # pylint: disable=protected-access
  assert sorted(merged.indices.numpy().tolist()) == [1, 3]
  np.testing.assert_array_equal(
      tf.convert_to_tensor(merged), tf.convert_to_tensor(gradient)
  )
