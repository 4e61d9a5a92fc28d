"""RACE's task: a softmax over the options, accuracy by level."""

import numpy as np
import pytest
import tensorflow as tf

from official_repro.data import race as race_data
from official_repro.tasks import race
from tests.tasks import numpy_losses


def test_loss_is_the_cross_entropy_of_a_softmax_over_the_options():
  logits = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)
  labels = np.array([0, 3, 1, 1, 2])
  task = race.RaceTask(race.RaceTaskConfig())
  loss = task.build_losses(dict(label_ids=labels), tf.constant(logits))
  assert float(loss) == pytest.approx(
      numpy_losses.cross_entropy(logits, labels), rel=1e-5
  )


def test_metrics_are_the_accuracy_of_each_level_and_of_all():
  # Options scored so that the predictions are [0, 1, 2, 3, 0, 1].
  logits = np.eye(4)[[0, 1, 2, 3, 0, 1]]
  labels = np.array([0, 1, 0, 3, 1, 1])
  middle, high = race_data.LEVELS.index('middle'), race_data.LEVELS.index(
      'high'
  )
  levels = np.array([middle, middle, middle, high, high, high])
  task = race.RaceTask(race.RaceTaskConfig())
  metrics = task.compute_metrics(
      dict(logits=logits, label_ids=labels, level_ids=levels)
  )
  assert metrics == pytest.approx(
      dict(accuracy_middle=2 / 3, accuracy_high=2 / 3, accuracy_all=4 / 6)
  )
  assert task.headline_metric() == 'accuracy_all'
