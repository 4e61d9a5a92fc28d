"""The discriminator-probe command's report: every source, as probed."""

import json

import pytest

from experiments.investigations import discriminator_probe
from experiments.investigations import discriminator_probe_lib

pytestmark = pytest.mark.slow


def test_every_source_is_probed_and_reported(tiny_electra_run, tmp_path):
  result = discriminator_probe_lib.probe(tiny_electra_run, steps=3)
  discriminator_probe.write_report(result, 'tiny', str(tmp_path), 'A tiny run.')
  with open(tmp_path / 'discriminator_probe_tiny.json') as f:
    result = json.load(f)
  assert result['step'] == 2 and result['batches'] >= 1
  sources = result['sources']
  assert set(sources) == set(discriminator_probe_lib.SOURCES)
  for metrics in sources.values():
    assert metrics['tokens'] == sources['generator']['tokens']
  # Context-free draws over a vocabulary of dozens rarely hit the original.
  assert sources['uniform']['unchanged_share_of_masked'] < 0.2
  assert (
      sources['uniform']['replaced_share']
      > sources['generator']['replaced_share'] * 0.5
  )
  replaced = round(
      sources['generator']['replaced_share'] * sources['generator']['tokens']
  )
  assert sum(b['replaced'] for b in result['plausibility']) == replaced
  report = (tmp_path / 'discriminator_probe_tiny.md').read_text()
  assert (
      'Command: `python -m experiments.investigations.discriminator_probe'
      in report
  )
  assert report.startswith(
      '# What the replaced-token detector detects: tiny\n\nA tiny run.\n'
  )
  assert (
      report.count('\n| [')
      == len(discriminator_probe_lib.PLAUSIBILITY_EDGES) - 1
  )
