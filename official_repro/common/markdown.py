"""The one Markdown table renderer of the repository's reports.

Cells are written as given (callers format their numbers), unpadded, so a
report's rows are grep-able and diff line by line.
"""

from typing import Any, List, Sequence


def table(header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> List[str]:
  """A Markdown table's lines: ['| a | b |', '|---|---|', '| 1 | 2 |']."""
  for number, row in enumerate(rows, 1):
    if len(row) != len(header):
      raise ValueError(
          f'table row {number} has {len(row)} cells; the header has '
          f'{len(header)}: {list(row)!r}'
      )
  return [_line(header), '|' + '---|' * len(header)] + [
      _line(row) for row in rows
  ]


def _line(cells: Sequence[Any]) -> str:
  return '| ' + ' | '.join(str(cell) for cell in cells) + ' |'
