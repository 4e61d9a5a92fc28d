"""Reads plain-text corpora into documents of sentences.

Files are streamed through `tf.io.gfile` as UTF-8 (BOM dropped, bad bytes
refused or replaced and counted); Gutenberg boilerplate, regex-matched lines
and headings can be dropped. A document is a blank-line block or a whole
file; sentences come from `split_sentences` or one per line. With
`max_chars` (`--group_mb`) long paragraphs and documents are cut, so only one
line is ever held whole. Everything dropped is counted in `CorpusStats`.
"""

import codecs
import dataclasses
import fnmatch
import os
import re
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional
from typing import Sequence, Tuple

import tensorflow as tf

from official_repro.common import cli

DOCUMENT_MODES = ('blank_line', 'file')
# How many unreadable files `CorpusStats` names (all are counted).
MAX_NAMED_FILES = 20
ENCODING_ERRORS = ('strict', 'replace')
# Bytes read from a file at a time (`read_lines`).
_READ_CHUNK = 1 << 20
_BOM = b'\xef\xbb\xbf'
_REPLACEMENT = '\ufffd'.encode('utf-8')

_GUTENBERG_START = re.compile(r'^\*{3}\s*START OF', re.IGNORECASE)
_GUTENBERG_END = re.compile(r'^\*{3}\s*END OF', re.IGNORECASE)

# Abbreviations after which a period does not end a sentence (lower case,
# without the final period).
_ABBREVIATIONS = frozenset("""
    mr mrs ms messrs mme mlle dr st jr sr prof rev hon gen col capt lt sgt
    gov esq vs etc e.g i.e cf viz al approx ca vol vols fig figs pp ed eds
    inc ltd co corp dept mt ft jan feb mar apr jun jul aug sep sept oct nov
    dec
""".split())
# Abbreviations that are also ordinary words; they only count as
# abbreviations when a number follows ("No. 5", but "I said no. Then ...").
_NUMERIC_ABBREVIATIONS = frozenset(['no', 'nos', 'p', 'art', 'ch', 'sec'])

# A run of terminal punctuation, optional closing quotes/brackets, whitespace,
# and a lookahead for something that can start a sentence.
_BOUNDARY = re.compile(
    r'([.!?]+)[\'"\u2019\u201d)\]]*(\s+)'
    r'(?=[A-Z0-9\'"\u2018\u201c(\[_\u00c0-\u00de])'
)

# Emphasis underscores of Project Gutenberg texts (`_word_`, `_my_self`): an
# underscore next to a character that is neither space nor underscore.
_GUTENBERG_ITALICS = re.compile(r'_(?=[^\s_])|(?<=[^\s_])_')
_GUTENBERG_ILLUSTRATION = re.compile(r'^\[Illustration\b.*\]$', re.DOTALL)

# Headings: see `is_heading`.
_HEADING_MAX_WORDS = 30
_TITLE_MAX_WORDS = 12
_ORDINALS = (
    'first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|'
    'tenth|last|one|two|three|four|five|six|seven|eight|nine|ten'
)
# "Chapter 12", "BOOK IV. The Mail", "Part the First--...": a chapter-like
# word and a number, then the end, punctuation or a capitalised word (not
# prose such as "Part two of the plan ...").
_CHAPTER_HEADING = re.compile(
    r'^(?i:chapter|book|part|volume|stave|canto|section|episode|letter)\s+'
    rf'(?i:[ivxlcdm]+\b|\d+\b|(the\s+)?({_ORDINALS})\b)'
    r'(?=\s*$|\s*[.:,\-\u2014]|\s+[A-Z0-9(\[_"\'\u2018\u201c])'
)
_LEADING_NUMERAL = re.compile(r'^([IVXLCDM]+|\d+)[.:]?\s+')
_TITLE_SMALL_WORDS = frozenset("""
    a an the and or nor but of in on at to for by with from as into upon de
    la le du von van der
""".split())
_WORD_PUNCTUATION = '\'"\u2018\u2019\u201c\u201d()[]_*,;:.!?-\u2014'
_TERMINAL_PUNCTUATION = re.compile(r'[.!?,;:\-\u2014]["\'\u2019\u201d)\]_]*$')
_LEADING_PUNCTUATION = '(["\'\u2018\u201c_['
_WHITESPACE = re.compile(r'\s+')


@dataclasses.dataclass(frozen=True)
class CleaningOptions:
  """How to turn files into documents (the flags of the same names).

  `strip_gutenberg` also drops `[Illustration: ...]` paragraphs and italics
  underscores; `drop_line_regexes` are `re.search`ed on lines without endings.
  """

  document_mode: str = 'blank_line'
  sentence_per_line: bool = False
  strip_gutenberg: bool = False
  drop_line_regexes: Tuple[str, ...] = ()
  drop_headings: bool = True
  min_sentence_chars: int = 1
  file_pattern: str = '*.txt'
  encoding_errors: str = 'strict'

  def __post_init__(self):
    if self.encoding_errors not in ENCODING_ERRORS:
      raise cli.UserError(
          f'encoding_errors must be one of {ENCODING_ERRORS}, '
          f'got {self.encoding_errors!r}.'
      )
    if self.document_mode not in DOCUMENT_MODES:
      raise cli.UserError(
          f'document_mode must be one of {DOCUMENT_MODES}, got '
          f'{self.document_mode!r}.'
      )
    if self.min_sentence_chars < 0:
      raise cli.UserError(
          f'min_sentence_chars must be >= 0, got {self.min_sentence_chars}.'
      )
    object.__setattr__(self, 'drop_line_regexes', tuple(self.drop_line_regexes))
    for pattern in self.drop_line_regexes:
      try:
        re.compile(pattern)
      except re.error as e:
        raise cli.UserError(
            f'drop_line_regexes: invalid regex {pattern!r}: {e}'
        ) from e


@dataclasses.dataclass
class CorpusStats:
  """Counters collected while reading a corpus; names say what they count.

  `unreadable_files` names the first `MAX_NAMED_FILES` unreadable files.
  """

  files: int = 0
  bytes_read: int = 0
  documents: int = 0
  paragraphs: int = 0
  sentences: int = 0
  characters: int = 0
  lines_read: int = 0
  blank_lines: int = 0
  lines_skipped_by_reason: Dict[str, int] = dataclasses.field(
      default_factory=dict
  )
  sentences_dropped_short: int = 0
  italics_underscores_removed: int = 0
  empty_documents_dropped: int = 0
  decode_errors: int = 0
  files_with_decode_errors: int = 0
  files_with_bom: int = 0
  files_with_crlf: int = 0
  files_without_gutenberg_markers: int = 0
  files_unreadable: int = 0
  unreadable_files: List[str] = dataclasses.field(default_factory=list)

  def skip_lines(self, reason: str, count: int = 1):
    """Adds `count` dropped lines under `reason`."""
    if count:
      self.lines_skipped_by_reason[reason] = (
          self.lines_skipped_by_reason.get(reason, 0) + count
      )

  def skip_unreadable_file(self, path: str, error: str):
    """Counts a file that could not be read, naming it (up to a limit)."""
    self.files_unreadable += 1
    if len(self.unreadable_files) < MAX_NAMED_FILES:
      self.unreadable_files.append(f'{path}: {error}')

  @property
  def lines_skipped(self) -> int:
    return sum(self.lines_skipped_by_reason.values())

  def skipped_summary(self) -> str:
    """One line: the skipped-line counts by reason, or 'none'."""
    if not self.lines_skipped_by_reason:
      return 'none'
    return ', '.join(
        f'{reason}: {count}'
        for reason, count in sorted(self.lines_skipped_by_reason.items())
    )

  def report(self) -> str:
    """A readable multi-line report of the counters."""
    rows = [
        ('files', self.files),
        ('bytes read', self.bytes_read),
        ('lines read', self.lines_read),
        ('blank lines', self.blank_lines),
        ('lines skipped', self.lines_skipped),
    ]
    rows += [
        (f'  {reason}', count)
        for reason, count in sorted(self.lines_skipped_by_reason.items())
    ]
    rows += [
        ('documents', self.documents),
        ('empty documents dropped', self.empty_documents_dropped),
        ('paragraphs', self.paragraphs),
        ('sentences', self.sentences),
        ('sentences dropped (too short)', self.sentences_dropped_short),
        ('italics underscores removed', self.italics_underscores_removed),
        ('characters', self.characters),
        ('decode errors', self.decode_errors),
        ('files with decode errors', self.files_with_decode_errors),
        ('files with a UTF-8 BOM', self.files_with_bom),
        ('files with CRLF line endings', self.files_with_crlf),
        (
            'files without gutenberg markers',
            self.files_without_gutenberg_markers,
        ),
        ('files unreadable (skipped)', self.files_unreadable),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [f'{name:<{width}}  {value:>12,}' for name, value in rows]
    lines += [f'  unreadable: {entry}' for entry in self.unreadable_files]
    return '\n'.join(lines)


def add_counts(mine: Any, theirs: Any) -> None:
  """Adds the counters of dataclass `theirs` to `mine`, recursively.

  Ints are summed, dicts merged, lists (of named files) extended up to
  `MAX_NAMED_FILES`; other fields (rates) are left as they are.
  """
  for field in dataclasses.fields(mine):
    value, other = getattr(mine, field.name), getattr(theirs, field.name)
    if dataclasses.is_dataclass(value):
      add_counts(value, other)
    elif isinstance(value, dict):
      for key, count in other.items():
        if dataclasses.is_dataclass(count):
          add_counts(value[key], count)
        else:
          value[key] = value.get(key, 0) + count
    elif isinstance(value, list):
      value.extend(other[: max(0, MAX_NAMED_FILES - len(value))])
    elif isinstance(value, int):
      setattr(mine, field.name, value + other)


def split_sentences(text: str) -> List[str]:
  """Splits one paragraph of running text into sentences.

  A sentence ends at `.`, `!` or `?` (and closing quotes or brackets) followed
  by whitespace and a capital, digit or opening quote/bracket; not after a
  known abbreviation, a single capital initial (not "I"), or "No."/"p." before
  a number.
  """
  text = _WHITESPACE.sub(' ', text).strip()
  if not text:
    return []
  sentences = []
  start = 0
  for match in _BOUNDARY.finditer(text):
    if _is_abbreviation(text, match):
      continue
    sentences.append(text[start : match.start(2)])
    start = match.end(2)
  sentences.append(text[start:])
  return [s for s in sentences if s]


def _is_abbreviation(text: str, match: 're.Match[str]') -> bool:
  """Whether the period of a boundary match closes an abbreviation."""
  if match.group(1) != '.':
    return False
  # `text` has single spaces only (see `split_sentences`).
  end = match.start(1)
  word = text[text.rfind(' ', 0, end) + 1 : end].lstrip(_LEADING_PUNCTUATION)
  if not word:
    return False
  if len(word) == 1 and word.isupper() and word.isalpha() and word != 'I':
    return True
  lowered = word.lower()
  if lowered in _ABBREVIATIONS:
    return True
  return (
      lowered in _NUMERIC_ABBREVIATIONS
      and text[match.end(2) : match.end(2) + 1].isdigit()
  )


def is_heading(block: Sequence[str]) -> bool:
  """Whether a paragraph (stripped, non-empty lines) looks like a heading.

  True if it, or each of its lines, has at most 30 words and has no lower-case
  letter, starts with a chapter-like word and a number, or is at most 12
  title-case words without final punctuation (after an optional numeral).
  """
  if not block:
    return False
  return _is_heading_text(' '.join(block)) or all(
      _is_heading_text(line) for line in block
  )


def _is_heading_text(text: str) -> bool:
  words = text.split()
  if len(words) > _HEADING_MAX_WORDS:
    return False
  if not any(c.islower() for c in text):
    return True
  if _CHAPTER_HEADING.match(text):
    return True
  numeral = _LEADING_NUMERAL.match(text)
  if numeral:
    text = text[numeral.end() :].rstrip('.')
    words = text.split()
  if not words or len(words) > _TITLE_MAX_WORDS:
    return False
  if _TERMINAL_PUNCTUATION.search(text):
    return False
  for word in words:
    word = word.strip(_WORD_PUNCTUATION)
    if (
        word
        and not word[0].isupper()
        and not word[0].isdigit()
        and (word.lower() not in _TITLE_SMALL_WORDS)
    ):
      return False
  return True


def find_files(
    inputs: Sequence[str],
    file_pattern: str = '*.txt',
    skipped: Optional[List[str]] = None,
    prune: Optional[Callable[[str, List[str]], bool]] = None,
) -> List[str]:
  """Expands files and directories (searched recursively) into sorted files.

  Each real file is listed once (directories reached again through links are
  not walked again). `skipped` gets the files the pattern left out;
  `prune(directory, file_names)` True leaves a directory out.

  Raises:
    FileNotFoundError: an input does not exist.
    ValueError: `inputs` is empty, or a directory holds no matching file.
  """
  if not inputs:
    raise cli.UserError('No corpus inputs given.')
  files = []
  for path in inputs:
    if tf.io.gfile.isdir(path):
      found = sorted(_walk_matching(path, file_pattern, skipped, prune))
      if not found:
        raise cli.UserError(
            f'corpus directory {path}: no files matching '
            f'{file_pattern!r} found (searched recursively, leaving out '
            'folders written by this repository).'
        )
      files.extend(found)
    elif tf.io.gfile.exists(path):
      files.append(path)
    else:
      raise FileNotFoundError(f'corpus input {path} does not exist.')
  return list({real_path(path): path for path in reversed(files)}.values())[
      ::-1
  ]


def real_path(path: str) -> str:
  """The path without symbolic links (local paths; others as they are)."""
  return path if '://' in path else os.path.realpath(path)


def _walk_matching(
    directory: str,
    file_pattern: str,
    skipped: Optional[List[str]],
    prune: Optional[Callable[[str, List[str]], bool]],
) -> Iterator[str]:
  # tf.io.gfile.walk, like os.walk, descends only into the directories left
  # in `dirs`, in their order; it follows links to directories, so each real
  # directory is walked once.
  walked = set()
  for root, dirs, names in tf.io.gfile.walk(directory):
    real = real_path(root)
    if real in walked or (prune is not None and prune(root, names)):
      dirs[:] = []
      continue
    walked.add(real)
    dirs.sort()
    for name in names:
      if fnmatch.fnmatch(name, file_pattern):
        yield os.path.join(root, name)
      elif skipped is not None:
        skipped.append(os.path.join(root, name))


def read_lines(
    path: str, stats: CorpusStats, encoding_errors: str = 'strict'
) -> Optional[Iterator[str]]:
  """Reads a file as UTF-8, `_READ_CHUNK` bytes at a time, line by line.

  A leading BOM is dropped, CRLF and CR become LF; per-file counters are added
  after the last line. Returns None for an unreadable file (counted and named).
  While iterating, raises UserError on bytes not UTF-8 ('strict') or a failed
  read.
  """
  f = tf.io.gfile.GFile(path, 'rb')
  try:
    head = f.read(_READ_CHUNK)
    while len(head) < len(_BOM):
      more = f.read(_READ_CHUNK)
      if not more:
        break
      head += more
  except (tf.errors.OpError, OSError) as error:
    f.close()
    stats.skip_unreadable_file(path, _first_line(error))
    return None
  stats.files += 1
  return _decoded_lines(f, head, path, stats, encoding_errors)


def _first_line(error: Exception) -> str:
  message = getattr(error, 'message', None) or str(error)
  return message.splitlines()[0]


# Byte-order marks of the encodings that are not UTF-8, longest first.
_WIDE_BOMS = (
    (codecs.BOM_UTF32_LE, 'UTF-32LE'),
    (codecs.BOM_UTF32_BE, 'UTF-32BE'),
    (codecs.BOM_UTF16_LE, 'UTF-16LE'),
    (codecs.BOM_UTF16_BE, 'UTF-16BE'),
)


def wide_encoding(head: bytes) -> Optional[str]:
  """'UTF-16LE', ... if a file's first bytes are UTF-16 or UTF-32, else None.

  By the BOM or the NUL-byte pattern of mostly-ASCII text (valid UTF-8 that
  would read as NULs and single letters).
  """
  for bom, name in _WIDE_BOMS:
    if head.startswith(bom):
      return name
  sample = head[: 1024 - 1024 % 4]
  if len(sample) < 8 or sample.count(0) < len(sample) // 3:
    return None
  by_position = [sample[i::4].count(0) / len(sample[i::4]) for i in range(4)]
  if sum(by_position[i] > 0.9 for i in range(4)) == 3:
    return 'UTF-32LE' if by_position[0] < 0.9 else 'UTF-32BE'
  odd = (by_position[1] + by_position[3]) / 2
  even = (by_position[0] + by_position[2]) / 2
  if odd > 0.6 and even < 0.1:
    return 'UTF-16LE'
  if even > 0.6 and odd < 0.1:
    return 'UTF-16BE'
  return None


def _decoded_lines(
    f, head: bytes, path: str, stats: CorpusStats, encoding_errors: str
) -> Iterator[str]:
  """The lines of the open file `f`, whose first bytes `head` were read."""
  _refuse_wide_encoding(f, head, path)
  with f:
    bom = len(_BOM) if head.startswith(_BOM) else 0
    stats.files_with_bom += bool(bom)
    stats.bytes_read += len(head)
    decoder = codecs.getincrementaldecoder('utf-8')(encoding_errors)
    chunk, offset = head[bom:], bom  # `offset`: the file offset of `chunk`.
    final = not head
    # Each undecodable sequence becomes one U+FFFD; genuine U+FFFD characters
    # in the file are encoded as EF BF BD and are not errors. `tail` (the
    # last bytes before `chunk`) finds those split between two chunks.
    replacements, genuine, tail = 0, 0, b''
    crlf, pending = False, ''
    while True:
      buffered = len(decoder.getstate()[0])
      try:
        text = decoder.decode(chunk, final)
      except UnicodeDecodeError as error:
        raise _not_utf8(path, offset - buffered, error) from None
      replacements += text.count('\ufffd')
      edge = len(_REPLACEMENT) - 1
      genuine += chunk.count(_REPLACEMENT)
      genuine += (tail + chunk[:edge]).count(_REPLACEMENT)
      tail = (tail + chunk[-edge:])[-edge:]
      crlf = crlf or '\r' in text
      text = pending + text
      hold = '\r' if text.endswith('\r') and not final else ''
      if hold:
        text = text[:-1]  # It may start a CRLF that the next chunk ends.
      lines = text.replace('\r\n', '\n').replace('\r', '\n').split('\n')
      pending = lines.pop() + hold
      stats.lines_read += len(lines)
      yield from lines
      if final:
        break
      offset += len(chunk)
      chunk = _read_more(f, path, offset)
      stats.bytes_read += len(chunk)
      final = not chunk
    if pending:
      stats.lines_read += 1
      yield pending
    errors = replacements - genuine
    stats.decode_errors += errors
    stats.files_with_decode_errors += bool(errors)
    stats.files_with_crlf += crlf


def _refuse_wide_encoding(f, head: bytes, path: str) -> None:
  """Closes `f` and refuses it if `head` is UTF-16 or UTF-32."""
  encoding = wide_encoding(head)
  if encoding is not None:
    f.close()
    raise cli.UserError(
        f'{path} is {encoding}, not UTF-8 (a corpus is read as UTF-8 even '
        f'with --encoding_errors=replace); convert it, e.g. `iconv -f '
        f'{encoding} -t UTF-8`.'
    )


def _not_utf8(
    path: str, offset: int, error: UnicodeDecodeError
) -> cli.UserError:
  """The error for bytes that are not UTF-8, `offset` that of `error.object`."""
  return cli.UserError(
      f'{path} is not UTF-8: byte {offset + error.start} '
      f'(0x{error.object[error.start]:02x}) starts no UTF-8 character. '
      'Convert the file to UTF-8 (e.g. '
      '`iconv -f latin1 -t utf-8`), or pass --encoding_errors=replace '
      'to read it with each bad byte sequence replaced by U+FFFD.'
  )


def _read_more(f, path: str, offset: int) -> bytes:
  """The next chunk of `f` (b'' at its end)."""
  try:
    return f.read(_READ_CHUNK)
  except (tf.errors.OpError, OSError) as error:
    raise cli.UserError(
        f'{path}: reading failed at byte {offset} ({_first_line(error)}); '
        'check that the file is intact and readable, then rerun.'
    ) from None


def strip_gutenberg_boilerplate(
    lines: Iterable[str],
    stats: CorpusStats,
    read_again: Callable[[], Iterable[str]],
    max_buffered_chars: Optional[int] = None,
) -> Iterator[str]:
  """Yields the lines strictly between the Gutenberg START and END markers.

  Header lines are held up to `max_buffered_chars` (None: no limit); a file
  without a START line is returned whole (`read_again` past that bound) and
  counted in `files_without_gutenberg_markers`.
  """
  lines = iter(lines)
  header, held, seen = [], 0, 0
  for line in lines:
    seen += 1
    if _GUTENBERG_START.match(line):
      stats.skip_lines('gutenberg header', seen)
      break
    if header is not None:
      header.append(line)
      held += len(line) + 1
      if max_buffered_chars is not None and held >= max_buffered_chars:
        header = None
  else:
    stats.files_without_gutenberg_markers += 1
    yield from (header if header is not None else read_again())
    return
  footer = 0
  for line in lines:
    if footer or _GUTENBERG_END.match(line):
      footer += 1
    else:
      yield line
  stats.skip_lines('gutenberg footer', footer)


def split_paragraphs(
    lines: Iterable[Optional[str]],
    stats: CorpusStats,
    max_chars: Optional[int] = None,
) -> Iterator[List[str]]:
  """Yields blocks of non-blank stripped lines separated by blank lines.

  `None` lines (dropped) neither belong to nor separate blocks; a block is cut
  after the line bringing it to `max_chars` characters (None: no limit).
  """
  block, size = [], 0
  for line in lines:
    if line is None:
      continue
    stripped = line.strip()
    if stripped:
      block.append(stripped)
      size += len(stripped)
      if max_chars is not None and size >= max_chars:
        yield block
        block, size = [], 0
      continue
    stats.blank_lines += 1
    if block:
      yield block
      block, size = [], 0
  if block:
    yield block


class CorpusReader:
  """Turns files into documents of sentences according to `CleaningOptions`."""

  def __init__(self, options: CleaningOptions):
    self._options = options
    self._drop_regexes = [
        (pattern, re.compile(pattern)) for pattern in options.drop_line_regexes
    ]

  def iter_documents(
      self, path: str, stats: CorpusStats, max_chars: Optional[int] = None
  ) -> Iterator[List[str]]:
    """Yields one file's non-empty documents (lists of sentences) as it is read.

    With `max_chars`, paragraphs and 'file'-mode documents are cut at that many
    characters and a Gutenberg file without an early START marker is read twice.
    An unreadable file gives nothing and is counted.
    """
    lines = read_lines(path, stats, self._options.encoding_errors)
    if lines is None:
      return
    if self._options.strip_gutenberg:
      lines = strip_gutenberg_boilerplate(
          lines, stats, lambda: self._read_again(path), max_chars
      )
    blocks = split_paragraphs(self._drop_lines(lines, stats), stats, max_chars)
    blocks = self._drop_blocks(blocks, stats)
    if self._options.document_mode == 'file':
      documents = self._file_documents(blocks, stats, max_chars)
    else:
      documents = self._block_documents(blocks, stats)
    for document in documents:
      stats.documents += 1
      yield document

  def _read_again(self, path: str) -> Iterator[str]:
    """The lines of a file read before, without counting them again."""
    lines = read_lines(path, CorpusStats(), self._options.encoding_errors)
    if lines is None:
      raise cli.UserError(
          f'{path} could not be read a second time (needed to keep a long '
          'file without Gutenberg markers whole); check that it is readable '
          'and unchanged, then rerun.'
      )
    return lines

  def _block_documents(
      self, blocks: Iterable[List[str]], stats: CorpusStats
  ) -> Iterator[List[str]]:
    """'blank_line' mode: each block with a sentence is a document."""
    for block in blocks:
      document = self._paragraph_sentences(block, stats)
      if document:
        yield document
      else:
        stats.empty_documents_dropped += 1

  def _file_documents(
      self,
      blocks: Iterable[List[str]],
      stats: CorpusStats,
      max_chars: Optional[int],
  ) -> Iterator[List[str]]:
    """'file' mode: the file's sentences, cut every `max_chars` characters."""
    document, size, made = [], 0, False
    for block in blocks:
      sentences = self._paragraph_sentences(block, stats)
      document.extend(sentences)
      size += sum(len(s) for s in sentences)
      if max_chars is not None and size >= max_chars:
        yield document
        document, size, made = [], 0, True
    if document:
      yield document
    elif not made:
      stats.empty_documents_dropped += 1

  def _drop_blocks(
      self, blocks: Iterable[List[str]], stats: CorpusStats
  ) -> Iterator[List[str]]:
    """Drops illustration and heading paragraphs, counting their lines."""
    for block in blocks:
      if self._options.strip_gutenberg and _GUTENBERG_ILLUSTRATION.match(
          '\n'.join(block)
      ):
        stats.skip_lines('gutenberg illustration', len(block))
      elif self._options.drop_headings and is_heading(block):
        stats.skip_lines('heading', len(block))
      else:
        yield block

  def _drop_lines(
      self, lines: Iterable[str], stats: CorpusStats
  ) -> Iterator[Optional[str]]:
    """Replaces lines matched by a drop regex with `None`."""
    for line in lines:
      for pattern, regex in self._drop_regexes:
        if regex.search(line):
          stats.skip_lines(f'drop_line_regex {pattern!r}')
          yield None
          break
      else:
        yield line

  def _paragraph_sentences(
      self, block: List[str], stats: CorpusStats
  ) -> List[str]:
    """A block's sentences past the length cut; a paragraph if it has any."""
    if self._options.strip_gutenberg:
      removed = [_GUTENBERG_ITALICS.subn('', line) for line in block]
      block = [line for line, _ in removed]
      stats.italics_underscores_removed += sum(count for _, count in removed)
    if self._options.sentence_per_line:
      candidates = [_WHITESPACE.sub(' ', line).strip() for line in block]
    else:
      candidates = split_sentences(' '.join(block))
    sentences = [
        s for s in candidates if len(s) >= self._options.min_sentence_chars
    ]
    stats.sentences_dropped_short += len(candidates) - len(sentences)
    stats.paragraphs += bool(sentences)
    stats.sentences += len(sentences)
    stats.characters += sum(len(s) for s in sentences)
    return sentences


def empty_corpus_message(inputs: Sequence[str], stats: CorpusStats) -> str:
  """Why a corpus gave no document: what was read, skipped and dropped."""
  unreadable = ''
  if stats.files_unreadable:
    unreadable = (
        f'; {stats.files_unreadable} unreadable files skipped, e.g. '
        f'{stats.unreadable_files[0]}'
    )
  return (
      f'corpus {", ".join(inputs)}: {stats.files} files read, 0 non-empty '
      'documents after cleaning, no text found (lines read: '
      f'{stats.lines_read}; lines skipped: {stats.skipped_summary()}; '
      f'sentences dropped as too short: {stats.sentences_dropped_short}'
      f'{unreadable}).'
  )
