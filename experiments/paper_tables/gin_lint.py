r"""Keeps gin files readable: lines within a width, each citation written once.

  python -m experiments.paper_tables.gin_lint [PATH ...]

Prints `<file>:<line>: <reason>` for every line over `MAX_LINE_LENGTH`,
citation written twice in a binding's comment or on one line, or row's cells
cited in separate brackets, in the `.gin` files under PATHs (default: `gin`),
and exits 1 if there is any. tests/test_gin_papers.py resolves citations.
"""

import os

import sys
from typing import Dict, Iterator, List, Sequence, Set, Tuple

import tensorflow as tf

from official_repro.common import cli
from experiments.paper_tables import citations

# The widest a gin line may be, in columns (gin/README.md states it too).
MAX_LINE_LENGTH = 100


def gin_files(paths: Sequence[str]) -> Iterator[str]:
  """The `.gin` files among `paths` and under its directories, sorted."""
  for path in paths:
    if not tf.io.gfile.exists(path):
      raise FileNotFoundError(f'{path}: no such file or directory.')
    if not tf.io.gfile.isdir(path):
      yield path
      continue
    for root, directories, files in tf.io.gfile.walk(path):
      directories.sort()
      for name in sorted(files):
        if name.endswith('.gin'):
          yield os.path.join(root, name)


def _repeats(comment: str) -> List[str]:
  """Why `comment` writes a citation more than once (non-citations skipped)."""
  problems = []
  seen: Set[str] = set()
  rows: Dict[Tuple[str, str, str], List[str]] = {}
  for text in citations.brackets_in(comment):
    try:
      cited = citations.parse_bracket(text)
    except ValueError:
      continue
    for citation in cited:
      if citation.text in seen:
        problems.append(f'[{citation.text}] is cited twice')
      seen.add(citation.text)
      if citation.kind == 'cell':
        row = (citation.paper, citation.target, citation.row)
        columns = rows.setdefault(row, [])
        if citation.column not in columns:
          columns.append(citation.column)
    if cited[0].kind == 'cell':
      rows[(cited[0].paper, cited[0].target, cited[0].row)].append(None)
  for (paper, table, row), columns in rows.items():
    brackets = columns.count(None)
    if brackets > 1:
      listed = f'{citations.COLUMN_SEPARATOR} '.join(
          column for column in columns if column is not None
      )
      problems.append(
          f'one row in {brackets} brackets; write it once, '
          f'[{paper} Table {table}: {row} | {listed}]'
      )
  return problems


def lint_file(path: str) -> List[str]:
  """The problems of one gin file, each '<path>:<line>: <reason>'."""
  with tf.io.gfile.GFile(path) as f:
    lines = f.read().splitlines()
  problems: List[Tuple[int, str]] = []
  for number, line in enumerate(lines, start=1):
    if len(line) > MAX_LINE_LENGTH:
      reason = f"{len(line)} columns, over {MAX_LINE_LENGTH} (a binding's "
      reason += 'comment may go in the # lines directly above it)'
      problems.append((number, reason))
  try:
    bindings = citations.gin_bindings(path)
  except ValueError as error:
    return [f'{path}:{number}: {reason}' for number, reason in problems] + [
        str(error)
    ]
  in_a_binding = set()
  for binding in bindings:
    first = binding.line_number - binding.comment_lines
    in_a_binding.update(range(first, binding.line_number + 1))
    for reason in _repeats(binding.comment):
      problems.append((binding.line_number, f'{binding.name}: {reason}'))
  for number, line in enumerate(lines, start=1):
    if number not in in_a_binding and line.lstrip().startswith('#'):
      problems.extend((number, reason) for reason in _repeats(line))
  return [f'{path}:{number}: {reason}' for number, reason in sorted(problems)]


def main(argv: Sequence[str]) -> None:
  """Prints the problems of the gin files `argv[1:]` names; 1 if any."""
  problems = [
      problem
      for path in gin_files(argv[1:] or ['gin'])
      for problem in lint_file(path)
  ]
  for problem in problems:
    print(problem)
  if problems:
    sys.exit(1)


if __name__ == '__main__':
  cli.run(main, positional=True)
