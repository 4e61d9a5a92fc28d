"""POS tagging's task: cross-entropy over the labelled pieces only."""

import numpy as np
import pytest
import tensorflow as tf

from official_repro.tasks import pos_tagging
from tests.tasks import numpy_losses


def test_softmax_loss_averages_over_the_labelled_pieces_only():
  rng = np.random.default_rng(2)
  logits = rng.normal(size=(2, 5, 3)).astype(np.float32)
  label_ids = rng.integers(0, 3, size=(2, 5))
  weights = np.array([[1, 0, 1, 1, 0], [1, 1, 0, 0, 0]], np.float32)
  labels = dict(label_ids=label_ids, label_weights=weights)
  task = pos_tagging.TaggingTask(pos_tagging.TaggingTaskConfig())
  loss = task.build_losses(labels, dict(logits=tf.constant(logits)))
  kept = weights.astype(bool)
  expected = numpy_losses.cross_entropy(logits[kept], label_ids[kept])
  assert float(loss) == pytest.approx(expected, rel=1e-5)
  assert float(task.loss_terms(labels)) == kept.sum()


def test_accuracy_counts_the_labelled_pieces_only():
  task = pos_tagging.TaggingTask(pos_tagging.TaggingTaskConfig())
  metrics = task.compute_metrics(
      dict(
          predicted_ids=np.array([[1, 2, 0, 0]]),
          label_ids=np.array([[1, 0, 0, 2]]),
          label_weights=np.array([[1, 1, 1, 0]]),
      )
  )
  assert metrics == pytest.approx(dict(accuracy=2 / 3))
