"""The learning-rate schedule of the original BERT and ELECTRA code.

google-research/electra's `model/optimization.py` (as BERT's) multiplies
the polynomial decay from step 0 by a linear warmup factor:

    lr(t) = decay(t) * min(1, t / warmup_steps)

so that the rate at step t < warmup_steps is `(t / W) * decay(t)`. Model
Garden's linear warmup instead ramps to the decayed rate at `warmup_steps`
(`optimizer_config.learning_rate_config`), a rate lower during warmup by up
to `warmup_steps / train_steps` (10% for GLUE's 10% warmup). The decay is
Keras' `PolynomialDecay`; only the product is new.
"""

import tensorflow as tf
import tf_keras


@tf_keras.utils.register_keras_serializable(package='official_repro')
class WarmupTimesPolynomialDecay(
    tf_keras.optimizers.schedules.LearningRateSchedule
):
  """`PolynomialDecay(t) * min(1, t / warmup_steps)` (no warmup when 0)."""

  def __init__(
      self,
      initial_learning_rate: float,
      decay_steps: int,
      warmup_steps: int,
      end_learning_rate: float = 0.0,
      power: float = 1.0,
  ):
    """The schedule; see the module docstring.

    Args:
      initial_learning_rate: the rate at step 0 before the warmup factor.
      decay_steps: steps of the polynomial decay (the run's train steps).
      warmup_steps: steps of the linear warmup factor; 0 turns it off.
      end_learning_rate: the decayed rate at `decay_steps`.
      power: the decay's power (1: linear).

    Raises:
      ValueError: `decay_steps` not positive or `warmup_steps` negative.
    """
    super().__init__()
    if decay_steps <= 0 or warmup_steps < 0:
      raise ValueError(
          f'decay_steps={decay_steps} must be positive and '
          f'warmup_steps={warmup_steps} not negative.'
      )
    self.initial_learning_rate = initial_learning_rate
    self.decay_steps = decay_steps
    self.warmup_steps = warmup_steps
    self.end_learning_rate = end_learning_rate
    self.power = power
    self._decay = tf_keras.optimizers.schedules.PolynomialDecay(
        initial_learning_rate, decay_steps, end_learning_rate, power
    )

  def __call__(self, step):
    rate = self._decay(step)
    if not self.warmup_steps:
      return rate
    step = tf.cast(step, rate.dtype)
    warmup = tf.cast(self.warmup_steps, rate.dtype)
    return rate * tf.minimum(tf.constant(1.0, rate.dtype), step / warmup)

  def get_config(self):
    return dict(
        initial_learning_rate=self.initial_learning_rate,
        decay_steps=self.decay_steps,
        warmup_steps=self.warmup_steps,
        end_learning_rate=self.end_learning_rate,
        power=self.power,
    )
