"""The README's main job, end to end (slow: a few minutes on 2 cores)."""

import json
import os
import subprocess
import sys

import pytest

from official_repro.training import gin_utils


def _quickstart(work_dir):
  return subprocess.run(
      [
          sys.executable,
          '-m',
          'official_repro.quickstart',
          f'--work_dir={work_dir}',
      ],
      cwd=gin_utils.REPO_ROOT,
      capture_output=True,
      text=True,
      timeout=1200,
      check=False,
  )


@pytest.mark.slow
def test_quickstart_learns_and_summarizes(tmp_path):
  completed = _quickstart(tmp_path)
  assert completed.returncode == 0, completed.stderr[-3000:]
  assert 'held-out:    masked-LM accuracy' in completed.stdout
  with open(os.path.join(tmp_path, 'model', 'quickstart_summary.json')) as f:
    summary = json.load(f)
  assert summary['global_step'] == 1000
  assert summary['train']['examples_per_second'] > 0
  # Clearly above what a model that ignores context scores.
  baseline = summary['frequent_token']['accuracy']
  assert summary['eval']['masked_lm_accuracy'] > 2 * baseline, summary
  assert 'baseline:    masked-LM accuracy' in completed.stdout
  assert os.path.exists(summary['operative_config'])
  # A second call finds the finished run and only evaluates it again.
  again = _quickstart(tmp_path)
  assert again.returncode == 0, again.stderr[-3000:]
  assert 'none measured (no steps left to train' in again.stdout
  assert 'masked-LM accuracy 0.' in again.stdout
