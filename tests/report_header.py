"""Checks of the header generated reports share (experiments.provenance)."""

import re
from typing import Sequence


def assert_header(lines: Sequence[str], command: Sequence[str]) -> None:
  """Asserts a report's lines open with its title, provenance and load.

  Args:
    lines: the report's lines: a `# ` title, then after blank lines the
      provenance line of `experiments.provenance.provenance` and the load
      line of `experiments.provenance.load_line`.
    command: the `python -m` arguments that wrote the report.
  """
  assert lines[0].startswith('# '), lines[0]
  assert lines[1] == lines[3] == ''
  assert lines[2].startswith(
      f'Command: `python -m {" ".join(command)}`; finished '
  ), lines[2]
  for field in (' UTC on ', ' CPU cores, ', 'TensorFlow ', ', commit '):
    assert field in lines[2], field
  assert re.fullmatch(
      r'Load average \(1 min\) at the start: \d+\.\d\d \((quiet|busy: .*)\)\.',
      lines[4],
  ), lines[4]
