"""Epoch/batch fine-tuning settings to steps."""

import pytest

from official_repro.tasks import finetuning_schedule


def test_steps_from_epochs():
  schedule = finetuning_schedule.FinetuningSchedule(
      task='rte',
      learning_rate=3e-4,
      train_batch_size=32,
      num_epochs=10,
      warmup_fraction=0.1,
  )
  # RTE has 2,490 training examples: ceil(10 * 2490 / 32) = 779.
  assert schedule.train_steps(2490) == 779
  assert schedule.warmup_steps(2490) == 77


@pytest.mark.parametrize(
    'kwargs, message',
    [
        (dict(task='wnli'), 'finetuning.task'),
        (dict(train_batch_size=0), 'train_batch_size'),
        (dict(warmup_fraction=1.0), 'warmup_fraction'),
    ],
)
def test_bad_settings(kwargs, message):
  fields = dict(
      task='rte', learning_rate=1e-4, train_batch_size=8, num_epochs=1
  )
  fields.update(kwargs)
  with pytest.raises(ValueError, match=message):
    finetuning_schedule.FinetuningSchedule(**fields)
