"""Runs `python -m <module> <args>` in forks of a warm interpreter.

Tests that type many command lines (`test_cli_errors.py`) spent most of
their time starting Python and importing TensorFlow and Model Garden, about
4 s a command on 2 cores. A warm interpreter is a child process that has
imported those libraries (and nothing of this repository) and waits for
commands on its stdin; for each it forks, and the fork runs the module as
`python -m` does (`runpy`, `__main__`, `sys.argv`, the working directory
first on `sys.path`) with its stdout and stderr written to files, then
exits with the status Python would give. So a command sees a fresh
`__main__`, fresh flags and an uninitialized TensorFlow runtime, as in a
shell; only the import time is saved. Differences from a shell: the
interpreter's environment is fixed when it starts, what the libraries print
while they are imported goes to the interpreter's stderr (once), and
`atexit` handlers do not run (the fork ends with `os._exit`, after flushing
its output). A command past its timeout is killed with the processes it
started (its process group).

Protocol: one JSON line per command on the interpreter's stdin
(`{"args": [...], "cwd": ..., "timeout": ...}`), one JSON line per result
on its stdout (`{"returncode": ..., "stdout": ..., "stderr": ...}`).
"""

import json
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import time
import traceback

# Imported once by the interpreter; none of them defines a flag.
_WARM_MODULES = (
    'numpy',
    'tensorflow',
    'tf_keras',
    'gin',
    'absl.app',
    'official.nlp.modeling.networks',
    'official.modeling.optimization',
    'official.core.task_factory',
    'official.nlp.tasks',  # with its datasets and hub imports, ~1.5 s a command
)


def _exit_status(error: SystemExit) -> int:
  """The status Python exits with for `SystemExit(code)`."""
  if error.code is None:
    return 0
  if isinstance(error.code, int):
    return error.code
  print(error.code, file=sys.stderr)
  return 1


def _run_module(args, cwd, stdout_path, stderr_path) -> int:
  """In the fork: runs `args[0]` as `__main__` with `args[1:]` in `cwd`."""
  os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
  for fd, path in ((1, stdout_path), (2, stderr_path)):
    os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
  try:
    os.chdir(cwd)
    sys.argv = list(args)
    sys.path[0] = os.getcwd()
    runpy.run_module(args[0], run_name='__main__', alter_sys=True)
    status = 0
  except SystemExit as error:
    status = _exit_status(error)
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()
    status = 1
  sys.stdout.flush()
  sys.stderr.flush()
  return status


def _child(request, paths) -> None:
  """The fork: runs the command in its own process group; never returns."""
  status = 1
  try:
    os.setpgid(0, 0)
    status = _run_module(request['args'], request['cwd'], *paths)
  finally:
    os._exit(status)  # pylint: disable=protected-access


def _wait(pid: int, timeout: float) -> int:
  """Waits for the fork `pid`; kills it after `timeout` seconds."""
  deadline = time.time() + timeout
  while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
      return os.waitstatus_to_exitcode(status)
    if time.time() > deadline:
      os.killpg(pid, signal.SIGKILL)  # The command and what it started.
      os.waitpid(pid, 0)
      return -signal.SIGKILL
    time.sleep(0.02)


def _serve() -> None:
  """The interpreter: imports `_WARM_MODULES`, then runs commands."""
  for module in _WARM_MODULES:
    __import__(module)
  requests, replies = sys.stdin, sys.stdout
  print('ready', file=replies, flush=True)
  for line in requests:
    request = json.loads(line)
    with tempfile.TemporaryDirectory() as scratch:
      paths = [os.path.join(scratch, name) for name in ('out', 'err')]
      pid = os.fork()
      if pid == 0:
        _child(request, paths)
      try:
        os.setpgid(pid, pid)  # Also here: the timeout may come first.
      except OSError:
        pass  # The fork has set it, or has already exited.
      returncode = _wait(pid, request['timeout'])
      outputs = []
      for path in paths:
        with open(path, errors='replace') as f:
          outputs.append(f.read())
    reply = dict(returncode=returncode, stdout=outputs[0], stderr=outputs[1])
    print(json.dumps(reply), file=replies, flush=True)


class WarmInterpreter:
  """A warm interpreter and the commands run in its forks."""

  def __init__(self, cwd: str, env: dict):
    """Starts the interpreter in `cwd` with `env`; waits until it is ready."""
    self._process = subprocess.Popen(
        [sys.executable, '-m', 'tests.warm_interpreter'],
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    ready = self._process.stdout.readline().strip()
    if ready != 'ready':
      raise RuntimeError(f'the warm interpreter did not start: {ready!r}')

  def run(self, args, cwd: str, timeout: float = 300):
    """`python -m args[0] args[1:]` in `cwd`, as a `CompletedProcess`."""
    request = dict(args=list(args), cwd=str(cwd), timeout=timeout)
    self._process.stdin.write(json.dumps(request) + '\n')
    self._process.stdin.flush()
    line = self._process.stdout.readline()
    if not line:
      raise RuntimeError(
          f'the warm interpreter stopped (status {self._process.poll()}) '
          f'before answering {args!r}'
      )
    reply = json.loads(line)
    return subprocess.CompletedProcess(
        [sys.executable, '-m', *args],
        reply['returncode'],
        reply['stdout'],
        reply['stderr'],
    )

  def close(self) -> None:
    """Stops the interpreter."""
    self._process.stdin.close()
    self._process.wait(timeout=60)


if __name__ == '__main__':
  _serve()
