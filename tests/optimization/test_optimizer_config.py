"""The gin optimizer front end builds the schedule and LAMB it promises."""

import numpy as np
import pytest
import tensorflow as tf

from official.modeling import optimization
from official_repro.optimization import optimizer_config


def _build(**kwargs):
  config = optimizer_config.optimization_config(
      train_steps=100, learning_rate=1e-3, warmup_steps=10, **kwargs
  )
  factory = optimization.OptimizerFactory(config)
  schedule = factory.build_learning_rate()
  return config, schedule, factory.build_optimizer(schedule)


def test_linear_warmup_then_linear_decay_to_zero():
  _, schedule, _ = _build()
  rates = np.array([float(schedule(step)) for step in range(101)])
  # Model Garden's warmup ramps to the decayed value at step 10 (0.9e-3).
  np.testing.assert_allclose(rates[:10], np.arange(10) / 10 * 0.9e-3, rtol=1e-5)
  # After warmup: 1e-3 * (1 - step / 100), reaching 0 at the last step.
  np.testing.assert_allclose(
      rates[10:], 1e-3 * (1 - np.arange(10, 101) / 100), rtol=1e-5, atol=1e-12
  )


def test_lamb_excludes_layer_norm_and_bias_from_weight_decay():
  config, _, optimizer = _build(weight_decay_rate=0.01, global_clipnorm=1.0)
  assert config.optimizer.type == 'lamb'
  assert type(optimizer).__name__ == 'LAMB'
  lamb = config.optimizer.lamb
  assert lamb.weight_decay_rate == 0.01
  assert set(lamb.exclude_from_weight_decay) == {
      'LayerNorm',
      'layer_norm',
      'bias',
  }
  assert lamb.global_clipnorm == 1.0
  # The optimizer itself decides per variable name.
  assert optimizer._do_use_weight_decay('encoder/dense/kernel')  # pylint: disable=protected-access
  assert not optimizer._do_use_weight_decay('encoder/layer_norm/gamma')  # pylint: disable=protected-access
  assert not optimizer._do_use_weight_decay('encoder/dense/bias')  # pylint: disable=protected-access


@pytest.mark.parametrize(
    'kwargs, message',
    [
        (dict(optimizer='sgd'), 'optimization.optimizer'),
        (dict(optimizer='adam', weight_decay_rate=0.01), 'weight_decay_rate'),
    ],
)
def test_bad_settings(kwargs, message):
  with pytest.raises(ValueError, match=message):
    optimizer_config.optimization_config(
        train_steps=10, learning_rate=1.0, **kwargs
    )


def test_warmup_longer_than_training():
  with pytest.raises(ValueError, match='warmup_steps'):
    optimizer_config.optimization_config(
        train_steps=10, learning_rate=1.0, warmup_steps=20
    )


def test_lamb_update_runs():
  _, _, optimizer = _build(weight_decay_rate=0.01)
  variable = tf.Variable(tf.ones([3]), name='dense/kernel')
  for _ in range(2):  # The learning rate is 0 at step 0 (warmup).
    optimizer.apply_gradients([(tf.ones([3]), variable)])
  assert np.all(variable.numpy() < 1.0)
