"""The learning-rate schedule of the original BERT and ELECTRA code.

lr(t) = PolynomialDecay(t) * min(1, t / warmup_steps), as google-research/
electra's `optimization.py`; Model Garden's warmup instead ramps to the
decayed rate, lower during warmup by up to `warmup_steps / train_steps`.
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
    """The schedule; `warmup_steps` 0 turns the warmup factor off."""
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
