"""The non-finite loss guard: a diverged run stops before its checkpoint.

A NaN or infinite training loss raises `NonFiniteLossError` naming the
steps and the last good checkpoint. The trainer checks at the end of each
train loop, before Orbit saves a checkpoint, so the checkpoint on disk is
never one written after the loss diverged. The error is the settings', not a
bug (a `cli.UserError`): the commands print it as one line.
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
  """Stops a training loop whose loss is not finite.

  Args:
    loss: the loop's training loss (a scalar, or a scalar tensor).
    first_step: the loop's first global step.
    end_step: its last.
    model_dir: the run's directory, for the last good checkpoint.

  Raises:
    NonFiniteLossError: `loss` is NaN or infinite; the message names the
      steps, the last checkpoint of `model_dir` and the settings to change.
  """
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
