"""The line that heads every generated report: command, date, machine, commit.

A report is only as good as the knowledge of how it was made; a report of
timings also states the load average at the start (`load_line`): timings mean
something only on a quiet machine.
"""

import os
import platform
import shlex
import subprocess
import sys
import time

import tensorflow as tf

from official_repro.training import gin_utils

# A 1-minute load average above this (on any number of cores) marks the
# machine busy: other work shared the cores with the timed code.
BUSY_LOAD = 0.5


def _git(*args: str) -> str:
  completed = subprocess.run(
      ['git', *args],
      capture_output=True,
      text=True,
      check=False,
      cwd=gin_utils.REPO_ROOT,
  )
  return completed.stdout.strip() if completed.returncode == 0 else ''


# Where the commands write their reports: changes there are outputs, not
# the code that made them.
REPORTS_DIR = 'experiments/reports'


def commit() -> str:
  """The short HEAD commit ('unknown' outside git), marked when changed.

  Changes under `REPORTS_DIR` (outputs, not code) do not count.
  """
  head = _git('rev-parse', '--short', 'HEAD')
  if not head:
    return 'unknown'
  changed = _git(
      'status',
      '--porcelain',
      '--untracked-files=no',
      '--',
      '.',
      f':(exclude){REPORTS_DIR}',
  )
  return f'{head} with local changes' if changed else head


def provenance(module: str) -> str:
  """A report's provenance line: command, date, machine and commit."""
  return (
      f'Command: `python -m {module} {shlex.join(sys.argv[1:])}`; finished '
      f'{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())} on '
      f'{platform.node() or "an unnamed host"} ({os.cpu_count()} CPU '
      f'cores, {platform.machine()}, TensorFlow {tf.__version__}), '
      f'commit {commit()}.'
  )


def load_average() -> float:
  """The 1-minute load average of this machine."""
  return os.getloadavg()[0]


def load_line(load: float) -> str:
  """The report line stating the load average at the start, quiet or busy."""
  state = 'busy: times are not meaningful' if load > BUSY_LOAD else 'quiet'
  return f'Load average (1 min) at the start: {load:.2f} ({state}).'
