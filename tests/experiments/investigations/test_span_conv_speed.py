"""experiments/investigations/span_conv_speed.py on tiny shapes."""

import json

import numpy as np
import pytest
import tensorflow as tf

from experiments.investigations import span_conv_speed
from official_repro.modeling.layers import span_dynamic_conv
from tests import report_header

pytestmark = pytest.mark.slow


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
  markdown_path = tmp_path / 'speed.md'
  json_path = tmp_path / 'speed.json'
  command = [
      'experiments.investigations.span_conv_speed',
      '--shapes=2x40,1x20',
      '--num_heads=2',
      '--head_size=4',
      '--kernel_size=5',
      '--iterations=2',
      f'--output_markdown={markdown_path}',
      f'--output_json={json_path}',
  ]
  result = python_m(command)
  assert result.returncode == 0, result.stderr[-3000:]
  with open(json_path) as f:
    output = json.load(f)
  rows = output['rows']
  assert [
      (
          row['batch_size'],
          row['seq_length'],
          row['jit_compile'],
          row['backward'],
      )
      for row in rows
  ] == [
      (batch_size, seq_length, jit_compile, backward)
      for batch_size, seq_length in ((2, 40), (1, 20))
      for jit_compile in (False, True)
      for backward in (False, True)
  ]
  for row in rows:
    assert row['slices_ms'] > 0 and row['banded_ms'] > 0
    assert row['speedup'] == pytest.approx(row['slices_ms'] / row['banded_ms'])
    assert row['max_abs_difference'] < 1e-5
  markdown = markdown_path.read_text()
  # The report is what the command printed.
  assert markdown in result.stdout
  lines = markdown.splitlines()
  assert lines[0].startswith("# ConvBERT's k-tap span convolution")
  report_header.assert_header(lines, command)
  assert output['provenance'] == lines[2]
  assert lines[6].startswith("N' = 2 heads of H = 4, k = 5; ")
  assert 'the median of 2 calls' in lines[6]
  table = [
      line for line in lines if line.startswith(('| 2 x 40 |', '| 1 x 20 |'))
  ]
  assert [row.split(' | ')[1:3] for row in table] == 2 * [
      ['no', 'fwd'],
      ['no', 'fwd+bwd'],
      ['yes', 'fwd'],
      ['yes', 'fwd+bwd'],
  ]
  assert table == span_conv_speed.format_rows(rows).splitlines()[2:]
  assert lines[-1] == span_conv_speed.format_summary(rows)


def test_summary_gives_the_range_of_each_mode_over_the_shapes():
  rows = [
      dict(jit_compile=jit_compile, backward=backward, speedup=speedup)
      for speedup in (0.9, 2.5)
      for jit_compile in (False, True)
      for backward in (False, True)
  ]
  rows[-1]['speedup'] = 3.0
  assert span_conv_speed.format_summary(rows) == (
      'Slices / banded over the shapes (above 1: banded is faster): fwd '
      '0.90-2.50; fwd+bwd 0.90-2.50; XLA fwd 0.90-2.50; XLA fwd+bwd '
      '0.90-3.00.'
  )
