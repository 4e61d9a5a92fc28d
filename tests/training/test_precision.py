"""--mixed_precision: platform defaults, the loss scale, the policy."""

import pytest
import tensorflow as tf
import tf_keras

from official_repro.training import precision


def test_auto_is_bfloat16_on_tpus_float16_on_gpus_float32_on_cpus():
  assert precision.PLATFORM_DEFAULTS == {
      'TPU': 'bfloat16',
      'GPU': 'float16',
      'CPU': None,
  }
  cpu = tf.distribute.OneDeviceStrategy('/cpu:0')
  assert precision.device_type(cpu) == 'CPU'
  assert precision.resolve('auto', cpu) is None
  # The default strategy, as the benchmark and profile commands pass it.
  assert precision.device_type(tf.distribute.get_strategy()) == 'CPU'


@pytest.mark.parametrize(
    'choice, dtype',
    [('float32', None), ('bfloat16', 'bfloat16'), ('float16', 'float16')],
)
def test_an_explicit_choice_holds_on_any_platform(choice, dtype):
  assert precision.resolve(choice, tf.distribute.get_strategy()) == dtype


def test_unknown_choice_is_refused():
  with pytest.raises(ValueError, match='--mixed_precision'):
    precision.resolve('int8', tf.distribute.get_strategy())


def test_only_float16_gets_a_loss_scale():
  assert precision.runtime_config('float16').loss_scale == 'dynamic'
  assert precision.runtime_config('bfloat16').loss_scale is None
  assert precision.runtime_config(None).mixed_precision_dtype is None


def test_policy_is_restored_after_the_block():
  before = tf_keras.mixed_precision.global_policy().name
  with precision.policy('bfloat16'):
    assert tf_keras.mixed_precision.global_policy().name == 'mixed_bfloat16'
    assert tf_keras.layers.Dense(2).compute_dtype == 'bfloat16'
  assert tf_keras.mixed_precision.global_policy().name == before
