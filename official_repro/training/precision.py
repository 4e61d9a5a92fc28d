"""The precision a run computes in: by platform, or as `--mixed_precision`.

`auto`: bfloat16 on TPUs and float16 with dynamic loss scaling on GPUs (as
Model Garden's configs set), float32 on CPUs; or `float32`, `bfloat16`,
`float16` anywhere. Variables stay float32; logits, losses and metrics are
taken in float32.
"""

import contextlib
from typing import Iterator, Optional

from absl import flags
import tensorflow as tf
import tf_keras

from official.core import config_definitions as cfg

from official_repro.common import cli

CHOICES = ('auto', 'float32', 'bfloat16', 'float16')
# The 16-bit type each platform runs by default (None: float32).
PLATFORM_DEFAULTS = {'TPU': 'bfloat16', 'GPU': 'float16', 'CPU': None}


def define_flags() -> None:
  """Defines --mixed_precision."""
  flags.DEFINE_enum(
      'mixed_precision',
      'auto',
      list(CHOICES),
      'Compute precision: auto (bfloat16 on TPUs, float16 with loss scaling '
      'on GPUs, float32 on CPUs), or float32, bfloat16 or float16 anywhere.',
  )


def device_type(strategy: tf.distribute.Strategy) -> str:
  """'TPU', 'GPU' or 'CPU': what the strategy's replicas run on.

  The default strategy runs where ops are placed: a GPU if one is visible.
  """
  if isinstance(strategy, tf.distribute.TPUStrategy):
    return 'TPU'
  if (
      strategy is tf.distribute.get_strategy()
      and not tf.distribute.has_strategy()
  ):
    devices = [device.name for device in tf.config.list_logical_devices()]
  else:
    devices = strategy.extended.worker_devices
  if any(
      tf.DeviceSpec.from_string(device).device_type == 'GPU'
      for device in devices
  ):
    return 'GPU'
  return 'CPU'


def resolve(choice: str, strategy: tf.distribute.Strategy) -> Optional[str]:
  """'bfloat16', 'float16' or None (float32) for `--mixed_precision=choice`."""
  if choice not in CHOICES:
    raise cli.UserError(
        f'--mixed_precision must be one of {CHOICES}, got ' f'{choice!r}.'
    )
  if choice == 'auto':
    return PLATFORM_DEFAULTS[device_type(strategy)]
  return None if choice == 'float32' else choice


def runtime_config(dtype: Optional[str]) -> cfg.RuntimeConfig:
  """Model Garden's runtime config of a compute type (float16: loss-scaled)."""
  return cfg.RuntimeConfig(
      mixed_precision_dtype=dtype,
      loss_scale='dynamic' if dtype == 'float16' else None,
  )


@contextlib.contextmanager
def policy(dtype: Optional[str]) -> Iterator[None]:
  """Keras' global policy `mixed_<dtype>` (float32 for None) in the block."""
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy(
      f'mixed_{dtype}' if dtype else 'float32'
  )
  try:
    yield
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)
