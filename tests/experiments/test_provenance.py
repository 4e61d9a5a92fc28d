"""The header lines of generated reports (experiments/provenance.py)."""

import os
import subprocess
import sys

import tensorflow as tf

from experiments import provenance
from official_repro.training import gin_utils


def test_provenance_states_command_date_machine_and_commit(monkeypatch):
  monkeypatch.setattr(sys, 'argv', ['ignored', '--iterations=2'])
  line = provenance.provenance('experiments.convbert_speed')
  assert line.startswith(
      'Command: `python -m experiments.convbert_speed --iterations=2`; '
      'finished 2'
  )
  assert ' UTC on ' in line
  assert f'({os.cpu_count()} CPU cores, ' in line
  assert f'TensorFlow {tf.__version__}), commit ' in line


def test_commit_is_marked_for_changed_code_not_for_changed_reports(
    tmp_path, monkeypatch
):
  def git(*args):
    subprocess.run(
        [
            'git',
            '-c',
            'user.name=t',
            '-c',
            'user.email=t@t',
            '-c',
            'commit.gpgsign=false',
            *args,
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )

  report = tmp_path / provenance.REPORTS_DIR / 'report.md'
  report.parent.mkdir(parents=True)
  code = tmp_path / 'experiments' / 'tool.py'
  report.write_text('old figures')
  code.write_text('old code')
  git('init', '-q')
  git('add', '.')
  git('commit', '-q', '-m', 'first')
  monkeypatch.setattr(gin_utils, 'REPO_ROOT', str(tmp_path))
  head = provenance.commit()
  assert head and ' ' not in head and head != 'unknown'
  report.write_text('new figures')
  (tmp_path / 'untracked.txt').write_text('not in git')
  assert provenance.commit() == head
  code.write_text('new code')
  assert provenance.commit() == f'{head} with local changes'


def test_load_line_says_quiet_or_busy():
  assert provenance.load_line(0.2) == (
      'Load average (1 min) at the start: 0.20 (quiet).'
  )
  assert provenance.load_line(provenance.BUSY_LOAD + 0.01) == (
      'Load average (1 min) at the start: 0.51 (busy: times are not '
      'meaningful).'
  )
