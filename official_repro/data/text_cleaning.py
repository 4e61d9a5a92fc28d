"""Reads plain-text corpora into documents of sentences.

A corpus is a list of files or directories (searched recursively for files
matching a glob, `*.txt` by default); paths go through `tf.io.gfile` (local,
`gs://`, ...). Files are decoded as UTF-8 (a byte-order mark is dropped,
undecodable bytes become U+FFFD and are counted), line endings are normalised,
optional boilerplate is removed, and the text is grouped into documents:

* `document_mode='blank_line'`: every block of lines between blank lines is one
  document (the one-document-per-paragraph layout of many corpora).
* `document_mode='file'`: every file is one document; its blank-line-separated
  blocks are its paragraphs (books).

Heading-like paragraphs (chapter headings, tables of contents, all-capitals
titles, short title-case lines) are dropped unless `drop_headings=False`; see
`is_heading`.

Within a paragraph the lines are joined with spaces (hard-wrapped text) and the
result is split into sentences with `split_sentences`; with
`sentence_per_line=True` every non-empty line is taken as one sentence instead
(the classic BERT input format).

Everything that is dropped is counted in `CorpusStats`, whose `report()` says
what was read and what was skipped and why.
"""

import dataclasses
import fnmatch
import os
import re
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import tensorflow as tf

from official_repro.common import cli
from official_repro.common import progress

DOCUMENT_MODES = ('blank_line', 'file')
# How many unreadable files `CorpusStats` names (all are counted).
MAX_NAMED_FILES = 20
ENCODING_ERRORS = ('strict', 'replace')

_GUTENBERG_START = re.compile(r'^\*{3}\s*START OF', re.IGNORECASE)
_GUTENBERG_END = re.compile(r'^\*{3}\s*END OF', re.IGNORECASE)

# Abbreviations after which a period does not end a sentence (lower case,
# without the final period).
_ABBREVIATIONS = frozenset(
    [
        'mr',
        'mrs',
        'ms',
        'messrs',
        'mme',
        'mlle',
        'dr',
        'st',
        'jr',
        'sr',
        'prof',
        'rev',
        'hon',
        'gen',
        'col',
        'capt',
        'lt',
        'sgt',
        'gov',
        'esq',
        'vs',
        'etc',
        'e.g',
        'i.e',
        'cf',
        'viz',
        'al',
        'approx',
        'ca',
        'vol',
        'vols',
        'fig',
        'figs',
        'pp',
        'ed',
        'eds',
        'inc',
        'ltd',
        'co',
        'corp',
        'dept',
        'mt',
        'ft',
        'jan',
        'feb',
        'mar',
        'apr',
        'jun',
        'jul',
        'aug',
        'sep',
        'sept',
        'oct',
        'nov',
        'dec',
    ]
)
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
_TITLE_SMALL_WORDS = frozenset(
    [
        'a',
        'an',
        'the',
        'and',
        'or',
        'nor',
        'but',
        'of',
        'in',
        'on',
        'at',
        'to',
        'for',
        'by',
        'with',
        'from',
        'as',
        'into',
        'upon',
        'de',
        'la',
        'le',
        'du',
        'von',
        'van',
        'der',
    ]
)
_WORD_PUNCTUATION = '\'"\u2018\u2019\u201c\u201d()[]_*,;:.!?-\u2014'
_TERMINAL_PUNCTUATION = re.compile(r'[.!?,;:\-\u2014]["\'\u2019\u201d)\]_]*$')
_LEADING_PUNCTUATION = '(["\'\u2018\u201c_['
_WHITESPACE = re.compile(r'\s+')


@dataclasses.dataclass(frozen=True)
class CleaningOptions:
  """How to turn files into documents.

  Attributes:
    document_mode: 'blank_line' (each blank-line-separated block is one
      document) or 'file' (each file is one document of paragraphs).
    sentence_per_line: take every non-empty line as one sentence instead of
      joining lines and splitting sentences with the regex splitter.
    strip_gutenberg: keep only the lines between the Project Gutenberg
      `*** START OF` and `*** END OF` marker lines, drop `[Illustration: ...]`
      paragraphs and remove the underscores that mark italics (`_word_`).
    drop_line_regexes: lines matching any of these (`re.search`, applied to the
      line without its line ending) are dropped.
    drop_headings: drop heading-like paragraphs (see `is_heading`).
    min_sentence_chars: sentences shorter than this are dropped.
    file_pattern: glob matched against file names when an input is a
      directory.
    encoding_errors: 'strict' refuses a file that is not UTF-8, naming it
      and its first bad byte; 'replace' decodes it anyway, each undecodable
      sequence becoming U+FFFD (counted in `decode_errors`).
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
          'min_sentence_chars must be >= 0, got ' f'{self.min_sentence_chars}.'
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
  """Counters collected while reading a corpus.

  Attributes:
    files: files read.
    bytes_read: raw bytes read.
    documents: non-empty documents returned.
    paragraphs: non-empty paragraphs (blocks of lines) kept.
    sentences: sentences returned.
    characters: characters in the returned sentences.
    lines_read: lines read (after line-ending normalisation).
    blank_lines: blank lines (paragraph separators, not content).
    lines_skipped_by_reason: dropped non-content lines keyed by reason.
    sentences_dropped_short: sentences shorter than `min_sentence_chars`.
    italics_underscores_removed: Gutenberg `_italics_` underscores removed.
    empty_documents_dropped: documents without a sentence after cleaning
      (in 'file' mode, files).
    decode_errors: undecodable byte sequences replaced by U+FFFD.
    files_with_decode_errors: files with at least one decode error.
    files_with_bom: files that started with a UTF-8 byte-order mark.
    files_with_crlf: files with CRLF or CR line endings.
    files_without_gutenberg_markers: files kept whole under
      `strip_gutenberg` because they have no `*** START OF` line.
    files_unreadable: files that could not be read (permissions, a broken
      link, an I/O error) and were skipped; each is named in
      `unreadable_files`.
    unreadable_files: `'<path>: <error>'` of the first
      `MAX_NAMED_FILES` unreadable files.
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

  def add(self, other: 'CorpusStats') -> None:
    """Adds the counters of `other` (another part of the corpus) to these."""
    for field in dataclasses.fields(self):
      mine, theirs = getattr(self, field.name), getattr(other, field.name)
      if isinstance(mine, dict):
        for key, count in theirs.items():
          mine[key] = mine.get(key, 0) + count
      elif isinstance(mine, list):
        mine.extend(theirs[: max(0, MAX_NAMED_FILES - len(mine))])
      else:
        setattr(self, field.name, mine + theirs)

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


def split_sentences(text: str) -> List[str]:
  """Splits one paragraph of running text into sentences.

  A sentence ends after `.`, `!` or `?` (with any closing quotes or brackets)
  when whitespace and then an upper-case letter, a digit or an opening quote or
  bracket follow. A period does not end a sentence after a common abbreviation
  ("Mr.", "e.g.", "etc."), after a single capital initial ("J. R. Smith",
  except the pronoun "I"), or after "No."/"p." when a number follows.

  Args:
    text: a paragraph; internal whitespace runs are treated as one space.

  Returns:
    The sentences, stripped, in order; empty if `text` is blank.
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
  """Whether a paragraph looks like a heading rather than running text.

  A paragraph is a heading if the whole of it, or every one of its lines, is
  at most 30 words and
    * has no lower-case letter ("CHAPTER IV", "BOOK I.", "* * *", "23"), or
    * starts with a chapter-like word and a number ("Chapter 12",
      "Chapter IV. The Mail", "Book the First--Recalled to Life"), or
    * is at most 12 words of title case without final punctuation, after an
      optional leading number ("Youth", "I. The Period", "New York").

  Args:
    block: the stripped, non-empty lines of one paragraph.

  Returns:
    True for a heading.
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


def find_files(inputs: Sequence[str], file_pattern: str = '*.txt') -> List[str]:
  """Expands files and directories into a sorted list of files.

  Args:
    inputs: file or directory paths. Directories are searched recursively for
      file names matching `file_pattern`; files are taken as given.
    file_pattern: glob for file names inside directories.

  Returns:
    The files, directories expanded in sorted order, duplicates removed.

  Raises:
    FileNotFoundError: an input does not exist.
    ValueError: `inputs` is empty, or a directory holds no matching file.
  """
  if not inputs:
    raise cli.UserError('No corpus inputs given.')
  files = []
  for path in inputs:
    if tf.io.gfile.isdir(path):
      found = sorted(_walk_matching(path, file_pattern))
      if not found:
        raise cli.UserError(
            f'corpus directory {path}: no files matching '
            f'{file_pattern!r} found (searched recursively).'
        )
      files.extend(found)
    elif tf.io.gfile.exists(path):
      files.append(path)
    else:
      raise FileNotFoundError(f'corpus input {path} does not exist.')
  return list(dict.fromkeys(files))


def _walk_matching(directory: str, file_pattern: str) -> Iterator[str]:
  # tf.io.gfile.walk, like os.walk, descends only into the directories left
  # in `dirs`, in their order.
  for root, dirs, names in tf.io.gfile.walk(directory):
    dirs.sort()
    for name in names:
      if fnmatch.fnmatch(name, file_pattern):
        yield os.path.join(root, name)


def read_text_file(
    path: str, stats: CorpusStats, encoding_errors: str = 'strict'
) -> List[str]:
  """Reads a file as UTF-8 and returns its lines without line endings.

  A leading byte-order mark is dropped and CRLF and CR become LF. A file
  that is not UTF-8 is refused, or with `encoding_errors='replace'` its
  undecodable bytes are replaced by U+FFFD and counted in
  `stats.decode_errors`.

  Args:
    path: the file.
    stats: counters to update (files, bytes, lines, BOM, CRLF, decode errors).
    encoding_errors: 'strict' or 'replace' (see `CleaningOptions`).

  Returns:
    The lines of the file.

  Raises:
    UserError: with 'strict', for a file that is not UTF-8, naming the file
      and the offset of its first bad byte.
  """
  with tf.io.gfile.GFile(path, 'rb') as f:
    raw = f.read()
  stats.files += 1
  stats.bytes_read += len(raw)
  bom = 3 if raw.startswith(b'\xef\xbb\xbf') else 0
  if bom:
    stats.files_with_bom += 1
    raw = raw[bom:]
  if encoding_errors == 'strict':
    try:
      raw.decode('utf-8')
    except UnicodeDecodeError as error:
      raise cli.UserError(
          f'{path} is not UTF-8: byte {error.start + bom} '
          f'(0x{raw[error.start]:02x}) starts no UTF-8 character. '
          'Convert the file to UTF-8 (e.g. '
          '`iconv -f latin1 -t utf-8`), or pass --encoding_errors=replace '
          'to read it with each bad byte sequence replaced by U+FFFD.'
      ) from None
  text = raw.decode('utf-8', errors='replace')
  # Each undecodable sequence becomes one U+FFFD; genuine U+FFFD characters
  # in the file are encoded as EF BF BD and are not errors.
  errors = text.count('\ufffd') - raw.count(b'\xef\xbf\xbd')
  if errors:
    stats.decode_errors += errors
    stats.files_with_decode_errors += 1
  if '\r' in text:
    stats.files_with_crlf += 1
    text = text.replace('\r\n', '\n').replace('\r', '\n')
  lines = text.split('\n')
  if lines and not lines[-1]:
    lines.pop()
  stats.lines_read += len(lines)
  return lines


def strip_gutenberg_boilerplate(
    lines: List[str], stats: CorpusStats
) -> List[str]:
  """Keeps the lines strictly between the Gutenberg START and END markers.

  Args:
    lines: the lines of one file.
    stats: counters; dropped lines are counted as 'gutenberg header' and
      'gutenberg footer'. A file without a START marker is returned whole and
      counted in `files_without_gutenberg_markers`.

  Returns:
    The body lines.
  """
  start = next(
      (i for i, line in enumerate(lines) if _GUTENBERG_START.match(line)), None
  )
  if start is None:
    stats.files_without_gutenberg_markers += 1
    return lines
  end = next(
      (
          i
          for i in range(start + 1, len(lines))
          if _GUTENBERG_END.match(lines[i])
      ),
      len(lines),
  )
  stats.skip_lines('gutenberg header', start + 1)
  stats.skip_lines('gutenberg footer', len(lines) - end)
  return lines[start + 1 : end]


def split_paragraphs(
    lines: Sequence[Optional[str]], stats: CorpusStats
) -> List[List[str]]:
  """Groups lines into blocks separated by blank lines.

  Args:
    lines: lines of one file; `None` marks a dropped line, which neither
      belongs to a block nor separates blocks.
    stats: counters; blank lines are counted.

  Returns:
    Blocks of non-blank, stripped lines.
  """
  blocks = []
  block = []
  for line in lines:
    if line is None:
      continue
    if line.strip():
      block.append(line.strip())
      continue
    stats.blank_lines += 1
    if block:
      blocks.append(block)
      block = []
  if block:
    blocks.append(block)
  return blocks


class CorpusReader:
  """Turns files into documents of sentences according to `CleaningOptions`."""

  def __init__(self, options: CleaningOptions):
    self._options = options
    self._drop_regexes = [
        (pattern, re.compile(pattern)) for pattern in options.drop_line_regexes
    ]

  def read(
      self, inputs: Sequence[str], progress_label: str = ''
  ) -> Tuple[List[List[str]], CorpusStats]:
    """Reads all inputs.

    Args:
      inputs: files or directories.
      progress_label: logs the bytes read (file by file) under this label
        (`progress.Progress`); '' for no log.

    Returns:
      `(documents, stats)`: each document is a non-empty list of sentences.

    Raises:
      FileNotFoundError: an input does not exist.
      ValueError: nothing to read, or no non-empty document after cleaning.
    """
    stats = CorpusStats()
    documents = []
    paths = find_files(inputs, self._options.file_pattern)
    reporter = progress.Progress(
        sum(tf.io.gfile.stat(path).length for path in paths)
        if progress_label
        else 0,
        progress_label,
        'bytes',
    )
    for path in paths:
      documents.extend(self.read_file(path, stats))
      reporter.update(stats.bytes_read)
    stats.documents = len(documents)
    if not documents:
      raise cli.UserError(empty_corpus_message(inputs, stats))
    return documents, stats

  def read_file(self, path: str, stats: CorpusStats) -> List[List[str]]:
    """The documents of one file, counting what is dropped in `stats`.

    Args:
      path: the file (any `tf.io.gfile` path).
      stats: counters to update. A file that cannot be read (permissions, a
        broken link, an I/O error) gives no document and is counted and
        named (`CorpusStats.skip_unreadable_file`).

    Returns:
      The file's non-empty documents, each a list of sentences.

    Raises:
      UserError: with `encoding_errors='strict'`, a file that is not UTF-8.
    """
    try:
      lines = read_text_file(path, stats, self._options.encoding_errors)
    except (tf.errors.OpError, OSError) as error:
      message = getattr(error, 'message', None) or str(error)
      stats.skip_unreadable_file(path, message.splitlines()[0])
      return []
    if self._options.strip_gutenberg:
      lines = strip_gutenberg_boilerplate(lines, stats)
    blocks = split_paragraphs(self._drop_lines(lines, stats), stats)
    blocks = self._drop_blocks(blocks, stats)
    if self._options.document_mode == 'file':
      groups = [blocks]
    else:
      groups = [[block] for block in blocks]
    documents = []
    for group in groups:
      document = []
      for block in group:
        sentences = self._block_sentences(block, stats)
        if sentences:
          stats.paragraphs += 1
          document.extend(sentences)
      if document:
        documents.append(document)
      else:
        stats.empty_documents_dropped += 1
    return documents

  def _drop_blocks(
      self, blocks: List[List[str]], stats: CorpusStats
  ) -> List[List[str]]:
    """Drops illustration and heading paragraphs, counting their lines."""
    kept = []
    for block in blocks:
      if self._options.strip_gutenberg and _GUTENBERG_ILLUSTRATION.match(
          '\n'.join(block)
      ):
        stats.skip_lines('gutenberg illustration', len(block))
      elif self._options.drop_headings and is_heading(block):
        stats.skip_lines('heading', len(block))
      else:
        kept.append(block)
    return kept

  def _drop_lines(
      self, lines: Sequence[str], stats: CorpusStats
  ) -> List[Optional[str]]:
    """Replaces lines matched by a drop regex with `None`."""
    if not self._drop_regexes:
      return list(lines)
    kept = []
    for line in lines:
      for pattern, regex in self._drop_regexes:
        if regex.search(line):
          stats.skip_lines(f'drop_line_regex {pattern!r}')
          kept.append(None)
          break
      else:
        kept.append(line)
    return kept

  def _block_sentences(self, block: List[str], stats: CorpusStats) -> List[str]:
    """Splits one block of lines into sentences and applies the length cut."""
    if self._options.strip_gutenberg:
      block = [self._remove_italics(line, stats) for line in block]
    if self._options.sentence_per_line:
      candidates = [_WHITESPACE.sub(' ', line).strip() for line in block]
    else:
      candidates = split_sentences(' '.join(block))
    sentences = []
    for sentence in candidates:
      if len(sentence) < self._options.min_sentence_chars:
        stats.sentences_dropped_short += 1
        continue
      sentences.append(sentence)
    stats.sentences += len(sentences)
    stats.characters += sum(len(s) for s in sentences)
    return sentences

  @staticmethod
  def _remove_italics(line: str, stats: CorpusStats) -> str:
    line, count = _GUTENBERG_ITALICS.subn('', line)
    stats.italics_underscores_removed += count
    return line


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


def read_corpus(
    inputs: Sequence[str],
    options: CleaningOptions = CleaningOptions(),
    progress_label: str = '',
) -> Tuple[List[List[str]], CorpusStats]:
  """Reads files or directories into documents of sentences.

  Args:
    inputs: files or directories (searched recursively for
      `options.file_pattern`).
    options: the cleaning options.
    progress_label: logs the bytes read (file by file) under this label
      (`progress.Progress`); '' for no log.

  Returns:
    `(documents, stats)`, documents as `List[List[str]]` (sentences).

  Raises:
    FileNotFoundError: an input path does not exist.
    ValueError: no inputs, a directory without matching files, or no
      non-empty document after cleaning.
  """
  return CorpusReader(options).read(inputs, progress_label)
