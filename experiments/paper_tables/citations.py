"""Machine-readable citations in gin files, resolved against the papers.

Every binding of a paper gin file (`gin/papers/`, `gin/finetune/`) has a
comment (the `#` lines directly above it, then the comment ending its line)
holding bracketed citations, which may run across lines, then free prose:

  [001 Table V: Learning Rate | ELECTRA_small]  a cell: the value equals it
  [003 Table 5: Warmup Steps | Small, Base]     one cell per column
  [003 Table 1]  [003 Fig. 4]                   a table or figure as a whole
  [001 Sec. IV-B]                               a key of the paper's sections
  [code: google-research/electra configure_pretraining.py]
                                                a reference file (listed in
                                                reference_sources.json)
  [code: official_repro/tasks/finetuning.py]    a file of this repository
  [ours: <reason>]                              our own choice

Numbers match a cell within a relative 1e-9 (a "%" cell also as a fraction),
strings case-insensitively, `NAMED_VALUES` through their gin spelling.
"""

import ast
import dataclasses
import functools
import math
import os
import re
from typing import Any, Dict, List, Optional, Tuple, Union

import tensorflow as tf

from experiments import paper_tables
from official_repro.common import json_files

REPO_ROOT = os.path.dirname(os.path.dirname(paper_tables.DATA_DIR))
REFERENCE_SOURCES = os.path.join(
    paper_tables.DATA_DIR, 'reference_sources.json'
)

_BRACKETED = re.compile(r'\[([^\[\]]+)\]')
_CELL = re.compile(
    r'^(?P<paper>\d{3}) Table (?P<table>[0-9IVX]+): '
    r'(?P<row>[^|]+?) \| (?P<column>.+)$'
)
_TABLE = re.compile(r'^(?P<paper>\d{3}) Table (?P<table>[0-9IVX]+)$')
_FIGURE = re.compile(r'^(?P<paper>\d{3}) Fig\. (?P<figure>\d+)$')
_SECTION = re.compile(r'^(?P<paper>\d{3}) (?P<section>.+)$')
_CODE = re.compile(r'^code: (?P<source>.+)$')
_OURS = re.compile(r'^ours: (?P<reason>.+)$')
# Separates the columns of a cell citation that names several ("| Small,
# Base"); no column of the transcribed tables holds one.
COLUMN_SEPARATOR = ','
_BINDING = re.compile(r'^(?P<name>[A-Za-z_][\w./]*)\s*=\s*(?P<value>.*?)\s*$')
# A gin value's string literals ('...' or "..."), which may hold a '#'.
_STRING = re.compile(r"'[^']*'|\"[^\"]*\"")

# Printed words of the papers' tables whose gin spelling differs, by
# binding: {printed (lower case): {binding: gin value}}.
NAMED_VALUES = {
    'linear': {'optimization.decay_power': 1.0},
    'pearson corr.': {'run_protocol.stsb_metric': 'pearson'},
}


@dataclasses.dataclass(frozen=True)
class Citation:
  """One bracketed citation.

  `kind` is 'cell', 'table', 'figure', 'section' (these have a `paper`),
  'code' or 'ours'; `target` the table or figure id, section key, source or
  reason; `row` and `column` those of a cell.
  """

  text: str
  kind: str
  paper: Optional[str] = None
  target: Optional[str] = None
  row: Optional[str] = None
  column: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Binding:
  """One `name = value  # comment` binding of a gin file (line 1-based).

  `comment` joins the `#` lines directly above (`comment_lines` of them) and
  the comment ending the line by single spaces.
  """

  path: str
  line_number: int
  name: str
  value_text: str
  comment: str
  comment_lines: int = 0

  @property
  def where(self) -> str:
    return f'{os.path.relpath(self.path, REPO_ROOT)}:{self.line_number}'

  @property
  def value(self) -> Any:
    """The value as a Python literal (gin's `@` references stay strings)."""
    try:
      return ast.literal_eval(self.value_text)
    except (ValueError, SyntaxError):
      return self.value_text


def parse_citation(text: str) -> Citation:
  """Parses one citation; ValueError for no form or several columns."""
  text = text.strip()
  match = _CELL.match(text)
  if match and COLUMN_SEPARATOR in match.group('column'):
    raise ValueError(
        f'[{text}] names several columns; parse_bracket expands it into '
        'one citation per column.'
    )
  for pattern, kind in (
      (_CELL, 'cell'),
      (_TABLE, 'table'),
      (_FIGURE, 'figure'),
  ):
    match = pattern.match(text)
    if match:
      groups = match.groupdict()
      return Citation(
          text=text,
          kind=kind,
          paper=groups['paper'],
          target=groups.get('table') or groups.get('figure'),
          row=groups.get('row'),
          column=groups.get('column'),
      )
  for pattern, kind in ((_CODE, 'code'), (_OURS, 'ours')):
    match = pattern.match(text)
    if match:
      return Citation(text=text, kind=kind, target=match.group(1))
  match = _SECTION.match(text)
  if match and match.group('paper') in paper_tables.PAPERS:
    return Citation(
        text=text,
        kind='section',
        paper=match.group('paper'),
        target=match.group('section'),
    )
  raise ValueError(
      f'[{text}] is not a citation: expected [<paper> Table <id>: <row> | '
      '<column>], [<paper> Table <id>], [<paper> Fig. <id>], [<paper> '
      '<section>], [code: <repository> <path>] or [ours: <reason>].'
  )


def parse_bracket(text: str) -> List[Citation]:
  """The citations between one pair of brackets (one per column named).

  Raises:
    ValueError: `text` is no citation, or a column of its list is empty.
  """
  text = ' '.join(text.split())
  match = _CELL.match(text)
  if not match or COLUMN_SEPARATOR not in match.group('column'):
    return [parse_citation(text)]
  columns = [
      column.strip() for column in match.group('column').split(COLUMN_SEPARATOR)
  ]
  if not all(columns):
    raise ValueError(
        f'[{text}] has an empty column: expected [<paper> Table <id>: '
        f'<row> | <column>{COLUMN_SEPARATOR} <column>...].'
    )
  prefix = text[: match.start('column')]
  return [parse_citation(prefix + column) for column in columns]


def brackets_in(comment: str) -> List[str]:
  """The texts between the brackets of a comment, in order."""
  return _BRACKETED.findall(comment or '')


def citations_in(comment: str) -> List[Citation]:
  """The citations of a comment, in order (a non-citation bracket raises)."""
  return [
      citation
      for text in brackets_in(comment)
      for citation in parse_bracket(text)
  ]


@functools.lru_cache(maxsize=None)
def reference_sources() -> Dict[str, Dict[str, str]]:
  """{repository: {path: what it holds}} of the cited implementations."""
  return json_files.read_json(REFERENCE_SOURCES)['repositories']


def resolve(citation: Citation) -> Union[paper_tables.Cell, str]:
  """The cell a citation names, else a description of what it names.

  Raises:
    KeyError: naming the missing paper, table, cell, figure, section or file.
  """
  if citation.kind == 'ours':
    return citation.target
  if citation.kind == 'code':
    source = citation.target
    repository, _, path = source.partition(' ')
    if not path:
      if tf.io.gfile.exists(os.path.join(REPO_ROOT, source)):
        return source
      raise KeyError(
          f'[code: {source}]: no file {source} in this repository '
          '(a reference file is cited as "<repository> <path>").'
      )
    files = reference_sources().get(repository)
    if files is None:
      raise KeyError(
          f'[code: {source}]: repository {repository!r} is not in '
          f'{REFERENCE_SOURCES}.'
      )
    if path not in files:
      raise KeyError(
          f'[code: {source}]: {path!r} is not listed for '
          f'{repository} in {REFERENCE_SOURCES}.'
      )
    return files[path]
  paper = paper_tables.load(citation.paper)
  if citation.kind == 'cell':
    return paper.cell(citation.target, citation.row, citation.column)
  if citation.kind == 'table':
    return paper.table(citation.target).caption
  if citation.kind == 'figure':
    if citation.target not in paper.figures:
      raise KeyError(f'Paper {paper.paper} has no Figure {citation.target}.')
    return paper.figures[citation.target].caption
  if citation.target not in paper.sections:
    raise KeyError(
        f'Paper {paper.paper} has no section {citation.target!r}; '
        f'its sections are {sorted(paper.sections)}.'
    )
  return paper.sections[citation.target]


def value_matches(binding: str, value: Any, cell: paper_tables.Cell) -> bool:
  """Whether gin `binding = value` (a Python value) is what `cell` prints."""
  if isinstance(cell.value, str):
    named = NAMED_VALUES.get(cell.value.lower(), {})
    if binding in named:
      return value == named[binding]
    return isinstance(value, str) and value.lower() == cell.value.lower()
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    return False
  candidates = [float(value)]
  if cell.unit == '%':
    candidates.append(100.0 * value)
  return any(
      math.isclose(candidate, cell.value, rel_tol=1e-9, abs_tol=0.0)
      for candidate in candidates
  )


def _split_comment(line: str) -> Tuple[str, str]:
  """(code, comment) of a gin line, split at the first '#' outside a string."""
  position = 0
  while True:
    hash_at = line.find('#', position)
    if hash_at < 0:
      return line, ''
    string = _STRING.search(line, position)
    if string is None or string.start() > hash_at:
      return line[:hash_at].rstrip(), line[hash_at + 1 :].strip()
    position = string.end()


def gin_bindings(path: str) -> List[Binding]:
  """The bindings of a gin file (includes and imports skipped), with comments.

  A blank line, include or import drops the `#` lines above it (a header).
  """
  with tf.io.gfile.GFile(path) as f:
    lines = f.read().splitlines()
  bindings = []
  above = []
  for number, line in enumerate(lines, start=1):
    stripped = line.strip()
    if stripped.startswith('#'):
      above.append(stripped[1:].strip())
      continue
    if not stripped or stripped.startswith(('include ', 'import ')):
      above = []
      continue
    code, comment = _split_comment(stripped)
    match = _BINDING.match(code)
    if not match or not match.group('value'):
      raise ValueError(f'{path}:{number}: cannot read the binding {line!r}.')
    bindings.append(
        Binding(
            path=path,
            line_number=number,
            name=match.group('name'),
            value_text=match.group('value'),
            comment=' '.join(' '.join(above + [comment]).split()),
            comment_lines=len(above),
        )
    )
    above = []
  return bindings


def check_binding(binding: Binding) -> List[str]:
  """Problems with one binding's citations: none, unresolved or unequal."""
  try:
    citations = citations_in(binding.comment)
  except ValueError as error:
    return [f'{binding.where}: {error}']
  if not citations:
    return [
        f'{binding.where}: {binding.name} cites nothing; end the line '
        'with a [..] citation or write one in the # lines directly above '
        'it (see experiments/paper_tables/citations.py).'
    ]
  problems = []
  for citation in citations:
    try:
      resolved = resolve(citation)
    except (KeyError, ValueError) as error:
      problems.append(f'{binding.where}: [{citation.text}]: {error}')
      continue
    if citation.kind == 'cell' and not value_matches(
        binding.name, binding.value, resolved
    ):
      problems.append(
          f'{binding.where}: {binding.name} = {binding.value_text} but '
          f'[{citation.text}] prints {resolved.printed!r}'
          + (f' ({resolved.unit})' if resolved.unit else '')
          + '.'
      )
  return problems
