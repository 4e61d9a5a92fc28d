"""Distribution strategies for CPU, GPUs, several hosts and Cloud TPU.

Over `official.common.distribute_utils`, adding what it lacks: splitting the
host CPU into logical devices so `MirroredStrategy` runs without accelerators
(the multi-replica tests), and checking `TF_CONFIG` so that a bad cluster
description stops with a message instead of silently training alone.
"""

import json
import os
from typing import Any, Dict, Optional

from absl import flags
import tensorflow as tf

from official.common import distribute_utils

from official_repro.common import cli

STRATEGIES = ('cpu', 'one_device', 'mirrored', 'multi_worker_mirrored', 'tpu')


def split_cpu(num_devices: int) -> None:
  """Exposes the host CPU as `num_devices` logical devices, before any op."""
  cpus = tf.config.list_physical_devices('CPU')
  try:
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * num_devices
    )
  except RuntimeError as error:
    existing = len(tf.config.list_logical_devices('CPU'))
    if existing != num_devices:
      raise RuntimeError(
          f'Cannot split the CPU into {num_devices} devices: TensorFlow '
          f'already initialized {existing}. Pass --num_cpu_devices before any '
          'TensorFlow op runs.'
      ) from error


def check_tf_config(environ: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
  """The parsed `TF_CONFIG` of `environ` (default `os.environ`), checked.

  UserError names what it lacks (JSON, cluster workers, a valid task).
  """
  environ = os.environ if environ is None else environ
  example = (
      'e.g. TF_CONFIG=\'{"cluster": {"worker": ["host0:12345", '
      '"host1:12345"]}, "task": {"type": "worker", "index": 0}}\''
  )
  raw = environ.get('TF_CONFIG')
  if not raw:
    raise cli.UserError(
        '--strategy=multi_worker_mirrored needs the TF_CONFIG environment '
        f'variable on every worker ({example}); for one host use '
        '--strategy=mirrored.'
    )
  try:
    config = json.loads(raw)
  except json.JSONDecodeError as error:
    raise cli.UserError(f'TF_CONFIG is not JSON ({error}): {raw!r}') from error
  cluster = config.get('cluster') if isinstance(config, dict) else None
  if not isinstance(cluster, dict) or not (
      cluster.get('worker') or cluster.get('chief')
  ):
    raise cli.UserError(
        f'TF_CONFIG has no cluster.worker list ({example}); ' f'got {raw!r}.'
    )
  task = config.get('task') or {}
  members = cluster.get(task.get('type')) if isinstance(task, dict) else None
  index = task.get('index') if isinstance(task, dict) else None
  if (
      not isinstance(members, list)
      or not isinstance(index, int)
      or not 0 <= index < len(members)
  ):
    raise cli.UserError(
        "TF_CONFIG task must name this process's place in the cluster, "
        '{"type": "worker", "index": i} with i in 0..'
        f'{len(cluster.get("worker") or [None]) - 1}; got {task!r}.'
    )
  return config


def get_strategy(
    name: str,
    tpu_address: Optional[str] = None,
    num_gpus: int = 0,
    num_cpu_devices: int = 1,
) -> tf.distribute.Strategy:
  """Returns the strategy for a `--strategy` value (see `define_flags`).

  'mirrored' uses `num_gpus` GPUs (0: all), or without GPUs
  `num_cpu_devices` logical CPUs.
  """
  if name not in STRATEGIES:
    raise cli.UserError(
        f'--strategy must be one of {STRATEGIES}, got {name!r}.'
    )
  if name == 'tpu':
    try:
      return distribute_utils.get_distribution_strategy(
          distribution_strategy='tpu', tpu_address=tpu_address or ''
      )
    except (ValueError, OSError, tf.errors.OpError, RuntimeError) as error:
      raise cli.UserError(
          f'--strategy=tpu: no TPU reachable at --tpu={tpu_address!r} '
          f'({str(error).splitlines()[0][:200]}); run on a Cloud TPU VM '
          '(--tpu=local) or name the TPU.'
      ) from error
  if name == 'multi_worker_mirrored':
    check_tf_config()
    return tf.distribute.MultiWorkerMirroredStrategy()
  gpus = tf.config.list_physical_devices('GPU')
  if num_gpus > len(gpus):
    raise cli.UserError(
        f'--num_gpus={num_gpus}, but this host has {len(gpus)} GPU(s) '
        'visible to TensorFlow; lower --num_gpus or run where they are.'
    )
  if name == 'cpu':
    return tf.distribute.OneDeviceStrategy('/cpu:0')
  if name == 'one_device':
    return tf.distribute.OneDeviceStrategy('/gpu:0' if gpus else '/cpu:0')
  if gpus:
    count = num_gpus or len(gpus)
    return tf.distribute.MirroredStrategy(
        devices=[f'/gpu:{i}' for i in range(count)]
    )
  if num_cpu_devices > 1:
    split_cpu(num_cpu_devices)
  return tf.distribute.MirroredStrategy(
      devices=[f'/cpu:{i}' for i in range(max(1, num_cpu_devices))]
  )


def define_flags() -> None:
  """Defines --strategy, --tpu, --num_gpus and --num_cpu_devices."""
  flags.DEFINE_enum(
      'strategy', 'one_device', list(STRATEGIES), 'Distribution strategy.'
  )
  flags.DEFINE_string(
      'tpu',
      '',
      'TPU name or address for --strategy=tpu: '
      "'local' on a single-host Cloud TPU VM, the TPU's name "
      'on a multi-host slice (pod).',
  )
  flags.DEFINE_integer(
      'num_gpus', 0, 'GPUs for --strategy=mirrored ' '(0: all visible).'
  )
  flags.DEFINE_integer(
      'num_cpu_devices',
      1,
      'Logical CPU devices for --strategy=mirrored on a host without GPUs.',
  )


def strategy_from_flags() -> tf.distribute.Strategy:
  """The strategy the flags of `define_flags` ask for."""
  return get_strategy(
      flags.FLAGS.strategy,
      tpu_address=flags.FLAGS.tpu,
      num_gpus=flags.FLAGS.num_gpus,
      num_cpu_devices=flags.FLAGS.num_cpu_devices,
  )
