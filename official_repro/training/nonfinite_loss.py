"""The non-finite loss guard: a diverged run stops before its checkpoint.

The trainer checks each loop's loss before Orbit saves a checkpoint, so none
on disk was written after divergence. `NonFiniteLossError` is a
`cli.UserError` (the settings', not a bug) naming the steps and the last good
checkpoint.
"""

from typing import Optional

import numpy as np
import tensorflow as tf

from official_repro.common import cli


class NonFiniteLossError(cli.UserError, FloatingPointError):
  """The training loss became NaN or infinite."""


def check(
    loss, first_step: int, end_step: int, model_dir: Optional[str]
) -> None:
  """Raises `NonFiniteLossError` if the loop's (scalar) loss is not finite."""
  loss = float(np.asarray(loss))
  if np.isfinite(loss):
    return
  last_checkpoint = tf.train.latest_checkpoint(model_dir) if model_dir else None
  steps = (
      f'step {end_step}'
      if first_step == end_step
      else f'steps {first_step}-{end_step}'
  )
  raise NonFiniteLossError(
      f'Training loss became {loss} at {steps}. Stopped before '
      'saving a checkpoint; the last good checkpoint is '
      f'{last_checkpoint or "none (no checkpoint was written yet)"}. '
      'Lower the learning rate (optimization.learning_rate; in fine-tuning '
      'finetuning.learning_rate), raise the warmup or set '
      'optimization.global_clipnorm, then resume.'
  )
