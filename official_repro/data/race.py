"""RACE multiple-choice reading comprehension: reading and feature conversion.

RACE (Lai et al., 2017) ships as `RACE/{train,dev,test}/{middle,high}/*.txt`,
each file one JSON object holding an article and its questions:

  {"article": str, "questions": [str, ...], "options": [[4 str], ...],
   "answers": ["B", ...], "id": "middle1.txt"}

Every question becomes one `RaceExample`. Paper 001 (Section IV.A) feeds BERT
one sequence per answer option,

  [CLS] article [SEP] question [SEP] option [SEP] [PAD] ...

with type id 0 for `[CLS] article [SEP]` (segment A) and 1 for
`question [SEP] option [SEP]` (segment B); the [CLS] output of each of the four
sequences is scored by a shared dense layer and a softmax over the options
gives the answer. That is the default here: a cloze question (one containing a
blank "_") is kept as written. With `fill_blank=True` a cloze question follows
XLNet's RACE pipeline instead: every run of underscores is replaced by the
option text and the filled question is segment B on its own,
`[CLS] article [SEP] filled question [SEP]`; questions without a blank keep the
three-[SEP] layout.

Truncation (longest first, article first in practice). Let the budget be
`max_seq_length` minus the special tokens (4, or 3 for a filled cloze
question). While the article plus segment B exceeds the budget, one token is
removed from the end of the longer of the two, the article on a tie; inside
segment B the token comes from the end of the longer of question and option,
the question on a tie. With RACE's lengths (article ~230 wordpieces, question
~9, option ~4) only the article is ever cut, keeping its beginning; segment B
is cut only when it alone exceeds half the budget. Before that, the question
can optionally be cut to its first `max_query_length` wordpieces as in BERT's
SQuAD pipeline. Cut sequences are counted in the `ConversionReport`.

A malformed file stops reading with a `RaceFormatError` naming the file (and
the line or question index): a dataset with a broken file should fail rather
than silently shrink.
"""

import dataclasses
import json
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from official_repro.common import cli
from official_repro.data import read_report
from official_repro.data import vocab as vocab_lib

LEVELS = ('middle', 'high')
NUM_CHOICES = 4
ANSWER_LETTERS = 'ABCD'
SPLITS = ('train', 'dev', 'test')
REQUIRED_KEYS = ('article', 'questions', 'options', 'answers')
FILE_PATTERNS = ('*.txt', '*.json')

_BLANK = re.compile(r'_+')


class RaceFormatError(cli.UserError):
  """A RACE file that is not the released JSON layout."""


@dataclasses.dataclass(frozen=True)
class RaceExample:
  """One question with its article and four candidate answers.

  Attributes:
    example_id: `<file id>-<question index>`, e.g. `middle1.txt-0`.
    level: 'middle' or 'high'.
    article: the untokenized article.
    question: the untokenized question, possibly with a blank "_".
    options: the four untokenized options, in the order A, B, C, D.
    label: index of the correct option, 0 (A) to 3 (D).
  """

  example_id: str
  level: str
  article: str
  question: str
  options: Tuple[str, str, str, str]
  label: int

  def __post_init__(self):
    if self.level not in LEVELS:
      raise cli.UserError(
          f'{self.example_id}: level must be one of {LEVELS}, '
          f'got {self.level!r}.'
      )
    if len(self.options) != NUM_CHOICES:
      raise cli.UserError(
          f'{self.example_id}: expected {NUM_CHOICES} options, '
          f'got {len(self.options)}.'
      )
    if not 0 <= self.label < NUM_CHOICES:
      raise cli.UserError(
          f'{self.example_id}: label must be in '
          f'[0, {NUM_CHOICES}), got {self.label}.'
      )

  @property
  def is_cloze(self) -> bool:
    """Whether the question has a blank to fill."""
    return '_' in self.question


def read_examples(
    race_dir: str,
    split: Optional[str] = None,
    levels: Sequence[str] = LEVELS,
) -> Tuple[List[RaceExample], read_report.ReadReport]:
  """Reads the questions of one RACE split.

  Args:
    race_dir: the RACE root holding `<split>/<level>/*.txt`; or, with
      `split=None`, one directory of JSON files read directly.
    split: 'train', 'dev' or 'test'; None reads `race_dir` directly. The level
      of a file read directly is the directory's name if that is 'middle' or
      'high', otherwise the prefix of the file's "id" ("middle1.txt").
    levels: the levels to read, a subset of ('middle', 'high').

  Returns:
    The examples, ordered by level (in `levels` order), file name, question;
    and a report whose records are the files read. Its `counts` hold, per
    level, 'files/<level>', 'questions/<level>' and 'cloze_questions/<level>'
    (questions with a blank "_"), and 'skipped_files_of_other_levels' (files
    of a directory read directly whose level is not in `levels`). A file
    holding an article but no question gives no example and is listed as
    malformed.

  Raises:
    FileNotFoundError: a `<split>/<level>` directory (or `race_dir`) is
      missing or holds no *.txt / *.json file.
    RaceFormatError: a file is not valid RACE JSON; the message names the
      file and the line or question index.
    ValueError: an unknown level.
  """
  unknown = [level for level in levels if level not in LEVELS]
  if unknown or not levels:
    raise cli.UserError(
        f'levels must be a non-empty subset of {LEVELS}, got '
        f'{tuple(levels)}.'
    )
  report = read_report.ReadReport(path=race_dir, record_name='files')
  examples = []
  if split is None:
    directory_level = os.path.basename(os.path.normpath(race_dir))
    for path in _list_json_files(race_dir):
      record = _load_json(path)
      level = (
          directory_level
          if directory_level in LEVELS
          else _level_from_id(record, path)
      )
      if level not in levels:
        report.counts['skipped_files_of_other_levels'] += 1
        continue
      examples.extend(_examples_from_record(record, path, level, report))
  else:
    for level in levels:
      directory = os.path.join(race_dir, split, level)
      for path in _list_json_files(directory):
        examples.extend(
            _examples_from_record(_load_json(path), path, level, report)
        )
  report.num_examples = len(examples)
  report.log(f'RACE {split or "."}')
  return examples, report


def _list_json_files(directory: str) -> List[str]:
  """Sorted *.txt and *.json files of `directory`; raises if there are none."""
  if not tf.io.gfile.isdir(directory):
    raise FileNotFoundError(
        f'RACE directory {directory} does not exist; '
        'expected <race_dir>/<split>/<level> with split in '
        f'{SPLITS} and level in {LEVELS}.'
    )
  # Unlike glob.glob, tf.io.gfile.glob also matches hidden files: skip them.
  paths = sorted(
      path
      for pattern in FILE_PATTERNS
      for path in tf.io.gfile.glob(os.path.join(directory, pattern))
      if not os.path.basename(path).startswith('.')
  )
  if not paths:
    raise FileNotFoundError(
        f'RACE directory {directory} holds no {" or ".join(FILE_PATTERNS)} '
        'file.'
    )
  return paths


def _load_json(path: str) -> Mapping[str, Any]:
  """Parses one RACE file into a dict."""
  try:
    with tf.io.gfile.GFile(path, 'rb') as f:
      record = json.loads(f.read().decode('utf-8'))
  except UnicodeDecodeError as e:
    raise RaceFormatError(f'{path}: not UTF-8 text ({e}).') from e
  except json.JSONDecodeError as e:
    raise RaceFormatError(
        f'{path}, line {e.lineno}, column {e.colno}: not valid JSON '
        f'({e.msg}); expected one JSON object per file.'
    ) from e
  if not isinstance(record, dict):
    raise RaceFormatError(
        f'{path}: expected a JSON object, got ' f'{type(record).__name__}.'
    )
  return record


def _level_from_id(record: Mapping[str, Any], path: str) -> str:
  """'middle' or 'high' from an id such as "high123.txt"."""
  file_id = record.get('id')
  for level in LEVELS:
    if isinstance(file_id, str) and file_id.startswith(level):
      return level
  raise RaceFormatError(
      f'{path}: cannot tell the level: the directory is not named '
      f'{" or ".join(LEVELS)} and "id" ({file_id!r}) does not start with one.'
  )


def _examples_from_record(
    record: Mapping[str, Any],
    path: str,
    level: str,
    report: read_report.ReadReport,
) -> List[RaceExample]:
  """Validates one file's JSON object and makes one example per question."""
  missing = [key for key in REQUIRED_KEYS if key not in record]
  if missing:
    raise RaceFormatError(
        f'{path}: missing keys {missing}; expected '
        f'{list(REQUIRED_KEYS)} (and "id").'
    )
  article = record['article']
  questions = record['questions']
  options = record['options']
  answers = record['answers']
  if not isinstance(article, str):
    raise RaceFormatError(
        f'{path}: "article" must be a string, got ' f'{type(article).__name__}.'
    )
  for key, value in (
      ('questions', questions),
      ('options', options),
      ('answers', answers),
  ):
    if not isinstance(value, list):
      raise RaceFormatError(
          f'{path}: "{key}" must be a list, got ' f'{type(value).__name__}.'
      )
  if not len(answers) == len(questions) == len(options):
    raise RaceFormatError(
        f'{path}: {len(questions)} questions, {len(options)} option lists and '
        f'{len(answers)} answers; expected one option list and one answer per '
        'question.'
    )
  file_id = record.get('id', os.path.basename(path))
  report.num_records += 1
  report.counts[f'files/{level}'] += 1
  report.counts[f'questions/{level}'] += len(questions)
  if not questions:
    report.add_malformed(None, 'holds an article but no question', path=path)
  examples = []
  for index, (question, choices, answer) in enumerate(
      zip(questions, options, answers)
  ):
    where = f'{path}, question index {index}'
    if not isinstance(question, str):
      raise RaceFormatError(
          f'{where}: question must be a string, got '
          f'{type(question).__name__}.'
      )
    if (
        not isinstance(choices, list)
        or len(choices) != NUM_CHOICES
        or not all(isinstance(choice, str) for choice in choices)
    ):
      raise RaceFormatError(
          f'{where}: expected a list of {NUM_CHOICES} option '
          f'strings, got {choices!r}.'
      )
    if not isinstance(answer, str) or answer not in tuple(ANSWER_LETTERS):
      raise RaceFormatError(
          f'{where}: answer must be one letter of '
          f'{ANSWER_LETTERS}, got {answer!r}.'
      )
    example = RaceExample(
        example_id=f'{file_id}-{index}',
        level=level,
        article=article,
        question=question,
        options=tuple(choices),
        label=ANSWER_LETTERS.index(answer),
    )
    report.counts[f'cloze_questions/{level}'] += int(example.is_cloze)
    examples.append(example)
  return examples


@dataclasses.dataclass
class ConversionReport:
  """What `convert_to_features` did, counted per (example, option) sequence.

  Attributes:
    num_examples: examples converted (all of them; none is dropped).
    num_sequences: `num_examples * 4`.
    num_truncated_articles: sequences whose article was cut.
    num_truncated_segment_b: sequences whose question or option was cut to
      fit `max_seq_length`.
    num_truncated_questions: sequences whose question was cut to
      `max_query_length`.
    num_filled_blanks: sequences of a cloze question whose blank was replaced
      by the option (`fill_blank=True`).
  """

  num_examples: int = 0
  num_sequences: int = 0
  num_truncated_articles: int = 0
  num_truncated_segment_b: int = 0
  num_truncated_questions: int = 0
  num_filled_blanks: int = 0

  def as_dict(self) -> Dict[str, int]:
    return dataclasses.asdict(self)


def convert_to_features(
    examples: Sequence[RaceExample],
    tokenizer: Any,
    max_seq_length: int,
    max_query_length: Optional[int] = None,
    fill_blank: bool = False,
) -> Tuple[Dict[str, np.ndarray], ConversionReport]:
  """Tokenizes, truncates and pads one sequence per example and option.

  See the module docstring for the layout and the truncation rule.

  Args:
    examples: the `RaceExample`s; N = len(examples).
    tokenizer: `vocab.FullTokenizer` (the original BERT tokenizer, texts
      tokenized in batches) or another tokenizer with the interface of
      Model Garden's `official.nlp.tools.tokenization.FullTokenizer`
      (`tokenize`, `convert_tokens_to_ids`, `vocab`).
    max_seq_length: S, the length of every sequence; at least 7 (the special
      tokens plus one token each of article, question and option).
    max_query_length: if set, questions (filled questions, with
      `fill_blank`) are first cut to their first `max_query_length`
      wordpieces.
    fill_blank: XLNet's handling of cloze questions: replace the blank by the
      option and drop the separate option segment. False (BERT, paper 001)
      keeps the question as written.

  Returns:
    A dict of numpy arrays
      `input_word_ids`: int32 `[N, 4, S]`;
      `input_mask`: int32 `[N, 4, S]`, 1 for real tokens, 0 for padding;
      `input_type_ids`: int32 `[N, 4, S]`, 0 for `[CLS] article [SEP]` and
        padding, 1 for the question/option part;
      `label_ids`: int32 `[N]`, the correct option, 0 to 3;
      `level_ids`: int32 `[N]`, index into `LEVELS` (0 middle, 1 high);
    and a `ConversionReport`.

  Raises:
    ValueError: `max_seq_length` below 7, `max_query_length` below 1, or a
      special token missing from `tokenizer.vocab`.
  """
  if max_seq_length < 7:
    raise cli.UserError(
        'max_seq_length must be >= 7 ([CLS] article [SEP] '
        f'question [SEP] option [SEP]), got {max_seq_length}.'
    )
  if max_query_length is not None and max_query_length < 1:
    raise cli.UserError(
        f'max_query_length must be >= 1 or None, got {max_query_length}.'
    )
  special_ids = vocab_lib.special_token_ids(
      tokenizer.vocab,
      (vocab_lib.CLS_TOKEN, vocab_lib.SEP_TOKEN, vocab_lib.PAD_TOKEN),
  )
  num_examples = len(examples)
  shape = (num_examples, NUM_CHOICES, max_seq_length)
  features = dict(
      input_word_ids=np.full(shape, special_ids[vocab_lib.PAD_TOKEN], np.int32),
      input_mask=np.zeros(shape, np.int32),
      input_type_ids=np.zeros(shape, np.int32),
      label_ids=np.array([e.label for e in examples], np.int32),
      level_ids=np.array([LEVELS.index(e.level) for e in examples], np.int32),
  )
  report = ConversionReport(
      num_examples=num_examples, num_sequences=num_examples * NUM_CHOICES
  )
  article_text, article_tokens = None, []
  with vocab_lib.prefetched(tokenizer, _texts(examples, fill_blank)):
    for row, example in enumerate(examples):
      if example.article != article_text:  # Questions of a file share it.
        article_text = example.article
        article_tokens = tokenizer.tokenize(article_text)
      for choice, option in enumerate(example.options):
        segments = _segment_b(
            example.question,
            option,
            tokenizer,
            max_query_length,
            fill_blank,
            report,
        )
        tokens, type_ids = _pack(
            article_tokens, segments, max_seq_length, report
        )
        ids = tokenizer.convert_tokens_to_ids(tokens)
        features['input_word_ids'][row, choice, : len(ids)] = ids
        features['input_mask'][row, choice, : len(ids)] = 1
        features['input_type_ids'][row, choice, : len(ids)] = type_ids
  logging.info('RACE features: %s', report.as_dict())
  return features, report


def _texts(examples: Sequence[RaceExample], fill_blank: bool) -> List[str]:
  """Every text `convert_to_features` tokenizes (as `_segment_b` forms it)."""
  texts = []
  for example in examples:
    texts.append(example.article)
    for option in example.options:
      if fill_blank and '_' in example.question:
        texts.append(_BLANK.sub(option, example.question))
      else:
        texts += [example.question, option]
  return texts


def _segment_b(
    question: str,
    option: str,
    tokenizer: Any,
    max_query_length: Optional[int],
    fill_blank: bool,
    report: ConversionReport,
) -> List[List[str]]:
  """Segment B as wordpiece lists: [question, option] or [filled question]."""
  if fill_blank and '_' in question:
    report.num_filled_blanks += 1
    segments = [tokenizer.tokenize(_BLANK.sub(option, question))]
  else:
    segments = [tokenizer.tokenize(question), tokenizer.tokenize(option)]
  if max_query_length is not None and len(segments[0]) > max_query_length:
    report.num_truncated_questions += 1
    segments[0] = segments[0][:max_query_length]
  return segments


def _pack(
    article: Sequence[str],
    segments: List[List[str]],
    max_seq_length: int,
    report: ConversionReport,
) -> Tuple[List[str], List[int]]:
  """Truncates longest-first and joins into `[CLS] A [SEP] B.. [SEP]`.

  Args:
    article: the article's wordpieces.
    segments: the wordpiece lists of segment B, each followed by [SEP].
    max_seq_length: S.
    report: counts cut articles and cut segments B.

  Returns:
    The tokens (at most S) and their type ids.
  """
  budget = max_seq_length - 2 - len(segments)
  article_length = len(article)
  lengths = [len(segment) for segment in segments]
  excess = article_length + sum(lengths) - budget
  if excess > 0 and article_length - excess >= sum(lengths):
    article_length -= excess  # The usual case, without the loop below.
  while article_length + sum(lengths) > budget:
    if article_length >= sum(lengths):
      article_length -= 1
    else:
      longest = max(range(len(lengths)), key=lambda i: (lengths[i], -i))
      lengths[longest] -= 1
  report.num_truncated_articles += int(article_length < len(article))
  report.num_truncated_segment_b += int(
      lengths != [len(segment) for segment in segments]
  )
  tokens = [vocab_lib.CLS_TOKEN, *article[:article_length], vocab_lib.SEP_TOKEN]
  type_ids = [0] * len(tokens)
  for segment, length in zip(segments, lengths):
    part = [*segment[:length], vocab_lib.SEP_TOKEN]
    tokens.extend(part)
    type_ids.extend([1] * len(part))
  return tokens, type_ids


def accuracy_by_level(
    predictions: np.ndarray, labels: np.ndarray, levels: np.ndarray
) -> Dict[str, float]:
  """Accuracy on RACE-middle, RACE-high and both together.

  Args:
    predictions: int `[N]`, the predicted option (argmax over the 4 scores).
    labels: int `[N]`, the correct option.
    levels: `[N]`, either level names ('middle'/'high') or level ids
      (`label_ids`-style ints indexing `LEVELS`, as in the `level_ids`
      feature).

  Returns:
    {'middle': acc, 'high': acc, 'all': acc}, without a level that has no
    example.

  Raises:
    ValueError: the arrays are empty, not 1-D, differ in length, or a level is
      unknown.
  """
  predictions = np.asarray(predictions)
  labels = np.asarray(labels)
  levels = np.asarray(levels)
  if not (
      predictions.ndim == labels.ndim == levels.ndim == 1
      and predictions.shape == labels.shape == levels.shape
  ):
    raise cli.UserError(
        'predictions, labels and levels must be 1-D of one '
        f'length, got shapes {predictions.shape}, '
        f'{labels.shape}, {levels.shape}.'
    )
  if not predictions.size:
    raise cli.UserError('accuracy_by_level needs at least one example.')
  if np.issubdtype(levels.dtype, np.integer):
    if levels.min() < 0 or levels.max() >= len(LEVELS):
      raise cli.UserError(
          f'level ids must be in [0, {len(LEVELS)}), got '
          f'{sorted(set(levels.tolist()))}.'
      )
    level_names = np.asarray(LEVELS)[levels]
  else:
    level_names = levels.astype(str)
    unknown = sorted(set(level_names.tolist()) - set(LEVELS))
    if unknown:
      raise cli.UserError(f'Unknown levels {unknown}; expected {LEVELS}.')
  correct = predictions == labels
  accuracy = {}
  for level in LEVELS:
    selected = level_names == level
    if selected.any():
      accuracy[level] = float(correct[selected].mean())
  accuracy['all'] = float(correct.mean())
  return accuracy
