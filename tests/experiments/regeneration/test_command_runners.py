"""Tests of experiments.regeneration.command_runners."""

import json

from experiments import attention_concentration
from experiments.regeneration import command_runners
from experiments.regeneration import registry


def test_command_targets_write_their_table_as_markdown_and_json(tmp_path):
  row = dict(
      label='ConvBERT',
      backbone='convbert',
      num_layers=4,
      num_heads=2,
      num_examples=408,
      num_maps=3264,
      num_excluded=0,
      mean_concentration=0.215,
      mass_ratio=0.198,
      uniform_concentration=0.210,
      paper=0.608,
  )
  results = dict(
      settings=dict(
          window=4, task='mrpc', split='dev', data_file='MRPC/dev.tsv'
      ),
      rows=[row],
  )
  target = registry.get('002.1')
  command_runners.write_command_table(
      target,
      str(tmp_path),
      attention_concentration.format_table(results),
      results,
      header='Scale: tiny.',
  )
  with open(tmp_path / '002.1.md') as f:
    text = f.read()
  assert text.startswith('## 002.1: attention-map diagonal concentration')
  assert 'Scale: tiny.' in text
  assert (
      '| ConvBERT | convbert | 4 x 2 | 408 | 3264 | 0 | 0.215 | 0.198 | '
      '0.210 | 0.608 |'
  ) in text
  with open(tmp_path / '002.1.json') as f:
    written = json.load(f)
  assert written['results'] == results
  assert (written['target'], written['header']) == ('002.1', 'Scale: tiny.')
