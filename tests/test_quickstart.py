"""The README's main job: end to end (slow), and the summary it quotes."""

import json
import os
import re
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
  for line in ('held-out:', 'no context:', 'shuffled:', 'context:'):
    assert f'\n{line}' in completed.stdout, line
  with open(os.path.join(tmp_path, 'model', 'quickstart_summary.json')) as f:
    summary = json.load(f)
  assert summary['global_step'] == 1000
  assert summary['train']['examples_per_second'] > 0
  # Context, not frequency: clear of the best a model without context
  # scores on the same slots, and of the same text with its words shuffled.
  in_order = summary['word_order']['in_order']
  shuffled = summary['word_order']['shuffled']
  assert in_order['accuracy'] >= in_order['context_free'] + 0.05, in_order
  assert in_order['accuracy'] >= shuffled['accuracy'] + 0.05, summary
  assert (
      in_order['mask_token_accuracy']
      >= in_order['mask_token_context_free'] + 0.05
  ), in_order
  assert os.path.exists(summary['operative_config'])
  # A second call finds the finished run and only evaluates it again.
  again = _quickstart(tmp_path)
  assert again.returncode == 0, again.stderr[-3000:]
  assert 'none measured (no steps left to train' in again.stdout
  assert 'held-out:    masked-LM accuracy 0.' in again.stdout


def _readme_summary():
  """The README's quoted quickstart summary: {line label: [decimals]}."""
  with open(os.path.join(gin_utils.REPO_ROOT, 'README.md')) as f:
    block = 'held-out:' + f.read().split('held-out:', 1)[1].split('```')[0]
  labels_and_text = [line.split(':', 1) for line in block.strip().splitlines()]
  return {
      label: re.findall(r'[-+]?\d+\.\d+|\b\d+\b', text)
      for label, text in labels_and_text
  }


def test_readme_quotes_the_committed_report():
  """The README's sample summary is the report's seed-1 run, as rounded."""
  with open(
      os.path.join(
          gin_utils.REPO_ROOT, 'experiments/reports/quickstart_cpu.json'
      )
  ) as f:
    (run,) = json.load(f)['word_order']
  in_order, shuffled = run['in_order'], run['shuffled']
  expected = {
      'held-out': [
          in_order['accuracy'],
          in_order['slots'],
          in_order['mask_token_accuracy'],
          in_order['mask_token_slots'],
      ],
      'no context': [
          in_order['context_free'],
          in_order['mask_token_context_free'],
      ],
      'shuffled': [shuffled['accuracy'], shuffled['mask_token_accuracy']],
      'context': [
          in_order['accuracy'] - in_order['context_free'],
          in_order['accuracy'] - shuffled['accuracy'],
          in_order['lm_example_loss'],
          shuffled['lm_example_loss'],
      ],
  }
  quoted = _readme_summary()
  assert list(quoted) == list(expected)
  for label, values in expected.items():
    assert len(quoted[label]) == len(values), (label, quoted[label])
    for text, value in zip(quoted[label], values):
      decimals = len(text.partition('.')[2])
      assert abs(float(text) - value) <= 0.5 * 10**-decimals, (label, text)
