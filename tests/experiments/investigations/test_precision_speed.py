"""investigations.precision_speed: parsing, the report table, the command."""

import json

import pytest

from experiments.investigations import precision_speed
from official_repro.common import cli

pytestmark = pytest.mark.slow


def test_parse_configs_pairs_names_with_gin_files(tmp_path):
  gin_file = tmp_path / 'a.gin'
  gin_file.write_text('')
  assert precision_speed.parse_configs([f'small={gin_file}']) == [
      ('small', [str(gin_file)])
  ]


@pytest.mark.parametrize('spec', ['small', '=x.gin', 'small=/no/such.gin'])
def test_parse_configs_refuses_bad_specs(spec):
  with pytest.raises(cli.UserError, match='--configs'):
    precision_speed.parse_configs([spec])


def test_table_compares_each_precision_with_the_first():
  points = [
      dict(
          config='c',
          precision='float32',
          steps_per_second=4.0,
          first_step_loss=10.0,
      ),
      dict(
          config='c',
          precision='bfloat16',
          steps_per_second=1.0,
          first_step_loss=10.05,
      ),
  ]
  table = precision_speed.format_table(points, 'header')
  rows = [line for line in table.splitlines() if line.startswith('| c |')]
  assert rows[0].split('|')[4].strip() == '1.00x'
  assert rows[1].split('|')[4].strip() == '0.25x'
  assert rows[1].split('|')[6].strip() == '5.00e-03'


def test_cpu_line_names_the_model_and_which_extensions_it_has():
  cpuinfo = (
      'processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 fma\n\n'
      'processor\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 fma\n'
  )
  assert precision_speed.cpu_line(cpuinfo) == (
      'CPU: AMD EPYC; extensions: avx2 (none of avx512f, avx512_bf16, '
      'amx_bf16).'
  )
  cpuinfo = (
      'model name\t: Intel Xeon\nflags\t\t: avx2 avx512f avx512_bf16 '
      'amx_bf16 amx_tile\n'
  )
  assert precision_speed.cpu_line(cpuinfo) == (
      'CPU: Intel Xeon; extensions: avx2, avx512f, avx512_bf16, amx_bf16.'
  )
  cpuinfo = 'model name\t: Old\nflags\t\t: fpu sse2\n'
  assert precision_speed.cpu_line(cpuinfo) == (
      'CPU: Old; extensions: none of avx2, avx512f, avx512_bf16, amx_bf16.'
  )


def test_cpu_line_without_cpuinfo_says_unknown(monkeypatch):
  def no_file(*args, **kwargs):
    raise OSError('no /proc')

  monkeypatch.setattr('builtins.open', no_file)
  assert precision_speed.cpu_line().startswith('CPU: unknown (')


def test_command_measures_the_same_first_loss_in_both_precisions(
    tmp_path, python_m
):
  """The tiny ELECTRA config, one step per precision.

  The tiny ELECTRA config, one step per precision: the first-step losses
  are the same seeded weights and batch, so bfloat16's is within 3% of
  float32's, and neither is zero (a loss read after the metrics reset).
  """
  markdown = tmp_path / 'table.md'
  output_json = tmp_path / 'points.json'
  completed = python_m(
      [
          'experiments.investigations.precision_speed',
          '--configs=tiny_electra=gin/sizes/tiny.gin,gin/pretrain/electra.gin',
          '--gin_param=pretrain_data.train_batch_size=2',
          '--gin_param=pretrain_data.max_seq_length=16',
          '--gin_param=optimization.learning_rate=1e-3',
          '--gin_param=experiment.train_steps=10',
          '--gin_param=electra.generator_size=0.5',
          '--steps=1',
          '--warmup_steps=0',
          f'--work_dir={tmp_path / "work"}',
          f'--output_markdown={markdown}',
          f'--output_json={output_json}',
      ],
      timeout=600,
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  with open(output_json) as f:
    data = json.load(f)
  points = data['points']
  assert data['cpu'] == precision_speed.cpu_line()
  assert precision_speed.cpu_line() in markdown.read_text()
  assert 'Load average (1 min) at the start: ' in markdown.read_text()
  assert [p['precision'] for p in points] == ['float32', 'bfloat16']
  float32, bfloat16 = (p['first_step_loss'] for p in points)
  assert float32 > 1.0
  assert abs(bfloat16 - float32) <= 0.03 * float32
  assert 'tiny_electra' in markdown.read_text()
