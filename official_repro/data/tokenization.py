r"""Text to WordPiece ids exactly as google-research/bert's `tokenization.py`.

Every release imported here was trained on the ids of BERT's `FullTokenizer`;
`BertWordPieceTokenizer` makes them in graph: (1) invalid UTF-8 -> U+FFFD;
(2) C* but \t\n\r, U+0000, U+FFFD deleted, whitespace -> space; (3) spaces
around CJK ideographs; (4) uncased: `str.lower` (`lower_as_python`), NFD,
Mn deleted; (5) punctuation split off, split at spaces; (6) words over
`MAX_INPUT_CHARS_PER_WORD` characters -> [UNK], others to
`FastWordpieceTokenizer`. Character classes are Python's `unicodedata`
(the original's) as code point ranges: TF 2.20's RE2 `\p{...}` is a later
Unicode. Not reused: TF Text's `FastBertTokenizer`/`BertTokenizer`
(NFKC_Casefold lower-casing, ß -> ss; splits at characters the original
deletes; `max_bytes_per_word` counts bytes). Hugging Face's
`BertTokenizerFast` differs in final sigma, CJK Extension E and Unicode.
"""

import functools
import re
import unicodedata
from typing import NamedTuple, Sequence, Tuple

import tensorflow as tf
import tensorflow_text as tf_text

# The name `metadata.json` gives this tokenizer (records.py); records
# without the field were written with TF Text's FastBertTokenizer.
TOKENIZER_NAME = 'wordpiece-bert'
# The original's `WordpieceTokenizer(max_input_chars_per_word=100)`.
MAX_INPUT_CHARS_PER_WORD = 100
SUFFIX_INDICATOR = '##'
UNKNOWN_TOKEN = '[UNK]'

_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
_ASCII_PUNCTUATION = ((33, 47), (58, 64), (91, 96), (123, 126))
_CAPITAL_SIGMA = '\u03a3'
_SMALL_SIGMA = '\u03c3'
_FINAL_SIGMA = '\u03c2'
# Code point kinds of `_character_tables` (0: none of these).
_DELETED, _SPACE, _PUNCTUATION, _NONSPACING_MARK = range(1, 5)
_MAX_UTF8_BYTES_PER_CHAR = 4


def regex_code(code_point: int) -> str:
  """The RE2 escape of one code point (Σ: backslash, x{3A3})."""
  return f'\\x{{{code_point:X}}}'


def _regex_range(first: int, last: int) -> str:
  return f'{regex_code(first)}-{regex_code(last)}'


def regex_ranges(flags: bytes, value: int) -> str:
  """RE2 class ranges (no brackets) of the code points flagged `value`."""
  parts = []
  for run in re.finditer(re.escape(bytes([value])) + b'+', flags):
    first, last = run.start(), run.end() - 1
    parts.append(
        _regex_range(first, last) if first < last else regex_code(first)
    )
  if not parts:
    raise ValueError(f'No code point of kind {value}.')
  return ''.join(parts)


class _CharacterTables(NamedTuple):
  """What `BertWordPieceTokenizer` needs to know of Unicode, from Python."""

  deleted: str  # RE2 class: deleted by the cleaning
  space: str  # RE2 class: becomes a space (U+0020 itself left out)
  cjk: str  # RE2 class: CJK ideographs
  punctuation: str  # RE2 class: split off as words
  nonspacing_marks: str  # RE2 class: deleted after NFD (uncased)
  cased: str  # RE2 class body: cased and not case-ignorable
  case_ignorable: str  # RE2 class body
  lower_case: Tuple[Tuple[str, str], ...]  # (char, str.lower), none of Σ


def _kind(code_point: int, char: str, category: str) -> int:
  """The `_character_tables` kind of one code point (0: none)."""
  if char in '\t\n\r':
    return _SPACE
  if code_point in (0, 0xFFFD) or category.startswith('C'):
    return _DELETED
  if char == ' ':
    return 0
  if category == 'Zs' or char.isspace():
    return _SPACE
  if category.startswith('P') or any(
      first <= code_point <= last for first, last in _ASCII_PUNCTUATION
  ):
    return _PUNCTUATION
  return _NONSPACING_MARK if category == 'Mn' else 0


@functools.lru_cache(maxsize=None)
def _character_tables() -> _CharacterTables:
  """Reads the character classes off `unicodedata` and `str.lower`, once.

  Cased and case-ignorable letters (for the final sigma) are those for which
  `str.lower` itself decides so.
  """
  kinds = bytearray(0x110000)
  cased = bytearray(0x110000)  # cased and not case-ignorable
  ignorable = bytearray(0x110000)  # case-ignorable
  lower_case = []
  for code_point in range(0x110000):
    if 0xD800 <= code_point <= 0xDFFF:  # surrogates: never in UTF-8
      continue
    char = chr(code_point)
    kinds[code_point] = _kind(code_point, char, unicodedata.category(char))
    if kinds[code_point] == _DELETED or char in '\t\n\r ':
      continue
    # Σ followed by this character and nothing else stays non-final (σ)
    # only when the character is cased and not case-ignorable; followed by
    # it and then a cased letter, also when it is case-ignorable.
    if ('\u0391\u03a3' + char).lower()[1] == _SMALL_SIGMA:
      cased[code_point] = 1
    elif ('\u0391\u03a3' + char + '\u0391').lower()[1] == _SMALL_SIGMA:
      ignorable[code_point] = 1
    if char != _CAPITAL_SIGMA and char.lower() != char:
      lower_case.append((char, char.lower()))
  kinds = bytes(kinds)
  cjk = ''.join(_regex_range(first, last) for first, last in _CJK_RANGES)
  return _CharacterTables(
      deleted=f'[{regex_ranges(kinds, _DELETED)}]',
      space=f'[{regex_ranges(kinds, _SPACE)}]',
      cjk=f'[{cjk}]',
      punctuation=f'[{regex_ranges(kinds, _PUNCTUATION)}]',
      nonspacing_marks=f'[{regex_ranges(kinds, _NONSPACING_MARK)}]',
      cased=regex_ranges(bytes(cased), 1),
      case_ignorable=regex_ranges(bytes(ignorable), 1),
      lower_case=tuple(lower_case),
  )


@functools.lru_cache(maxsize=None)
def _lower_case_fixes() -> Tuple[Tuple[str, str], ...]:
  """(char, `str.lower`) of the letters `tf.strings.lower` maps otherwise.

  Asked of the op once per process (TF 2.20's ICU predates Python's Unicode).
  """
  letters = _character_tables().lower_case
  with tf.init_scope():
    lowered = tf.strings.lower(
        [char for char, _ in letters], encoding='utf-8'
    ).numpy()
  return tuple(
      (char, lower)
      for (char, lower), ours in zip(letters, lowered)
      if ours.decode('utf-8') != lower
  )


def lower_as_python(text: tf.Tensor) -> tf.Tensor:
  """Python's `str.lower` of each string.

  `tf.strings.lower` (ICU), but strings holding a Σ or a letter it maps
  otherwise (`_lower_case_fixes`) get Python's mapping of those first.
  """
  tables = _character_tables()
  cased, ignorable = tables.cased, tables.case_ignorable
  fixes = _lower_case_fixes()
  special = ''.join(regex_code(ord(char)) for char, _ in fixes)
  has_special = tf.strings.regex_full_match(
      text, f'(?s).*[{regex_code(ord(_CAPITAL_SIGMA))}{special}].*'
  )
  where = tf.where(has_special)
  subset = tf.gather_nd(text, where)
  # A cased letter before the Σ (case-ignorable ones between) and none
  # after it (idem): the letter before, the Σ, and the first character
  # after the case-ignorable ones (or the end) are matched, so two
  # matches never need the same character.
  subset = tf.strings.regex_replace(
      subset,
      f'([{cased}])([{ignorable}]*){regex_code(ord(_CAPITAL_SIGMA))}'
      f'([{ignorable}]*)([^{cased}{ignorable}]|$)',
      rf'\1\2{_FINAL_SIGMA}\3\4',
  )
  subset = tf.strings.regex_replace(
      subset, regex_code(ord(_CAPITAL_SIGMA)), _SMALL_SIGMA
  )
  for char, lower in fixes:
    subset = tf.strings.regex_replace(subset, regex_code(ord(char)), lower)
  text = tf.tensor_scatter_nd_update(text, where, subset)
  return tf.strings.lower(text, encoding='utf-8')


class BertTextSplitter(tf.Module):
  """The original's `BasicTokenizer`: strings -> words, in graph."""

  def __init__(self, lower_case: bool, name: str = 'bert_text_splitter'):
    """`lower_case`: lower-case and strip accents (an uncased vocabulary)."""
    super().__init__(name=name)
    self.lower_case = lower_case
    self._tables = _character_tables()
    if lower_case:
      # Asked of tf.strings.lower now, eagerly, not while a graph is traced.
      _lower_case_fixes()

  def normalize(self, text: tf.Tensor) -> tf.Tensor:
    """Steps 1-4 of the module docstring: `[batch]` strings, cleaned."""
    tables = self._tables
    text = tf.strings.unicode_transcode(
        text, 'UTF-8', 'UTF-8', errors='replace', replacement_char=0xFFFD
    )
    text = tf.strings.regex_replace(text, tables.deleted, '')
    text = tf.strings.regex_replace(text, tables.space, ' ')
    text = tf.strings.regex_replace(text, f'({tables.cjk})', r' \1 ')
    if self.lower_case:
      text = lower_as_python(text)
      text = tf_text.normalize_utf8(text, 'NFD')
      text = tf.strings.regex_replace(text, tables.nonspacing_marks, '')
    return text

  def split(self, text: tf.Tensor) -> tf.RaggedTensor:
    """`[batch]` strings -> `[batch, (words)]` words (step 5)."""
    text = self.normalize(tf.reshape(tf.convert_to_tensor(text), [-1]))
    text = tf.strings.regex_replace(
        text, f'({self._tables.punctuation})', r' \1 '
    )
    # Only U+0020 is left of whitespace; split() splits at runs of it.
    return tf.strings.split(text)


class BertWordPieceTokenizer(tf.Module):
  """The original's `FullTokenizer`: strings -> WordPiece ids, in graph."""

  def __init__(
      self,
      tokens: Sequence[str],
      lower_case: bool,
      unknown_token: str = UNKNOWN_TOKEN,
      name: str = 'bert_wordpiece_tokenizer',
  ):
    """The WordPiece model of `tokens` (ValueError without `unknown_token`)."""
    super().__init__(name=name)
    tokens = list(tokens)
    if unknown_token not in tokens:
      raise ValueError(
          f'The vocabulary lacks the unknown token {unknown_token}.'
      )
    self.lower_case = lower_case
    self.vocab_size = len(tokens)
    self.unknown_id = tokens.index(unknown_token)
    self._unknown_token = unknown_token
    self._splitter = BertTextSplitter(lower_case)
    self._wordpiece = tf_text.FastWordpieceTokenizer(
        vocab=tokens,
        suffix_indicator=SUFFIX_INDICATOR,
        max_bytes_per_word=MAX_INPUT_CHARS_PER_WORD * _MAX_UTF8_BYTES_PER_CHAR,
        token_out_type=tf.int32,
        unknown_token=unknown_token,
        no_pretokenization=True,
    )

  def split(self, text: tf.Tensor) -> tf.RaggedTensor:
    """`[batch]` strings -> `[batch, (words)]`, before WordPiece."""
    return self._splitter.split(text)

  def tokenize(self, text: tf.Tensor) -> tf.RaggedTensor:
    """`[batch]` strings -> `[batch, (ids)]` int32 WordPiece ids."""
    words = self.split(text)
    flat = words.flat_values
    # An over-long word becomes the unknown token itself, a token of the
    # vocabulary, whose longest match in WordPiece is the whole of it.
    flat = tf.where(
        tf.strings.length(flat, unit='UTF8_CHAR') > MAX_INPUT_CHARS_PER_WORD,
        self._unknown_token,
        flat,
    )
    pieces = self._wordpiece.tokenize(flat)
    return words.with_flat_values(pieces).merge_dims(1, 2)
