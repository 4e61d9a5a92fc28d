"""Tests of official_repro.training.step_logging."""

from absl import logging
import numpy as np

from official_repro.training import step_logging


def test_a_loop_adds_its_global_examples_per_second_and_logs_one_line(
    monkeypatch,
):
  lines = []
  monkeypatch.setattr(
      logging, 'info', lambda message, *args: lines.append(message % args)
  )
  loop_log = step_logging.LoopLog(clock=iter([10.0, 14.0]).__next__)
  loop_log.begin(100)
  logs = {'training_loss': np.float32(2.5)}
  values = loop_log.end(logs, 103, global_batch_size=8)
  # Steps 101-103, 3 x 8 examples in 4 s.
  assert logs['examples_per_second'] == values['examples_per_second'] == 6.0
  assert values['training_loss'] == 2.5
  assert isinstance(values['training_loss'], float)
  assert lines == [
      "steps 101-103: {'training_loss': 2.5, 'examples_per_second': 6.0}"
  ]


def test_a_loop_without_measurable_time_has_no_throughput():
  loop_log = step_logging.LoopLog(clock=iter([5.0, 5.0]).__next__)
  loop_log.begin(0)
  assert 'examples_per_second' not in loop_log.end({'loss': 1.0}, 2, 8)
