"""A command in the warm interpreter ends as it does in a fresh `python -m`."""

import os
import re
import subprocess
import sys
import time

import pytest

from tests import warm_interpreter

_MODULES = {
    'says_and_fails': (
        'import sys\n'
        'print("to stdout", sys.argv[1:])\n'
        'print("to stderr", file=sys.stderr)\n'
        'if sys.argv[1:]:\n'
        '  sys.exit(sys.argv[1])\n'
        'raise ValueError("boom")\n'
    ),
    'exits_with': 'import sys\nsys.exit(int(sys.argv[1]))\n',
    'reads_stdin': 'import sys\nprint(repr(sys.stdin.read()))\n',
    'imports_a_sibling': 'import exits_with\n',
    'sleeps': 'import time\ntime.sleep(60)\n',
    'sleeps_in_a_child': (
        'import subprocess, sys\n'
        'child = subprocess.Popen([sys.executable, "-c", '
        '"import time; time.sleep(60)"])\n'
        'print(child.pid, flush=True)\n'
        'child.wait()\n'
    ),
    'configures_tensorflow': (
        'import tensorflow as tf\n'
        'tf.config.threading.set_intra_op_parallelism_threads(1)\n'
        'print(int(tf.constant(2) + 1))\n'
    ),
}


def _last_line(stderr):
  lines = stderr.splitlines()[-1:]
  return [re.sub(r'^\d{4}-\d\d-\d\d [\d:.]+: ', '', line) for line in lines]


@pytest.fixture(scope='module')
def interpreter():
  warm = warm_interpreter.WarmInterpreter(os.getcwd(), dict(os.environ))
  yield warm
  warm.close()


@pytest.fixture
def modules(tmp_path):
  for name, code in _MODULES.items():
    (tmp_path / f'{name}.py').write_text(code)
  return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize(
    'args',
    [
        ['says_and_fails'],
        ['says_and_fails', 'a message'],
        ['exits_with', '0'],
        ['exits_with', '3'],
        ['reads_stdin'],
        ['imports_a_sibling', '7'],
        ['configures_tensorflow'],
    ],
)
def test_status_and_output_equal_a_fresh_interpreter(
    interpreter, modules, args
):
  fresh = subprocess.run(
      [sys.executable, '-m', *args],
      cwd=modules,
      stdin=subprocess.DEVNULL,
      capture_output=True,
      text=True,
      check=False,
  )
  warm = interpreter.run(args, modules)
  assert warm.returncode == fresh.returncode
  assert warm.stdout == fresh.stdout
  # A traceback's frames above the module differ (runpy vs the interpreter),
  # and TensorFlow's log lines by their time.
  assert _last_line(warm.stderr) == _last_line(fresh.stderr)
  assert ('Traceback' in warm.stderr) == ('Traceback' in fresh.stderr)


def test_a_command_past_its_timeout_is_killed(interpreter, modules):
  assert interpreter.run(['sleeps'], modules, timeout=1).returncode < 0
  assert interpreter.run(['exits_with', '4'], modules).returncode == 4


def test_the_processes_a_command_started_die_with_it(interpreter, modules):
  completed = interpreter.run(['sleeps_in_a_child'], modules, timeout=3)
  assert completed.returncode < 0
  child = int(completed.stdout.split()[0])
  deadline = time.time() + 10
  while _alive(child) and time.time() < deadline:
    time.sleep(0.1)
  assert not _alive(child)


def _alive(pid):
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().split()[2] != 'Z'
  except FileNotFoundError:
    return False


def test_a_command_in_a_missing_directory_fails_alone(interpreter, modules):
  completed = interpreter.run(['exits_with', '0'], modules / 'missing')
  assert completed.returncode == 1
  assert 'FileNotFoundError' in completed.stderr
  assert interpreter.run(['exits_with', '5'], modules).returncode == 5
