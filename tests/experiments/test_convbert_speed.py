"""002 Table 2 driver (experiments/convbert_speed.py) on tiny blocks."""

import json

import pytest

from experiments import convbert_speed
from tests import report_header

_TINY = convbert_speed.BlockSizes(
    hidden_size=32, num_heads=2, intermediate_size=64
)


@pytest.mark.slow
def test_cli_prints_both_blocks_and_writes_the_report(tmp_path, python_m):
  markdown_path = tmp_path / 'speed.md'
  json_path = tmp_path / 'speed.json'
  command = [
      'experiments.convbert_speed',
      '--hidden_size=32',
      '--num_heads=2',
      '--intermediate_size=64',
      '--seq_lengths=16,24',
      '--iterations=2',
      '--warmup=1',
      f'--output_markdown={markdown_path}',
      f'--output_json={json_path}',
  ]
  result = python_m(command, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  markdown = markdown_path.read_text()
  # The report is what the command printed.
  assert markdown in result.stdout
  lines = markdown.splitlines()
  assert lines[0].startswith('# 002 Table 2')
  report_header.assert_header(lines, command)
  assert 'batch 1; no XLA; ' in lines[6]
  assert '2 timed iterations after 1 warmup' in lines[6]
  table_rows = {
      length: [line for line in lines if line.startswith(f'| {length} |')]
      for length in (16, 24)
  }
  for rows in table_rows.values():
    assert [row.split(' | ')[1] for row in rows] == [
        'self-attention',
        'mixed-attention',
        'mixed / self',
    ]
  with open(json_path) as f:
    output = json.load(f)
  assert output['provenance'] == lines[2]
  assert [row['seq_length'] for row in output['rows']] == [16, 16, 24, 24]
  assert [row['block'] for row in output['rows']] == 2 * list(
      convbert_speed.BLOCKS
  )
  for row in output['rows']:
    for key in (
        'parameters',
        'flops',
        'matmul_flops',
        'xla_matmul_flops',
        'ms_per_sample',
    ):
      assert row[key] > 0, (row['block'], key)
    assert len(row['ms_per_sample_all']) == 2
    # XLA's dot/convolution count is the formula's matmul terms, plus the
    # banded k-tap contraction for mixed attention: 1 block of 32 positions
    # reaching 40 values, 1 convolution head of 16.
    contraction = 2 * 32 * 40 * 16 if row['block'] == 'mixed-attention' else 0
    assert row['compiled_matmul_flops'] == row['matmul_flops'] + contraction
    assert row['xla_matmul_flops'] == row['compiled_matmul_flops']
  for length in (16, 24):
    flops_by_block = {
        row['block']: row['flops']
        for row in output['rows']
        if row['seq_length'] == length
    }
    assert flops_by_block['mixed-attention'] < flops_by_block['self-attention']
  # experiments.regenerate renders 002 Table 2 from this JSON: the same
  # table as the report.
  rendered = convbert_speed.format_table(output['rows']).splitlines()
  assert rendered[2:] == table_rows[16] + table_rows[24]
  assert convbert_speed.format_matches(output['paper_matches']) in markdown


@pytest.mark.slow
def test_measure_with_xla():
  rows = convbert_speed.measure(
      _TINY, [8], batch_size=2, iterations=1, warmup=0, jit_compile=True
  )
  assert len(rows) == 2
  assert all(row['ms_per_sample'] > 0 for row in rows)
  assert all(
      row['xla_matmul_flops'] == row['compiled_matmul_flops'] for row in rows
  )


def test_seq_length_for_flops_is_the_first_length_reaching_the_target():
  target = _TINY.sequence_flops(convbert_speed.MIXED_ATTENTION, 40)
  found = convbert_speed.seq_length_for_flops(
      _TINY, convbert_speed.MIXED_ATTENTION, target
  )
  assert found == 40
  assert (
      convbert_speed.seq_length_for_flops(
          _TINY, convbert_speed.MIXED_ATTENTION, target + 1
      )
      == 41
  )
