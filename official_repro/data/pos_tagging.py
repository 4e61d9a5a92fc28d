r"""Penn Treebank POS tagging: file readers, label list, features, accuracy.

A word's tag labels its first WordPiece, its other pieces get '##', [CLS],
[SEP] and [PAD] get 'PAD', and loss and accuracy count word-initial pieces
only (`label_weights`). Files are 'conll' (a token a line) or 'treebank'
(`word/TAG`, `\/` escaped); an ambiguous `NN|JJ` keeps `NN`; malformed lines
are skipped and reported. Long sentences are split between words, not
truncated, so every word is scored once. Not reused: Model Garden's
`tagging_data_lib` reads only `word tag` lines and writes TFRecords.
"""

import dataclasses
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from absl import logging
import numpy as np

from official_repro.common import cli
from official_repro.data import read_report
from official_repro.data import text_files
from official_repro.data import vocab as vocab_lib

CONTINUATION_LABEL = '##'
PAD_LABEL = 'PAD'
DOCSTART = '-DOCSTART-'
FILE_FORMATS = ('auto', 'conll', 'treebank')

_CHUNK_BRACKETS = ('[', ']')
# The word is everything up to the last '/' that is not escaped as '\/'.
_TREEBANK_TOKEN = re.compile(r'^(.*[^\\])/([^/]+)$')
_MAX_LINES_TO_DETECT_FORMAT = 100


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
  """One sentence, a tag per word; `line_number` is that of its first word."""

  words: Tuple[str, ...]
  tags: Tuple[str, ...]
  line_number: int
  path: str = ''

  def __post_init__(self):
    if len(self.words) != len(self.tags):
      raise cli.UserError(
          f'{self.location}: {len(self.words)} words but {len(self.tags)} '
          'tags; expected one tag per word.'
      )

  @property
  def location(self) -> str:
    """'path line N' (or 'line N'), for error messages."""
    prefix = f'{self.path} ' if self.path else ''
    return f'{prefix}line {self.line_number}'


@dataclasses.dataclass(frozen=True)
class FeatureReport:
  """What `convert_to_features` did; empty words were fed as [UNK]."""

  num_sentences: int
  num_words: int
  num_features: int
  num_split_sentences: int
  num_empty_words: int
  num_truncated_words: int


# The counts of `FeatureReport` that `_RowEncoder` adds up.
_FEATURE_COUNTS = [
    f.name
    for f in dataclasses.fields(FeatureReport)
    if f.name not in ('num_sentences', 'num_features')
]


def read_tagged_sentences(
    path: str, file_format: str = 'auto', conll_tag_column: int = -1
) -> Tuple[List[TaggedSentence], read_report.ReadReport]:
  """Reads POS-tagged sentences, in file order, and a report.

  Args:
    path: the file, UTF-8.
    file_format: 'conll', 'treebank' or 'auto' ('treebank' if there are
      '=====' lines or most of the first 100 lines end in `word/TAG`).
    conll_tag_column: the tag's field in 'conll' (CoNLL-2000/2003: 1); -1 the
      last. Never 0 (the word).
  """
  if file_format not in FILE_FORMATS:
    raise cli.UserError(
        f'file_format must be one of {FILE_FORMATS}, got {file_format!r}.'
    )
  if conll_tag_column == 0:
    raise cli.UserError('conll_tag_column must not be 0, the word column.')
  lines = text_files.read_lines(path, 'POS tagging file')
  if file_format == 'auto':
    file_format = _detect_format(lines)
  parser = _TaggedFileParser(path)
  if file_format == 'conll':
    parser.parse_conll(lines, conll_tag_column)
  else:
    parser.parse_treebank(lines)
  report = parser.report
  report.file_format = file_format
  report.num_records = sum(1 for line in lines if line.strip())
  report.num_examples = len(parser.sentences)
  if not parser.sentences and report.malformed:
    first = report.malformed[0]
    raise cli.UserError(
        f'{path}: no tagged sentence could be read as {file_format}; all '
        f'{report.num_malformed} tagged lines/tokens are malformed, the '
        f'first at line {first.line_number}: {first.reason}'
    )
  if not parser.sentences:
    raise cli.UserError(f'{path}: no tagged sentence found; the file is empty.')
  report.log('POS tagging')
  return parser.sentences, report


def build_label_list(sentences: Iterable[TaggedSentence]) -> Tuple[str, ...]:
  """'PAD' (index 0, so zeros mean padding), '##', then the sorted tags."""
  tags = set()
  for sentence in sentences:
    for tag in sentence.tags:
      if tag in (PAD_LABEL, CONTINUATION_LABEL):
        raise cli.UserError(
            f'{sentence.location}: tag {tag!r} is reserved for the extra '
            f'labels {PAD_LABEL!r} and {CONTINUATION_LABEL!r}.'
        )
      tags.add(tag)
  if not tags:
    raise cli.UserError('build_label_list needs at least one tagged word.')
  return (PAD_LABEL, CONTINUATION_LABEL) + tuple(sorted(tags))


def convert_to_features(
    sentences: Sequence[TaggedSentence],
    tokenizer,
    label_list: Sequence[str],
    max_seq_length: int,
) -> Tuple[Dict[str, np.ndarray], FeatureReport]:
  """Tokenizes sentences into `[CLS] pieces [SEP] [PAD]...` features.

  A sentence too long is cut between words into several features (later
  parts see no left context); a word too long keeps its first pieces.

  Returns:
    `[num_features, max_seq_length]` int32 `input_word_ids`, `input_mask`,
    `input_type_ids` (zeros), `label_ids`, float32 `label_weights`; a report.
  """
  if max_seq_length < 3:
    raise cli.UserError(
        f'max_seq_length must be >= 3 ([CLS] word [SEP]), got '
        f'{max_seq_length}.'
    )
  label_ids = {}
  for index, label in enumerate(label_list):
    if label in label_ids:
      raise cli.UserError(
          f'label_list has {label!r} twice (at '
          f'{label_ids[label]} and {index}).'
      )
    label_ids[label] = index
  for label in (PAD_LABEL, CONTINUATION_LABEL):
    if label not in label_ids:
      raise cli.UserError(
          f'label_list lacks the extra label {label!r}; build it '
          'with build_label_list.'
      )
  special_ids = vocab_lib.finetuning_token_ids(tokenizer, vocab_lib.UNK_TOKEN)
  encoder = _RowEncoder(tokenizer, special_ids, label_ids, max_seq_length)
  all_words = (word for sentence in sentences for word in sentence.words)
  with vocab_lib.prefetched(tokenizer, all_words):
    rows = [row for sentence in sentences for row in encoder.rows(sentence)]
  shape = (len(rows), max_seq_length)
  features = dict(
      input_word_ids=np.full(shape, special_ids[vocab_lib.PAD_TOKEN], np.int32),
      input_mask=np.zeros(shape, np.int32),
      input_type_ids=np.zeros(shape, np.int32),
      label_ids=np.full(shape, label_ids[PAD_LABEL], np.int32),
      label_weights=np.zeros(shape, np.float32),
  )
  for row, (token_ids, labels, weights) in enumerate(rows):
    length = len(token_ids)
    features['input_word_ids'][row, :length] = token_ids
    features['input_mask'][row, :length] = 1
    features['label_ids'][row, :length] = labels
    features['label_weights'][row, :length] = weights
  report = FeatureReport(
      num_sentences=len(sentences), num_features=len(rows), **encoder.counts
  )
  logging.info(
      'Converted %d sentences (%d words) into %d features.',
      report.num_sentences,
      report.num_words,
      report.num_features,
  )
  if report.num_split_sentences:
    logging.info(
        '%d sentences were longer than one feature and continue in the next.',
        report.num_split_sentences,
    )
  if report.num_empty_words:
    logging.warning(
        '%d words tokenized to no piece and were fed as [UNK].',
        report.num_empty_words,
    )
  if report.num_truncated_words:
    logging.warning(
        '%d words had more pieces than fit in a feature; their '
        'extra continuation pieces were dropped.',
        report.num_truncated_words,
    )
  return features, report


def tagging_accuracy(
    predicted_label_ids: np.ndarray,
    label_ids: np.ndarray,
    label_weights: np.ndarray,
) -> float:
  """Weighted fraction correct; all three `[num_features, seq_length]`."""
  predicted, gold = np.asarray(predicted_label_ids), np.asarray(label_ids)
  weights = np.asarray(label_weights, dtype=np.float64)
  if not predicted.shape == gold.shape == weights.shape:
    raise cli.UserError(
        f'predicted_label_ids {predicted.shape}, label_ids {gold.shape} and '
        f'label_weights {weights.shape} must have the same shape.'
    )
  total = weights.sum()
  if total <= 0:
    raise cli.UserError('label_weights sum to 0: there is no word to score.')
  return float((weights * (predicted == gold)).sum() / total)


class _TaggedFileParser:
  """Accumulates sentences, counts and malformed entries while parsing."""

  def __init__(self, path: str):
    self._path = path
    self.sentences: List[TaggedSentence] = []
    self.report = read_report.ReadReport(path=path, record_name='lines')
    self._words, self._tags, self._first_line = [], [], 0

  def parse_conll(self, lines: Sequence[str], tag_column: int):
    """One word per line; blank and -DOCSTART- lines end sentences."""
    min_fields = tag_column + 1 if tag_column > 0 else 1 - tag_column
    for line_number, line in enumerate(lines, start=1):
      fields = line.split()
      if not fields or self._is_docstart(fields):
        self._end_sentence()
      elif len(fields) < min_fields:
        self.report.add_malformed(
            line_number,
            f'expected the word and a tag in field '
            f'{tag_column} ({min_fields} or more whitespace-'
            f'separated fields), got {line.strip()!r}',
        )
      else:
        self._add_word(line_number, fields[0], fields[tag_column])
    self._end_sentence()

  def parse_treebank(self, lines: Sequence[str]):
    """`word/TAG` tokens; blank and '=====' lines end sentences."""
    for line_number, line in enumerate(lines, start=1):
      tokens = line.split()
      ends_sentence = not tokens or _is_treebank_separator(line)
      if ends_sentence or self._is_docstart(tokens):
        self._end_sentence()
        continue
      for token in (t for t in tokens if t not in _CHUNK_BRACKETS):
        word_and_tag = _split_treebank_token(token)
        if word_and_tag is None:
          self.report.add_malformed(
              line_number, f'expected word/TAG, got token {token!r}'
          )
        else:
          self._add_word(line_number, *word_and_tag)
    self._end_sentence()

  def _is_docstart(self, fields: Sequence[str]) -> bool:
    if fields[0] != DOCSTART:
      return False
    self.report.counts['docstart_lines'] += 1
    return True

  def _add_word(self, line_number: int, word: str, tag: str):
    if '|' in tag and tag.split('|')[0]:
      tag = tag.split('|')[0]
      self.report.counts['ambiguous_tags'] += 1
    if not self._words:
      self._first_line = line_number
    self.report.counts['words'] += 1
    self._words.append(word)
    self._tags.append(tag)

  def _end_sentence(self):
    if self._words:
      words, tags = tuple(self._words), tuple(self._tags)
      self.sentences.append(
          TaggedSentence(words, tags, self._first_line, self._path)
      )
    self._words, self._tags = [], []


def _detect_format(lines: Sequence[str]) -> str:
  """'treebank' or 'conll', from separators and content lines' last token."""
  votes = {'conll': 0, 'treebank': 0}
  for line in lines:
    tokens = [t for t in line.split() if t not in _CHUNK_BRACKETS]
    if not tokens or tokens[0] == DOCSTART:
      continue
    if _is_treebank_separator(line):
      return 'treebank'
    is_tagged = _split_treebank_token(tokens[-1]) is not None
    votes['treebank' if is_tagged else 'conll'] += 1
    if sum(votes.values()) >= _MAX_LINES_TO_DETECT_FORMAT:
      break
  return 'treebank' if votes['treebank'] > votes['conll'] else 'conll'


def _is_treebank_separator(line: str) -> bool:
  stripped = line.strip()
  return len(stripped) >= 3 and set(stripped) == {'='}


def _split_treebank_token(token: str) -> Optional[Tuple[str, str]]:
  """`word/TAG` -> (unescaped word, TAG); None if there is no such split."""
  match = _TREEBANK_TOKEN.match(token)
  return match and (match.group(1).replace('\\/', '/'), match.group(2))


class _RowEncoder:
  """Encodes sentences into unpadded `[CLS] pieces [SEP]` rows, counting."""

  def __init__(self, tokenizer, special_ids, label_ids, max_seq_length: int):
    self._tokenizer = tokenizer
    self._special_ids = special_ids
    self._label_ids = label_ids
    self._capacity = max_seq_length - 2
    self.counts = dict.fromkeys(_FEATURE_COUNTS, 0)

  def rows(
      self, sentence: TaggedSentence
  ) -> List[Tuple[List[int], List[int], List[float]]]:
    """(token ids, label ids, weights) rows of a sentence, cut between words."""
    words = self._encode_words(sentence)
    self.counts['num_words'] += len(words)
    # Greedy `[start, end)` word ranges whose pieces fit (one for no words).
    chunks = []
    start, used = 0, 0
    for index, count in enumerate(len(ids) for ids, _ in words):
      if used + count > self._capacity:
        chunks.append((start, index))
        start, used = index, 0
      used += count
    chunks.append((start, len(words)))
    self.counts['num_split_sentences'] += int(len(chunks) > 1)
    pad_label = self._label_ids[PAD_LABEL]
    continuation_label = self._label_ids[CONTINUATION_LABEL]
    rows = []
    for start, end in chunks:
      token_ids = [self._special_ids[vocab_lib.CLS_TOKEN]]
      labels, weights = [pad_label], [0.0]
      for piece_ids, tag_id in words[start:end]:
        token_ids.extend(piece_ids)
        labels += [tag_id] + [continuation_label] * (len(piece_ids) - 1)
        weights += [1.0] + [0.0] * (len(piece_ids) - 1)
      token_ids.append(self._special_ids[vocab_lib.SEP_TOKEN])
      rows.append((token_ids, labels + [pad_label], weights + [0.0]))
    return rows

  def _encode_words(
      self, sentence: TaggedSentence
  ) -> List[Tuple[List[int], int]]:
    """`(piece ids, tag label id)` of each word, at most `capacity` pieces."""
    words = []
    for index, (word, tag) in enumerate(zip(sentence.words, sentence.tags)):
      pieces = self._tokenizer.tokenize(word)
      if not pieces:
        pieces = [vocab_lib.UNK_TOKEN]
        self.counts['num_empty_words'] += 1
      if len(pieces) > self._capacity:
        pieces = pieces[: self._capacity]
        self.counts['num_truncated_words'] += 1
      if tag not in self._label_ids or tag in (PAD_LABEL, CONTINUATION_LABEL):
        raise cli.UserError(
            f'{sentence.location} (sentence starting there), word '
            f'{index + 1} {word!r}: tag {tag!r} is not a POS tag of '
            f'label_list ({len(self._label_ids) - 2} tags from the training '
            'data); rebuild the label list from all splits or fix the file.'
        )
      ids = self._tokenizer.convert_tokens_to_ids(pieces)
      words.append((ids, self._label_ids[tag]))
    return words
