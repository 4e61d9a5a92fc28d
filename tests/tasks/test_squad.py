"""SQuAD's task loss: the mean of the start and end cross-entropies."""

import numpy as np
import pytest
import tensorflow as tf

from official_repro.tasks import squad
from tests.tasks import numpy_losses


def test_loss_is_the_mean_of_start_and_end_cross_entropy_plus_aux():
  rng = np.random.default_rng(0)
  start, end = rng.normal(size=(2, 3, 7)).astype(np.float32)
  labels = dict(start_positions=np.array([0, 6, 3]), end_positions=[2, 6, 5])
  task = squad.SquadTask(squad.SquadTaskConfig())
  outputs = dict(start_logits=tf.constant(start), end_logits=tf.constant(end))
  expected = (
      numpy_losses.cross_entropy(start, labels['start_positions'])
      + numpy_losses.cross_entropy(end, labels['end_positions'])
  ) / 2
  loss = task.build_losses(labels, outputs)
  assert float(loss) == pytest.approx(expected, rel=1e-5)
  with_aux = task.build_losses(labels, outputs, [tf.constant(0.25)] * 2)
  assert float(with_aux) == pytest.approx(expected + 0.5, rel=1e-5)
