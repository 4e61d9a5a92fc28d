"""experiments/span_conv_speed.py on tiny shapes."""

import json

import numpy as np
import pytest
import tensorflow as tf

from experiments import span_conv_speed
from official_repro.modeling.layers import span_dynamic_conv


@pytest.mark.parametrize('causal', [False, True])
def test_the_replaced_formulation_computes_the_same_sum(causal):
  rng = np.random.default_rng(0)
  values = tf.constant(rng.normal(size=(2, 37, 2, 3)).astype(np.float32))
  kernel = tf.constant(rng.normal(size=(2, 37, 2, 5)).astype(np.float32))
  np.testing.assert_allclose(
      span_conv_speed.shifted_slices_sum(values, kernel, causal),
      span_dynamic_conv.apply_dynamic_kernel(values, kernel, causal),
      rtol=1e-5,
      atol=1e-5,
  )


def test_cli_times_both_formulations_in_every_mode(tmp_path, python_m):
  output = str(tmp_path / 'speed.json')
  result = python_m(
      [
          'experiments.span_conv_speed',
          '--shapes=2x40',
          '--num_heads=2',
          '--head_size=4',
          '--kernel_size=5',
          '--iterations=2',
          f'--output_json={output}',
      ]
  )
  assert result.returncode == 0, result.stderr[-3000:]
  with open(output) as f:
    rows = json.load(f)['rows']
  assert [(row['jit_compile'], row['backward']) for row in rows] == [
      (False, False),
      (False, True),
      (True, False),
      (True, True),
  ]
  for row in rows:
    assert row['slices_ms'] > 0 and row['banded_ms'] > 0
    assert row['speedup'] == pytest.approx(row['slices_ms'] / row['banded_ms'])
    assert row['max_abs_difference'] < 1e-5
  assert result.stdout.count('| 2 x 40 |') == 4
