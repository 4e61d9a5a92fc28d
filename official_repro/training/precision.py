"""The precision a run computes in: by platform, or as `--mixed_precision`.

`--mixed_precision` (training, fine-tuning, `experiments.glue_suite`,
`run_tpu.sh`):

  * `auto` (default): what each platform's users run. bfloat16 on TPUs, as
    Model Garden's TPU experiment configs set
    (`runtime.mixed_precision_dtype: 'bfloat16'`); float16 with dynamic loss
    scaling on GPUs, as its GPU configs set; float32 on CPUs.
  * `float32`, `bfloat16`, `float16`: that, on any platform (float16 always
    with dynamic loss scaling).

Under `bfloat16` and `float16` Keras' mixed policies compute in the 16-bit
type and keep every variable in float32; the tasks take the logits, their
softmaxes and log-sum-exps, the losses and the metrics in float32
(`tasks/pretraining.py`, the fine-tuning tasks' losses).
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

  The default strategy (`tf.distribute.get_strategy()` outside any scope)
  has no worker devices: it runs where TensorFlow places ops, on a GPU if
  one is visible.
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
  """The 16-bit compute type of `--mixed_precision=choice`.

  The 16-bit compute type of `--mixed_precision=choice` under `strategy`
  ('bfloat16' or 'float16'), or None for float32.

  Raises:
    ValueError: for a choice outside `CHOICES`.
  """
  if choice not in CHOICES:
    raise cli.UserError(
        f'--mixed_precision must be one of {CHOICES}, got ' f'{choice!r}.'
    )
  if choice == 'auto':
    return PLATFORM_DEFAULTS[device_type(strategy)]
  return None if choice == 'float32' else choice


def runtime_config(dtype: Optional[str]) -> cfg.RuntimeConfig:
  """Model Garden's runtime config of a compute type.

  Model Garden's runtime config of a compute type: float16 gets a
  dynamic loss scale, which makes Model Garden wrap the optimizer in a
  `LossScaleOptimizer`.
  """
  return cfg.RuntimeConfig(
      mixed_precision_dtype=dtype,
      loss_scale='dynamic' if dtype == 'float16' else None,
  )


@contextlib.contextmanager
def policy(dtype: Optional[str]) -> Iterator[None]:
  """Sets Keras' global policy for the block.

  Keras' global policy `mixed_<dtype>` (float32 for None) inside the
  block; the previous policy after it.
  """
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy(
      f'mixed_{dtype}' if dtype else 'float32'
  )
  try:
    yield
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)
