"""The four papers' tables and figures, transcribed once, as data.

One JSON file per paper (`<paper>_<name>.json` beside this module) holds its
tables as printed; code reads them through `load` and keeps no copy of a cell
(except `tests/test_gin_papers.py`'s deliberate second transcription, so a
mistyped cell and a wrong gin value cannot agree). Keys (`?`: optional):

  paper "001".."004", short_name, title, text_file (in ../shared/papers/)
  sections   {id: title} of every citable place ("IV-B", "3.1", "App. B")
  tables     [{id, caption, kind ("results" | "hyperparameters" | "data" |
             "speed"), row_header ("" if none), columns (a two-level header
             joined by a space), units? {column: unit}, row_units? {row key:
             unit}, aggregation?, notes?, rows}]
    rows     [{name, key? (when the name repeats or is not ASCII: gin reads
             files in the locale's encoding), group?, cells (strings as
             printed; "", "-" or "/" empty), split? (false when slashes are
             fractions)}]
  stated?    numbers stated in prose: [{key, where (a section), printed, unit,
             quote (verbatim)}]
  figures    [{id, caption, x, y, series? {name: [[x, y], ...]} of points the
             text states, notes?}]

Cells are parsed on lookup (`parse_cell`); a cell of a slashed column
("Small/Small++") holds one part per name, or one value for every part.
"""

import dataclasses
import functools
import os
import re
from typing import Dict, List, Optional, Tuple, Union

import tensorflow as tf

from official_repro.common import json_files

DATA_DIR = os.path.dirname(os.path.abspath(__file__))
PAPERS = ('001', '002', '003', '004')

_EMPTY = ('', '-', '/', '\u2013', '\u2014')
_SUFFIXES = {'k': 1e3, 'K': 1e3, 'M': 1e6, 'B': 1e9, 'G': 1e9, 'h': 1.0}
_NUMBER = r'[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?'
_NUMBER_WITH_SUFFIX = re.compile(rf'^({_NUMBER})\s*([kKMBGh]?)$')
_FRACTION = re.compile(r'^(\d+)\s*/\s*(\d+)$')
_PLUS_MINUS = re.compile(rf'^({_NUMBER})\s*(?:\u00b1|\+/-|\+-)\s*({_NUMBER})$')


@dataclasses.dataclass(frozen=True)
class Cell:
  """One table cell: as printed (one part of a slashed cell) and parsed.

  `value` is a number, the string itself or None (empty); `plus_minus` the
  term after "±"; `unit` the column's or row's.
  """

  printed: str
  value: Union[float, str, None]
  plus_minus: Optional[float]
  unit: Optional[str]
  paper: str
  table: str
  row: str
  column: str

  @property
  def is_number(self) -> bool:
    return isinstance(self.value, float)

  def cite(self) -> str:
    """The citation of this cell as gin files write it."""
    return f'[{self.paper} Table {self.table}: {self.row} | {self.column}]'


def parse_cell(printed: str) -> Tuple[Union[float, str, None], Optional[float]]:
  """(number, string or None; "±" term or None) of a printed cell.

  E.g. "2.3e17", "500K", "1/2", "88.0±0.5", "Linear", "-".
  """
  text = printed.strip()
  if text in _EMPTY:
    return None, None
  match = _PLUS_MINUS.match(text)
  if match:
    return float(match.group(1)), float(match.group(2))
  match = _NUMBER_WITH_SUFFIX.match(
      text.replace(',', '') if re.fullmatch(r'[\d,]+', text) else text
  )
  if match:
    return float(match.group(1)) * _SUFFIXES.get(match.group(2), 1.0), None
  match = _FRACTION.match(text)
  if match:
    return float(match.group(1)) / float(match.group(2)), None
  return text, None


class Table:
  """One transcribed table: cells by (row key, column name)."""

  def __init__(self, paper: str, spec: Dict):
    self.paper = paper
    self.id = spec['id']
    self.caption = spec['caption']
    self.kind = spec['kind']
    self.row_header = spec.get('row_header', '')
    self.columns: List[str] = list(spec['columns'])
    self.units: Dict[str, str] = dict(spec.get('units', {}))
    self.row_units: Dict[str, str] = dict(spec.get('row_units', {}))
    self.aggregation: Optional[str] = spec.get('aggregation')
    self.notes: List[str] = list(spec.get('notes', []))
    self.rows: List[Dict] = list(spec['rows'])
    where = self._where = f'{paper} Table {self.id}'
    if len(set(self.columns)) != len(self.columns):
      raise ValueError(f'{where}: repeated column names {self.columns}.')
    self._rows: Dict[str, List[str]] = {}
    self._split: Dict[str, bool] = {}
    for row in self.rows:
      key = row.get('key', row['name'])
      if key in self._rows:
        raise ValueError(f'{where}: row {key!r} repeats; give it a "key".')
      if len(row['cells']) != len(self.columns):
        raise ValueError(
            f'{where}, row {key!r}: {len(row["cells"])} cells for '
            f'{len(self.columns)} columns {self.columns}.'
        )
      self._rows[key] = list(row['cells'])
      self._split[key] = row.get('split', True)
    for name in self.units:
      if name not in self.columns:
        raise ValueError(f'{where}: unit for unknown column {name!r}.')
    for name in self.row_units:
      if name not in self._rows:
        raise ValueError(f'{where}: unit for unknown row {name!r}.')

  @property
  def row_keys(self) -> List[str]:
    return list(self._rows)

  def _column(self, column: str) -> Tuple[str, Optional[int], int]:
    """(printed column, index of the slash part or None, number of parts)."""
    if column in self.columns:
      return column, None, 1
    for name in self.columns:
      parts = [part.strip() for part in name.split('/')]
      if len(parts) > 1 and column in parts:
        return name, parts.index(column), len(parts)
    raise KeyError(
        f'{self._where} has no column {column!r}; '
        f'its columns are {self.columns}.'
    )

  def cell(self, row: str, column: str) -> Cell:
    """The cell at `row` (a key) and `column` (a column or slash part).

    Raises:
      KeyError: no such row or column (naming those there), or an empty cell.
    """
    if row not in self._rows:
      raise KeyError(
          f'{self._where} has no row {row!r}; its rows are {self.row_keys}.'
      )
    printed_column, part, num_parts = self._column(column)
    printed = self._rows[row][self.columns.index(printed_column)]
    parts = [name.strip() for name in printed_column.split('/')]
    pieces = [piece.strip() for piece in printed.split('/')]
    if self._split[row] and len(parts) > 1 and len(pieces) > 1:
      if part is None:
        raise ValueError(
            f'{self._where}, row {row!r}: cell {printed!r} '
            f'holds one value per part of column {printed_column!r}; name '
            f'one of {parts}.'
        )
      if len(pieces) != num_parts:
        raise ValueError(
            f'{self._where}, row {row!r}: cell {printed!r} '
            f'does not split into the parts of column {printed_column!r}.'
        )
      printed = pieces[part]
    value, plus_minus = parse_cell(printed)
    if value is None:
      raise KeyError(
          f'{self._where}: the cell at row {row!r}, '
          f'column {column!r} is empty.'
      )
    unit = self.row_units.get(row, self.units.get(printed_column))
    return Cell(
        printed=printed.strip(),
        value=value,
        plus_minus=plus_minus,
        unit=unit,
        paper=self.paper,
        table=self.id,
        row=row,
        column=column,
    )


@dataclasses.dataclass(frozen=True)
class Statement:
  """A number the paper states in its prose (not in a table)."""

  paper: str
  key: str
  where: str
  printed: str
  value: float
  unit: str
  quote: str


@dataclasses.dataclass(frozen=True)
class Figure:
  """One figure: caption, axes and the points its text states."""

  paper: str
  id: str
  caption: str
  x: str
  y: str
  series: Dict[str, List[Tuple[float, float]]]
  notes: Tuple[str, ...]


class Paper:
  """One paper's tables, figures and section ids."""

  def __init__(self, spec: Dict, path: str):
    self.path = path
    self.paper = spec['paper']
    self.short_name = spec['short_name']
    self.title = spec['title']
    self.text_file = spec['text_file']
    self.sections: Dict[str, str] = dict(spec['sections'])
    self.tables: Dict[str, Table] = {}
    for table_spec in spec['tables']:
      table = Table(self.paper, table_spec)
      if table.id in self.tables:
        raise ValueError(f'{path}: table {table.id} appears twice.')
      self.tables[table.id] = table
    self.stated: Dict[str, Statement] = {}
    for statement in spec.get('stated', []):
      if statement['where'] not in self.sections:
        raise ValueError(
            f'{path}: stated {statement["key"]!r} is in '
            f'{statement["where"]!r}, which is no section.'
        )
      if statement['printed'] not in statement['quote']:
        raise ValueError(
            f'{path}: stated {statement["key"]!r}: '
            f'{statement["printed"]!r} is not in its quote.'
        )
      value, _ = parse_cell(statement['printed'])
      self.stated[statement['key']] = Statement(
          paper=self.paper, value=value, **statement
      )
    self.figures: Dict[str, Figure] = {}
    for figure in spec.get('figures', []):
      series = {
          name: [tuple(point) for point in points]
          for name, points in figure.get('series', {}).items()
      }
      self.figures[figure['id']] = Figure(
          paper=self.paper,
          **{k: figure[k] for k in ('id', 'caption', 'x', 'y')},
          series=series,
          notes=tuple(figure.get('notes', ())),
      )

  def table(self, table_id: str) -> Table:
    if table_id not in self.tables:
      raise KeyError(
          f'Paper {self.paper} has no Table {table_id}; it has '
          f'{sorted(self.tables)} ({self.path}).'
      )
    return self.tables[table_id]

  def cell(self, table_id: str, row: str, column: str) -> Cell:
    return self.table(table_id).cell(row, column)


def _path_of(paper: str) -> str:
  """The one `<paper>_<name>.json` beside this module."""
  matches = [
      name
      for name in sorted(tf.io.gfile.listdir(DATA_DIR))
      if name.startswith(f'{paper}_') and name.endswith('.json')
  ]
  if len(matches) != 1:
    raise FileNotFoundError(
        f'Expected one {paper}_<name>.json in {DATA_DIR}, found {matches}.'
    )
  return os.path.join(DATA_DIR, matches[0])


@functools.lru_cache(maxsize=None)
def load(paper: str) -> Paper:
  """The transcription of `paper` ("001" .. "004")."""
  if paper not in PAPERS:
    raise KeyError(f'Unknown paper {paper!r}; the papers are {PAPERS}.')
  path = _path_of(paper)
  spec = json_files.read_json(path)
  if spec.get('paper') != paper:
    raise ValueError(f'{path} says paper {spec.get("paper")!r}, not {paper}.')
  return Paper(spec, path)


# Released models' own GLUE dev scores, as their READMEs print them (percent):
# `glue_suite --paper=<key>` prints one beside ours.
RELEASES = {'electra': 'electra_release.json'}


def release_rows(release: str) -> Dict[str, Dict[str, float]]:
  """{row: {our GLUE task: score as a fraction}} of `RELEASES[release]`."""
  spec = json_files.read_json(os.path.join(DATA_DIR, RELEASES[release]))
  return {
      row: {task: float(cell) / 100 for task, cell in cells.items()}
      for row, cells in spec['rows'].items()
  }
