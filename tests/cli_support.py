"""Command lines typed as a user types them, and the checks of their refusals.

The tests of the command-line entry points (tests/test_cli_errors.py,
tests/test_train.py, tests/test_finetune.py) run each command in a process
of its own through `Cli` (tests/conftest.py's `cli` fixture); a refusal must
end with a non-zero status, print exactly one line of its own on stderr
(TensorFlow's and absl's log lines aside) that names what the user typed,
print no traceback, and leave the files of an earlier run byte-identical.
"""

import hashlib
import os
import re
import subprocess

from official_repro.training import gin_utils

# The modules whose tests use the session fixtures `cli`, `workspace` and
# `finetuned` (tests/conftest.py) name this xdist group: one worker runs
# them all (--dist loadgroup, pytest.ini), so the fixtures are built once.
XDIST_GROUP = 'cli_commands'

REPO_ROOT = gin_utils.REPO_ROOT
# Lines of TensorFlow's C++ logging and of absl's Python logging.
_LOG_LINE = re.compile(
    r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] |[IWEF]\d{4} |'
    r'WARNING: All log messages before absl::InitializeLog|'
    r'(INFO|WARNING):tensorflow:|'
    r'I0000 |W0000 |E0000 )'
)


def _snapshot(*paths):
  """{path: sha256} of every file under `paths`."""
  digests = {}
  for root in paths:
    for folder, _, names in os.walk(root):
      for name in names:
        path = os.path.join(folder, name)
        with open(path, 'rb') as f:
          digests[path] = hashlib.sha256(f.read()).hexdigest()
  return digests


class Cli:
  """Runs command lines as a user types them and checks their refusals."""

  def __init__(self, python_m):
    self._python_m = python_m

  def run(self, args, cwd=REPO_ROOT, timeout=300):
    """Runs `python -m args...` (a script if `args[0]` ends with .sh)."""
    if not args[0].endswith('.sh'):
      return self._python_m(args, cwd, timeout)
    return subprocess.run(
        args,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_user_environment(),
        check=False,
    )

  def refused(self, args, *named, keep=(), cwd=REPO_ROOT):
    """Runs `args` and checks its one-line refusal.

    Asserts the one-line refusal naming each of `named`, and that the files
    under `keep` did not change; returns the line.
    """
    before = _snapshot(*keep)
    completed = self.run(args, cwd=cwd)
    own = [
        line
        for line in completed.stderr.splitlines()
        if line.strip() and not _LOG_LINE.match(line)
    ]
    assert completed.returncode != 0, completed.stdout[-2000:]
    assert 'Traceback' not in completed.stderr, completed.stderr[-3000:]
    assert len(own) == 1, own
    assert ': error: ' in own[0], own
    for text in named:
      assert text in own[0], (text, own[0])
    assert _snapshot(*keep) == before
    return own[0]


def _user_environment():
  """The tests' environment as a user's shell has it (as `python_m` runs)."""
  env = dict(os.environ)
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)
  return env


def glue(root, label_shift=0):
  """Writes MRPC train and dev TSVs under `root`/MRPC; returns `root`."""
  folder = root / 'MRPC'
  folder.mkdir(parents=True)
  for split, rows in (('train', 8), ('dev', 4)):
    lines = ['Quality\t#1 ID\t#2 ID\t#1 String\t#2 String']
    lines += [
        f'{(i + label_shift) % 2}\t{i}\t{i + 100}\tthe cat sat\tthe ' f'dog ran'
        for i in range(rows)
    ]
    (folder / f'{split}.tsv').write_text('\n'.join(lines) + '\n')
  return str(root)
