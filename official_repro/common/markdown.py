"""The one Markdown table renderer of the repository's reports.

Cells are written as given (callers format their numbers), unpadded, so a
report's rows are grep-able and diff line by line.
"""

from typing import Any, List, Sequence


def table(header: Sequence[Any], rows: Sequence[Sequence[Any]]) -> List[str]:
  """A GitHub Markdown table: the header line, the rule, one line per row.

  Args:
    header: the column names.
    rows: the cells of each row, as many as the header has.

  Returns:
    The table's lines, e.g. ['| a | b |', '|---|---|', '| 1 | 2 |'].

  Raises:
    ValueError: a row with another number of cells than the header.
  """
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
