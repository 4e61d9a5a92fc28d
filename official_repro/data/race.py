"""RACE multiple-choice reading comprehension: reading and feature conversion.

RACE ships as `RACE/{train,dev,test}/{middle,high}/*.txt`, a JSON object a
file. Paper 001 feeds one sequence per option, `[CLS] article [SEP] question
[SEP] option [SEP]`, cloze questions as written; `fill_blank=True` is XLNet's
pipeline (the option fills the blank). Truncation is longest first (the article
on a tie, then the question). A malformed file raises `RaceFormatError`: a
broken dataset should fail, not shrink.
"""

import dataclasses
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence
from typing import Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from official_repro.common import cli
from official_repro.common import json_files
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
  """One question; `example_id` e.g. `middle1.txt-0`, `label` 0 (A) to 3."""

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
    race_dir: str, split: Optional[str] = None, levels: Sequence[str] = LEVELS
) -> Tuple[List[RaceExample], read_report.ReadReport]:
  """Reads the questions of `<race_dir>/<split>/<level>/`, and a report.

  With `split=None`, `race_dir` is one directory read directly, a file's level
  the directory's name or else its "id"'s prefix. Examples are ordered by
  level, file name and question; the report counts files per record.
  """
  unknown = [level for level in levels if level not in LEVELS]
  if unknown or not levels:
    raise cli.UserError(
        f'levels must be a non-empty subset of {LEVELS}, got '
        f'{tuple(levels)}.'
    )
  report = read_report.ReadReport(path=race_dir, record_name='files')
  if split is None:
    directory_level = os.path.basename(os.path.normpath(race_dir))
    directories = [
        (race_dir, directory_level if directory_level in LEVELS else None)
    ]
  else:
    directories = [(os.path.join(race_dir, split, lv), lv) for lv in levels]
  examples = []
  for directory, directory_level in directories:
    for path in _list_json_files(directory):
      record = _load_json(path)
      file_id = record.get('id')  # e.g. "high123.txt"
      level = directory_level or next(
          (lv for lv in LEVELS if str(file_id).startswith(lv)), None
      )
      if level is None:
        raise RaceFormatError(
            f'{path}: cannot tell the level: the directory is not named '
            f'{" or ".join(LEVELS)} and "id" ({file_id!r}) does not start '
            'with one.'
        )
      if level not in levels:
        report.counts['skipped_files_of_other_levels'] += 1
        continue
      examples.extend(_examples_from_record(record, path, level, report))
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
  try:
    record = json_files.read_json(path)
  except cli.UserError as e:
    raise RaceFormatError(f'{e} Expected one JSON object per file.') from e
  if not isinstance(record, dict):
    raise RaceFormatError(
        f'{path}: expected a JSON object, got {type(record).__name__}.'
    )
  return record


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
  article, questions, options, answers = (record[k] for k in REQUIRED_KEYS)
  for key, expected in zip(REQUIRED_KEYS, (str, list, list, list)):
    if not isinstance(record[key], expected):
      raise RaceFormatError(
          f'{path}: "{key}" must be a {"string" if expected is str else "list"}'
          f', got {type(record[key]).__name__}.'
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
  rows = enumerate(zip(questions, options, answers))
  for index, (question, choices, answer) in rows:
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
    label = ANSWER_LETTERS.index(answer)
    example = RaceExample(
        f'{file_id}-{index}', level, article, question, tuple(choices), label
    )
    report.counts[f'cloze_questions/{level}'] += int(example.is_cloze)
    examples.append(example)
  return examples


@dataclasses.dataclass
class ConversionReport:
  """What `convert_to_features` did, counted per (example, option) sequence."""

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
  """Tokenizes, truncates and pads a sequence per option.

  `max_query_length`, if set, first cuts questions (BERT's SQuAD);
  `fill_blank` is XLNet's handling of cloze questions.

  Returns:
    Int32 `[N, 4, S]` `input_word_ids`, `input_mask`, `input_type_ids` (1
    from the question on), `[N]` `label_ids` and `level_ids` (into
    `LEVELS`); and a `ConversionReport`.
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
  pad_id = vocab_lib.finetuning_token_ids(tokenizer)[vocab_lib.PAD_TOKEN]
  shape = (len(examples), NUM_CHOICES, max_seq_length)
  features = dict(
      input_word_ids=np.full(shape, pad_id, np.int32),
      input_mask=np.zeros(shape, np.int32),
      input_type_ids=np.zeros(shape, np.int32),
      label_ids=np.array([e.label for e in examples], np.int32),
      level_ids=np.array([LEVELS.index(e.level) for e in examples], np.int32),
  )
  report = ConversionReport(
      num_examples=len(examples), num_sequences=len(examples) * NUM_CHOICES
  )
  article_text, article_tokens = None, []
  texts = [example.article for example in examples] + [
      text
      for example in examples
      for option in example.options
      for text in _segment_b_texts(example.question, option, fill_blank)
  ]
  with vocab_lib.prefetched(tokenizer, texts):
    for row, example in enumerate(examples):
      if example.article != article_text:  # Questions of a file share it.
        article_text = example.article
        article_tokens = tokenizer.tokenize(article_text)
      for choice, option in enumerate(example.options):
        texts_b = _segment_b_texts(example.question, option, fill_blank)
        segments = [tokenizer.tokenize(text) for text in texts_b]
        report.num_filled_blanks += int(len(segments) == 1)
        if max_query_length is not None and len(segments[0]) > max_query_length:
          report.num_truncated_questions += 1
          segments[0] = segments[0][:max_query_length]
        tokens, type_ids = _pack(
            article_tokens, segments, max_seq_length, report
        )
        ids = tokenizer.convert_tokens_to_ids(tokens)
        features['input_word_ids'][row, choice, : len(ids)] = ids
        features['input_mask'][row, choice, : len(ids)] = 1
        features['input_type_ids'][row, choice, : len(ids)] = type_ids
  logging.info('RACE features: %s', report.as_dict())
  return features, report


def _segment_b_texts(question: str, option: str, fill_blank: bool) -> List[str]:
  """Segment B: [question, option], or with `fill_blank` [filled question]."""
  if fill_blank and '_' in question:
    return [_BLANK.sub(option, question)]
  return [question, option]


def _pack(
    article: Sequence[str],
    segments: List[List[str]],
    max_seq_length: int,
    report: ConversionReport,
) -> Tuple[List[str], List[int]]:
  """(tokens, type ids) of `[CLS] A [SEP] B.. [SEP]`, cut longest first."""
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
  """Accuracy by level (those with examples) and 'all'; `levels`: names/ids."""
  predictions, labels, levels = map(np.asarray, (predictions, labels, levels))
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
  # `levels` are names or ids; unknown ones are refused.
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
