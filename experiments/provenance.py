"""The line that heads every generated report: command, date, machine, commit.

A report under `experiments/reports/` is only as good as the knowledge of
how it was made, so every command that writes one states the exact command
line, when it finished, the machine (host, CPU cores, TensorFlow) and the
repository commit.
"""

import os
import platform
import subprocess
import sys
import time

import tensorflow as tf

from official_repro.training import gin_utils


def commit() -> str:
  """The repository's short HEAD commit, or 'unknown' outside git."""
  completed = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'],
                             capture_output=True, text=True, check=False,
                             cwd=gin_utils.REPO_ROOT)
  return completed.stdout.strip() or 'unknown'


def provenance(module: str) -> str:
  """`Command: ...; finished <date> on <machine>, commit <sha>.` for `module`
  run with this process's arguments."""
  return (f'Command: `python -m {module} {" ".join(sys.argv[1:])}`; finished '
          f'{time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())} on '
          f'{platform.node() or "an unnamed host"} ({os.cpu_count()} CPU '
          f'cores, {platform.machine()}, TensorFlow {tf.__version__}), '
          f'commit {commit()}.')
