"""Tests for experiments.precision_speed (parsing and the report table)."""

import pytest

from experiments import precision_speed
from official_repro.common import cli


def test_parse_configs_pairs_names_with_gin_files(tmp_path):
  gin_file = tmp_path / 'a.gin'
  gin_file.write_text('')
  assert precision_speed.parse_configs([f'small={gin_file}']) == [
      ('small', str(gin_file))]


@pytest.mark.parametrize('spec', ['small', '=x.gin', 'small=/no/such.gin'])
def test_parse_configs_refuses_bad_specs(spec):
  with pytest.raises(cli.UserError, match='--configs'):
    precision_speed.parse_configs([spec])


def test_table_compares_each_precision_with_the_first():
  points = [
      dict(config='c', precision='float32', steps_per_second=4.0,
           first_step_loss=10.0),
      dict(config='c', precision='bfloat16', steps_per_second=1.0,
           first_step_loss=10.05),
  ]
  table = precision_speed.format_table(points, 'header')
  rows = [line for line in table.splitlines() if line.startswith('| c |')]
  assert rows[0].split('|')[4].strip() == '1.00x'
  assert rows[1].split('|')[4].strip() == '0.25x'
  assert rows[1].split('|')[6].strip() == '5.00e-03'
