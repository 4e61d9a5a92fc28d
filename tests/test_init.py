"""Tests of the environment the package sets before TensorFlow imports."""

import os
import subprocess
import sys

import pytest

_PROBE = (
    'import official_repro, os, tensorflow as tf; '
    "print(os.environ['TF_USE_LEGACY_KERAS'], tf.keras.__name__); "
    'tf.config.list_physical_devices()'
)


def _run(**env_changes):
  env = {
      k: v
      for k, v in os.environ.items()
      if k not in ('TF_CPP_MIN_LOG_LEVEL', 'TF_USE_LEGACY_KERAS')
  }
  env.update(env_changes)
  return subprocess.run(
      [sys.executable, '-c', _PROBE],
      env=env,
      capture_output=True,
      text=True,
      timeout=300,
      check=True,
  )


@pytest.mark.slow
@pytest.mark.skipif(
    os.path.exists('/proc/driver/nvidia'), reason='a GPU driver is present'
)
def test_keras_2_and_no_tensorflow_start_up_lines_on_a_cpu_machine():
  quiet = _run()
  assert quiet.stdout.split()[0] == '1'
  assert quiet.stdout.split()[1].startswith('tf_keras')
  assert quiet.stderr == ''
  # The usual variable brings TensorFlow's lines back.
  loud = _run(TF_CPP_MIN_LOG_LEVEL='0')
  assert 'cpu_feature_guard' in loud.stderr or 'cuInit' in loud.stderr
