r"""Text to WordPiece ids exactly as google-research/bert's `tokenization.py`.

Every release this repository imports was trained on ids made by the
original BERT `FullTokenizer`: `BasicTokenizer` (clean the text, split CJK
ideographs, whitespace-split, lower-case and strip accents when uncased,
split off punctuation) then `WordpieceTokenizer` (greedy longest match
first; `[UNK]` for a word it cannot cover or of more than 100 characters).
`BertWordPieceTokenizer` makes the same ids in graph, from TF and TF Text
ops on a batch of strings, so that it runs alike in `tf.data`, in the
record writers and in a SavedModel's `serve_text`:

  1. invalid UTF-8 becomes U+FFFD (`tf.strings.unicode_transcode`), which
     step 2 deletes (the original decodes with errors='ignore');
  2. U+0000, U+FFFD and every character of category C* (control, format,
     surrogate, private use, unassigned) but \t \n \r are deleted, and
     \t \n \r and whitespace (Zs, U+2028, U+2029) become a space
     (`tf.strings.regex_replace`);
  3. a space goes either side of each CJK ideograph (the original's
     `_is_chinese_char` ranges);
  4. uncased only: Python's `str.lower` (below), NFD
     (`tf_text.normalize_utf8`), nonspacing marks (Mn) deleted;
  5. a space goes either side of each punctuation character (ASCII 33-47,
     58-64, 91-96, 123-126, and category P*), and the text is split at
     spaces (`tf.strings.split`);
  6. a word of more than `MAX_INPUT_CHARS_PER_WORD` characters becomes
     `[UNK]`; the others go to `tf_text.FastWordpieceTokenizer` with
     `no_pretokenization=True` (each input is one word): its greedy
     longest match first gives the original's pieces, and one `[UNK]` for
     a word it cannot cover.
Text that spells a special token (`[MASK]`, `[SEP]`) is text, split into
`[`, `mask`, `]`: the original has no special tokens in raw text (its
record writer adds them as ids).

Lower-casing is `tf.strings.lower(encoding='utf-8')` (ICU's full case
mapping, İ -> i + U+0307 as in Python) with two corrections, applied to the
strings that need them: each Σ is made ς or σ first by one regex on
Python's cased and case-ignorable letters (the final-sigma rule of
`str.lower`, which ICU applies with its own, older letter data), and the
letters whose ICU mapping is not Python's (TF 2.20: 40 letters of Unicode
14, such as U+2C2F, that its ICU leaves upper-case) are given Python's
first (`_lower_case_fixes` asks the op once per process).

Every character class (C*, whitespace, punctuation, Mn, cased,
case-ignorable) is read from this Python's `unicodedata`, which is what the
original consults, and written into the regexes as code point ranges:
RE2's `\p{...}` classes in TF 2.20 are of a later Unicode version (they
know 4,482 code points that Python 3.11's Unicode 14 leaves unassigned and
the original deletes). Tests compare every code point with the original.

Parts of TF Text deliberately not used:
  * `FastBertTokenizer(lower_case_nfd_strip_accents=True)`,
    `BertTokenizer(lower_case=True)` and `case_fold_utf8`: they apply
    NFKC_Casefold, which the original does not (ß -> ss, ﬁ -> fi,
    ″ -> ′′, full-width ＡＢＣ -> abc, ς -> σ).
  * the `BasicTokenizer` of `BertTokenizer` (and `FastBertTokenizer`'s own
    splitting): they make a word boundary of a control or format character
    where the original deletes it (`a\x0bb` and `a<soft hyphen>b` are `ab`),
    and keep private-use and unassigned code points, which it deletes.
  * the WordPiece tokenizers' `max_bytes_per_word` as the length limit: it
    counts bytes and the original counts characters (60 Cyrillic letters
    are 120 bytes); it is set to 4 bytes a character and the 100-character
    limit applied before WordPiece.

Hugging Face's `BertTokenizerFast` gives the same ids but where it departs
from the original: it lower-cases letter by letter (ΟΔΟΣ -> οδοσ, the
original's οδος), starts the CJK Extension E range at U+2B920 (the
original at U+2B820), and its Unicode tables are of other versions (it
keeps unassigned code points, which the original deletes).
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


def regex_ranges(flags: bytes, value: int) -> str:
  """RE2 class ranges (no brackets) of the code points flagged `value`."""
  parts = []
  for run in re.finditer(re.escape(bytes([value])) + b'+', flags):
    first, last = run.start(), run.end() - 1
    if first == last:
      parts.append(regex_code(first))
    else:
      parts.append(f'{regex_code(first)}-{regex_code(last)}')
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


def _is_punctuation(code_point: int, category: str) -> bool:
  return category.startswith('P') or any(
      first <= code_point <= last for first, last in _ASCII_PUNCTUATION
  )


@functools.lru_cache(maxsize=None)
def _character_tables() -> _CharacterTables:
  """Reads the character classes off `unicodedata` and `str.lower`.

  Cased and case-ignorable letters (for the final sigma) are those for
  which `str.lower` itself decides so: Σ after a cased letter is final
  (ς) unless a cased letter follows, case-ignorable ones skipped on both
  sides.

  Returns:
    The tables; about half a second to build, once per process.
  """
  kinds = bytearray(0x110000)
  cased = bytearray(0x110000)  # cased and not case-ignorable
  ignorable = bytearray(0x110000)  # case-ignorable
  lower_case = []
  for code_point in range(0x110000):
    if 0xD800 <= code_point <= 0xDFFF:  # surrogates: never in UTF-8
      continue
    char = chr(code_point)
    category = unicodedata.category(char)
    if char in '\t\n\r':
      kinds[code_point] = _SPACE
      continue
    if code_point in (0, 0xFFFD) or category.startswith('C'):
      kinds[code_point] = _DELETED
      continue
    if char == ' ':
      continue
    if category == 'Zs' or char.isspace():
      kinds[code_point] = _SPACE
    elif _is_punctuation(code_point, category):
      kinds[code_point] = _PUNCTUATION
    elif category == 'Mn':
      kinds[code_point] = _NONSPACING_MARK
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
  cjk = ''.join(
      f'{regex_code(first)}-{regex_code(last)}' for first, last in _CJK_RANGES
  )
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

  Asked of the op itself, once per process, for every letter `str.lower`
  changes (TF 2.20: 40 letters of Unicode 14, which its ICU predates).
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

  `tf.strings.lower` (ICU) lower-cases, but the strings holding a Σ or a
  letter it maps otherwise (`_lower_case_fixes`) are first given Python's
  mapping of those: the final sigma is decided by Python's cased and
  case-ignorable letters.
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
    """Reads the character tables (cached per process).

    Args:
      lower_case: lower-case and strip accents (an uncased vocabulary).
      name: the module's name.
    """
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
    """Builds the WordPiece model of `tokens`.

    Args:
      tokens: the vocabulary, token `i` at index `i`.
      lower_case: lower-case and strip accents (an uncased vocabulary).
      unknown_token: the vocabulary's unknown token.
      name: the module's name.

    Raises:
      ValueError: `unknown_token` is not in `tokens`.
    """
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
