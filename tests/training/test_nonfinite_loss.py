"""Tests of official_repro.training.nonfinite_loss."""

import numpy as np
import pytest
import tensorflow as tf

from official_repro.training import nonfinite_loss


def test_a_finite_loss_passes(tmp_path):
  nonfinite_loss.check(np.float32(3.0), 1, 5, str(tmp_path))


@pytest.mark.parametrize(
    'loss, first_step, end_step, steps',
    [(np.nan, 4, 4, 'step 4'), (np.inf, 3, 6, 'steps 3-6')],
)
def test_a_non_finite_loss_names_the_steps_and_the_last_checkpoint(
    tmp_path, loss, first_step, end_step, steps
):
  checkpoint = tf.train.Checkpoint(step=tf.Variable(2))
  path = checkpoint.save(str(tmp_path / 'ckpt'))
  with pytest.raises(nonfinite_loss.NonFiniteLossError) as raised:
    nonfinite_loss.check(loss, first_step, end_step, str(tmp_path))
  message = str(raised.value)
  assert f'at {steps}.' in message
  assert f'the last good checkpoint is {path}.' in message
  assert 'optimization.learning_rate' in message


def test_a_non_finite_loss_before_any_checkpoint_says_so():
  with pytest.raises(nonfinite_loss.NonFiniteLossError, match='none \\(no'):
    nonfinite_loss.check(float('nan'), 1, 1, None)
