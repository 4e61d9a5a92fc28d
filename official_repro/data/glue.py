r"""GLUE readers and BERT-style feature conversion for fine-tuning.

Reads `<glue_dir>/<DIR>/<split>.tsv` (train and dev) of the eight tasks the
papers report; WNLI is left out, as in BERT and ELECTRA: its dev set is
adversarial. Quotes are plain text (MRPC and STS-B have unmatched `"`).
Unusable rows are skipped and reported; a label outside the task's set would
bias the metric, so it raises `GlueLabelError`. Not reused: Model Garden's
GLUE processors read through `tfds.load`, a download, not the user's files;
its `_truncate_seq_pair` is private and does not say whether it cut.
"""

import dataclasses
import math
import os
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

from absl import logging
import numpy as np
import tensorflow as tf

from official_repro.common import cli
from official_repro.data import read_report
from official_repro.data import vocab as vocab_lib

_BOM = '\ufeff'

ColumnKey = Union[str, int]
Label = Union[int, float]


@dataclasses.dataclass(frozen=True)
class GlueTaskSpec:
  """A GLUE task: e.g. 'sst2' in 'SST-2', a label's id its index in the list."""

  name: str
  directory: str
  label_list: Tuple[str, ...]
  is_regression: bool
  dev_splits: Tuple[str, ...]
  headline_metric: str

  @property
  def splits(self) -> Tuple[str, ...]:
    """All splits the reader accepts: 'train' and the dev splits."""
    return ('train',) + self.dev_splits


_BINARY = ('0', '1')
_ENTAILMENT = ('entailment', 'not_entailment')
_THREE_WAY = ('contradiction', 'entailment', 'neutral')
_MNLI_DEV = ('dev_matched', 'dev_mismatched')

GLUE_TASKS: Dict[str, GlueTaskSpec] = {
    spec.name: spec
    for spec in (
        GlueTaskSpec('cola', 'CoLA', _BINARY, False, ('dev',), 'mcc'),
        GlueTaskSpec('sst2', 'SST-2', _BINARY, False, ('dev',), 'accuracy'),
        GlueTaskSpec('mrpc', 'MRPC', _BINARY, False, ('dev',), 'accuracy'),
        GlueTaskSpec('stsb', 'STS-B', (), True, ('dev',), 'spearman'),
        GlueTaskSpec('qqp', 'QQP', _BINARY, False, ('dev',), 'accuracy'),
        GlueTaskSpec('mnli', 'MNLI', _THREE_WAY, False, _MNLI_DEV, 'accuracy'),
        GlueTaskSpec('qnli', 'QNLI', _ENTAILMENT, False, ('dev',), 'accuracy'),
        GlueTaskSpec('rte', 'RTE', _ENTAILMENT, False, ('dev',), 'accuracy'),
    )
}

# The task names in the column order of the papers' GLUE tables.
GLUE_TASK_NAMES: Tuple[str, ...] = tuple(GLUE_TASKS)
STSB_SCORE_RANGE = (0.0, 5.0)


@dataclasses.dataclass(frozen=True)
class _Columns:
  """A task's fields: header names, or positions (and `num_columns`)."""

  text_a: ColumnKey
  text_b: Optional[ColumnKey]
  label: ColumnKey
  num_columns: Optional[int] = None

  @property
  def has_header(self) -> bool:
    return isinstance(self.text_a, str)


_COLUMNS: Dict[str, _Columns] = {
    'cola': _Columns(text_a=3, text_b=None, label=1, num_columns=4),
    'sst2': _Columns('sentence', None, 'label'),
    'mrpc': _Columns('#1 String', '#2 String', 'Quality'),
    'stsb': _Columns('sentence1', 'sentence2', 'score'),
    'qqp': _Columns('question1', 'question2', 'is_duplicate'),
    'mnli': _Columns('sentence1', 'sentence2', 'gold_label'),
    'qnli': _Columns('question', 'sentence', 'label'),
    'rte': _Columns('sentence1', 'sentence2', 'label'),
}
# The tasks of one sentence (segment ids all 0): CoLA and SST-2.
SINGLE_SENTENCE_TASK_NAMES: Tuple[str, ...] = tuple(
    name for name, columns in _COLUMNS.items() if columns.text_b is None
)


class GlueLabelError(cli.UserError):
  """A label outside the task's label set (or an invalid STS-B score)."""


@dataclasses.dataclass(frozen=True)
class GlueExample:
  """One example; `label` indexes `label_list` (STS-B: the float score)."""

  guid: str
  text_a: str
  text_b: Optional[str]
  label: Label
  line_number: int


def get_task_spec(task: str) -> GlueTaskSpec:
  """The spec of `task`; ValueError listing the valid names if unknown."""
  if task not in GLUE_TASKS:
    raise cli.UserError(
        f'Unknown GLUE task {task!r}; expected one of '
        f'{sorted(GLUE_TASKS)} (WNLI is not supported).'
    )
  return GLUE_TASKS[task]


def glue_file_path(glue_dir: str, task: str, split: str) -> str:
  """`<glue_dir>/<DIR>/<split>.tsv`, after checking the task and split."""
  spec = get_task_spec(task)
  if split not in spec.splits:
    raise cli.UserError(
        f'Unknown split {split!r} for GLUE task {task!r}; '
        f'expected one of {list(spec.splits)}.'
    )
  return os.path.join(glue_dir, spec.directory, f'{split}.tsv')


def read_examples(
    glue_dir: str, task: str, split: str
) -> Tuple[List[GlueExample], read_report.ReadReport]:
  """The examples of one GLUE split in file order, and a report of its rows."""
  spec = get_task_spec(task)
  path = glue_file_path(glue_dir, task, split)
  if not tf.io.gfile.exists(path) or tf.io.gfile.isdir(path):
    raise FileNotFoundError(
        f'GLUE file {path} not found (expected {spec.directory}/{split}.tsv '
        f'under {glue_dir}).'
    )
  columns = _COLUMNS[task]
  report = read_report.ReadReport(path=path, record_name='rows')
  examples, indices = [], None
  for line_number, line in _read_lines(path):
    if indices is None:
      indices = _column_indices(columns, line, path)
      if columns.has_header:
        continue
    guid = f'{task}-{split}-{report.num_records}'
    report.num_records += 1
    fields = [] if line is None else line.split('\t')
    problem = line is None and 'not valid UTF-8'
    problem = problem or _row_problem(fields, indices, columns)
    if problem:
      report.add_malformed(line_number, problem)
      continue
    text_b = None if columns.text_b is None else fields[indices.text_b]
    label = _parse_label(fields[indices.label], spec, path, line_number)
    examples.append(
        GlueExample(guid, fields[indices.text_a], text_b, label, line_number)
    )
  if indices is None:
    raise cli.UserError(f'GLUE file {path} is empty.')
  if not examples:
    raise cli.UserError(
        f'GLUE file {path} has no examples: {report.num_records} row(s) '
        f'after its header, {report.num_malformed} of them malformed; give '
        'the split with its rows.'
    )
  report.num_examples = len(examples)
  report.log(f'GLUE {task}/{split}')
  return examples, report


def _read_lines(path: str) -> Iterator[Tuple[int, Optional[str]]]:
  r"""Yields (line number, text without line ending or BOM, None if not UTF-8).

  Splits on '\n' only: iterating over a GFile would drop a '\r' in a field.
  """
  with tf.io.gfile.GFile(path, 'rb') as f:
    raw_lines = f.read().split(b'\n')
  if raw_lines[-1] == b'':  # a final '\n' ends the last line; empty file
    raw_lines.pop()
  for line_number, raw in enumerate(raw_lines, start=1):
    try:
      line = raw.removesuffix(b'\r').decode('utf-8')
    except UnicodeDecodeError:
      line = None
    if line_number == 1 and line is not None:
      line = line.removeprefix(_BOM)
    yield line_number, line


def _column_indices(
    columns: _Columns, first_line: Optional[str], path: str
) -> _Columns:
  """Column positions: by position, or looked up in the header line."""
  if not columns.has_header:
    return columns
  header = (first_line or '').split('\t')
  names = (columns.text_a, columns.text_b, columns.label)
  wanted = [name for name in names if name is not None]
  missing = [name for name in wanted if name not in header]
  if missing:
    raise cli.UserError(
        f'{path}, line 1: header lacks columns {missing}; expected {wanted} '
        f'among the tab-separated header, found {header}.'
    )
  positions = (None if name is None else header.index(name) for name in names)
  return _Columns(*positions, num_columns=len(header))


def _row_problem(
    fields: Sequence[str], indices: _Columns, columns: _Columns
) -> Optional[str]:
  """Why a row cannot be used, or None if it can."""
  if len(fields) != indices.num_columns:
    return (
        f'expected {indices.num_columns} tab-separated columns, found '
        f'{len(fields)}'
    )
  text_keys = [('text_a', columns.text_a), ('text_b', columns.text_b)]
  for attribute, name in text_keys:
    if name is not None and not fields[getattr(indices, attribute)].strip():
      column = name if isinstance(name, str) else f'column {name}'
      return f'empty text in {column}'
  return None


def _parse_label(
    value: str, spec: GlueTaskSpec, path: str, line_number: int
) -> Label:
  """The label id (or STS-B score) of a row's label field."""
  value = value.strip()
  if spec.is_regression:
    low, high = STSB_SCORE_RANGE
    try:
      score = float(value)
    except ValueError:
      score = math.nan
    if not (math.isfinite(score) and low <= score <= high):
      raise GlueLabelError(
          f'{path}, line {line_number}: {spec.name} score {value!r} is not a '
          f'number in [{low}, {high}].'
      )
    return score
  if value not in spec.label_list:
    raise GlueLabelError(
        f'{path}, line {line_number}: {spec.name} label {value!r} is not one '
        f'of {list(spec.label_list)}.'
    )
  return spec.label_list.index(value)


@dataclasses.dataclass(frozen=True)
class FeatureReport:
  """Examples converted (one feature each), and those that lost tokens."""

  num_examples: int
  num_truncated: int


def convert_examples_to_features(
    examples: Sequence[GlueExample], tokenizer, max_seq_length: int
) -> Tuple[Dict[str, np.ndarray], FeatureReport]:
  """Tokenizes examples into `[CLS] a [SEP] (b [SEP]) [PAD]...` inputs.

  Type ids are 1 for b and its [SEP]. A pair too long loses tokens from the
  end of the longer sentence, one at a time (b on a tie), as in BERT.

  Returns:
    int32 `[N, L]` `input_word_ids`, `input_mask`, `input_type_ids` and `[N]`
    `label_ids` (float32 for STS-B); and a `FeatureReport`.
  """
  if not examples:
    raise cli.UserError('No examples to convert.')
  if max_seq_length < 3:
    raise cli.UserError(
        f'max_seq_length must be >= 3 to hold [CLS] and two '
        f'[SEP], got {max_seq_length}.'
    )
  kinds = {isinstance(example.label, float) for example in examples}
  if len(kinds) > 1:
    raise cli.UserError(
        'Examples mix int (classification) and float (regression) labels.'
    )
  special_ids = vocab_lib.finetuning_token_ids(tokenizer)
  features, num_truncated = _input_arrays(
      examples, tokenizer, special_ids, max_seq_length
  )
  label_dtype = np.float32 if kinds.pop() else np.int32
  features['label_ids'] = np.array([e.label for e in examples], label_dtype)
  report = FeatureReport(len(examples), num_truncated)
  logging.info(
      'Converted %d GLUE examples to length %d; %d truncated.',
      len(examples),
      max_seq_length,
      num_truncated,
  )
  return features, report


def _input_arrays(
    examples: Sequence[GlueExample],
    tokenizer,
    special_ids: Dict[str, int],
    max_seq_length: int,
) -> Tuple[Dict[str, np.ndarray], int]:
  """The three int32 `[N, L]` encoder inputs, and how many were truncated."""
  shape = (len(examples), max_seq_length)
  features = dict(
      input_word_ids=np.full(shape, special_ids[vocab_lib.PAD_TOKEN], np.int32),
      input_mask=np.zeros(shape, np.int32),
      input_type_ids=np.zeros(shape, np.int32),
  )
  sep_id = special_ids[vocab_lib.SEP_TOKEN]
  num_truncated = 0
  texts = [e.text_a for e in examples]
  texts += [e.text_b for e in examples if e.text_b is not None]
  with vocab_lib.prefetched(tokenizer, texts):
    for row, example in enumerate(examples):
      tokens_a = tokenizer.tokenize(example.text_a)
      tokens_b = None
      if example.text_b is not None:
        tokens_b = tokenizer.tokenize(example.text_b)
      num_truncated += int(_truncate(tokens_a, tokens_b, max_seq_length))
      ids = tokenizer.convert_tokens_to_ids(tokens_a)
      ids = [special_ids[vocab_lib.CLS_TOKEN], *ids, sep_id]
      type_ids = [0] * len(ids)
      if tokens_b is not None:
        ids_b = tokenizer.convert_tokens_to_ids(tokens_b) + [sep_id]
        ids, type_ids = ids + ids_b, type_ids + [1] * len(ids_b)
      features['input_word_ids'][row, : len(ids)] = ids
      features['input_mask'][row, : len(ids)] = 1
      features['input_type_ids'][row, : len(ids)] = type_ids
  return features, num_truncated


def _truncate(
    tokens_a: List[str], tokens_b: Optional[List[str]], max_seq_length: int
) -> bool:
  """Cuts the token lists in place to fit; returns whether any were cut."""
  if tokens_b is None:
    budget = max_seq_length - 2
    truncated = len(tokens_a) > budget
    del tokens_a[budget:]
    return truncated
  budget = max_seq_length - 3
  truncated = len(tokens_a) + len(tokens_b) > budget
  while len(tokens_a) + len(tokens_b) > budget:
    longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
    longer.pop()
  return truncated
