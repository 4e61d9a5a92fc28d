"""The one way experiments run a repository command in a subprocess.

`python -m <module>` from the repository root gets a fresh TensorFlow (own
gin, strategy, memory) and can be stopped alone; an interrupted caller
SIGTERMs its job, gives it time to checkpoint, then kills it.
"""

import re
import subprocess
import sys
import tempfile
from typing import Optional, Sequence

import tensorflow as tf

from official_repro.training import gin_utils

# Seconds a stopped job gets to save its checkpoint before it is killed.
STOP_GRACE_SECONDS = 30


class CommandError(RuntimeError):
  """A job exited non-zero; the message ends with where its output is."""


def run_module(
    module: str,
    args: Sequence[str] = (),
    *,
    log_path: Optional[str] = None,
    show: Optional[re.Pattern] = None,
    stdout_only: bool = False,
) -> str:
  """Runs `python -m module args` to its end; returns its output.

  Args:
    module: e.g. 'official_repro.train'.
    args: its arguments.
    log_path: a `tf.io.gfile` path for stdout and stderr; None: not kept.
    show: lines of its output matching this are printed as they come.
    stdout_only: return stdout alone (stderr still goes to the log).

  Raises:
    CommandError: it exited non-zero, naming the log or ending with its
      last 3,000 characters of output.
  """
  command = [sys.executable, '-m', module, *args]
  if show is not None:
    print('  $ ' + ' '.join(command[1:]), flush=True)
  with tempfile.TemporaryFile('w+') as errors:
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=errors if stdout_only else subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=gin_utils.REPO_ROOT,
    )
    lines = []
    try:
      for line in process.stdout:
        lines.append(line)
        if show is not None and show.match(line):
          print('    ' + line.rstrip(), flush=True)
      process.wait()
    except BaseException:
      stop(process)
      raise
    finally:
      process.stdout.close()
    errors.seek(0)
    stderr = errors.read()
  output = ''.join(lines)
  if log_path:
    with tf.io.gfile.GFile(log_path, 'w') as log:
      log.write(output + stderr)
  if process.returncode:
    where = f'see {log_path}' if log_path else (output + stderr)[-3000:]
    raise CommandError(f'{module} failed (exit {process.returncode}); {where}')
  return output


def stop(process: subprocess.Popen) -> None:
  """SIGTERM (the job checkpoints and exits), a kill after the grace time."""
  if process.poll() is not None:
    return
  process.terminate()
  try:
    process.wait(STOP_GRACE_SECONDS)
  except subprocess.TimeoutExpired:
    process.kill()
    process.wait()
