"""Held-out pretraining metrics of a run, read from its summaries.

Learning curves come from Orbit's `<model_dir>/validation` scalar
summaries (`train_and_eval` mode), not from the run's log.
"""

import os
from typing import Dict, Iterator

import tensorflow as tf

VALIDATION_SUBDIR = 'validation'
# Orbit's own scalars, which say nothing about the model.
_NOT_METRICS = ('steps_per_second',)


def events(pattern: str) -> Iterator[tf.compat.v1.Event]:
  """The summary events of the event files matching `pattern`, file by file."""
  for path in sorted(tf.io.gfile.glob(pattern)):
    for record in tf.data.TFRecordDataset(path):
      yield tf.compat.v1.Event.FromString(record.numpy())


def read_curve(model_dir: str) -> Dict[int, Dict[str, float]]:
  """{step: {metric: value}} of a run's evaluations ({} if none), by step.

  A step evaluated twice (a resumed run) keeps the later values.
  """
  pattern = os.path.join(model_dir, VALIDATION_SUBDIR, 'events.out.tfevents.*')
  curve: Dict[int, Dict[str, float]] = {}
  for event in events(pattern):
    for value in event.summary.value:
      if value.tag in _NOT_METRICS:
        continue
      number = (
          float(tf.make_ndarray(value.tensor))
          if value.HasField('tensor')
          else float(value.simple_value)
      )
      curve.setdefault(int(event.step), {})[value.tag] = number
  return dict(sorted(curve.items()))
