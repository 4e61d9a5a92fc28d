"""The original BERT/ELECTRA schedule against its closed form, step by step."""

import numpy as np
import pytest
import tf_keras

from official_repro.optimization import warmup_times_decay


def _closed_form(step, initial, decay_steps, warmup, end, power):
  """google-research/electra's rate: polynomial decay times min(1, t/W)."""
  t = min(step, decay_steps)
  decayed = (initial - end) * (1 - t / decay_steps) ** power + end
  return decayed * (min(1.0, step / warmup) if warmup else 1.0)


@pytest.mark.parametrize(
    'warmup,end,power', [(10, 0.0, 1.0), (0, 0.0, 1.0), (25, 1e-5, 2.0)]
)
def test_every_step_equals_the_closed_form(warmup, end, power):
  schedule = warmup_times_decay.WarmupTimesPolynomialDecay(
      initial_learning_rate=1e-3,
      decay_steps=100,
      warmup_steps=warmup,
      end_learning_rate=end,
      power=power,
  )
  for step in range(0, 121):
    expected = _closed_form(step, 1e-3, 100, warmup, end, power)
    np.testing.assert_allclose(
        float(schedule(step)), expected, rtol=1e-5, atol=1e-12
    )


def test_warmup_ramps_to_the_decayed_rate_not_the_initial_one():
  schedule = warmup_times_decay.WarmupTimesPolynomialDecay(1.0, 100, 10)
  # At the end of warmup the rate is decay(10) = 0.9, not 1.0 (the
  # difference from Model Garden's linear warmup).
  np.testing.assert_allclose(float(schedule(10)), 0.9, rtol=1e-6)
  np.testing.assert_allclose(float(schedule(5)), 0.5 * 0.95, rtol=1e-6)


def test_config_round_trips_through_keras_serialization():
  schedule = warmup_times_decay.WarmupTimesPolynomialDecay(
      3e-4, 1000, 100, end_learning_rate=1e-6, power=0.5
  )
  rebuilt = tf_keras.optimizers.schedules.deserialize(
      tf_keras.optimizers.schedules.serialize(schedule)
  )
  assert isinstance(rebuilt, warmup_times_decay.WarmupTimesPolynomialDecay)
  assert rebuilt.get_config() == schedule.get_config()
  for step in (0, 50, 100, 999):
    assert float(rebuilt(step)) == float(schedule(step))


@pytest.mark.parametrize('decay_steps,warmup', [(0, 10), (-5, 0), (10, -1)])
def test_bad_steps_are_refused(decay_steps, warmup):
  with pytest.raises(ValueError, match='decay_steps'):
    warmup_times_decay.WarmupTimesPolynomialDecay(1.0, decay_steps, warmup)
