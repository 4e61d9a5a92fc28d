"""A command in the warm interpreter ends as it does in a fresh `python -m`."""

import os
import subprocess
import sys

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
}


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


@pytest.mark.parametrize(
    'args',
    [
        ['says_and_fails'],
        ['says_and_fails', 'a message'],
        ['exits_with', '0'],
        ['exits_with', '3'],
        ['reads_stdin'],
        ['imports_a_sibling', '7'],
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
  # A traceback's frames above the module differ (runpy vs the interpreter).
  assert warm.stderr.splitlines()[-1:] == fresh.stderr.splitlines()[-1:]
  assert ('Traceback' in warm.stderr) == ('Traceback' in fresh.stderr)


def test_a_command_past_its_timeout_is_killed(interpreter, modules):
  assert interpreter.run(['sleeps'], modules, timeout=1).returncode < 0
  assert interpreter.run(['exits_with', '4'], modules).returncode == 4
