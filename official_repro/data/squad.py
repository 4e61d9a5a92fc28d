"""SQuAD 1.1 / 2.0 reading, windowed feature conversion and answer extraction.

Windows and span search are Model Garden's `squad_lib`
(`convert_examples_to_features`, `postprocess_output`). Not reused: its JSON
reader raises a bare `KeyError` on a malformed file and silently drops training
questions whose answer is not at `answer_start` (here: the JSON location, and a
`ReadReport` of dropped ones); its features are TFRecords padded with 0 (here:
numpy arrays padded with [PAD]'s id); `write_predictions` only writes files and
applies the SQuAD 2.0 null threshold, which is left to the caller here.
"""

import dataclasses
import math
from typing import AbstractSet, Any, Dict, Iterator, List, NamedTuple
from typing import Sequence, Tuple, Type, Union

from absl import logging
import numpy as np
import tensorflow as tf

from official.nlp.data import squad_lib
from official.nlp.tools import tokenization
from official_repro.common import cli
from official_repro.common import json_files
from official_repro.data import read_report
from official_repro.data import vocab as vocab_lib

SquadExample = squad_lib.SquadExample

# Characters that separate context words (Model Garden's set: ASCII whitespace
# plus the narrow no-break space U+202F).
_WHITESPACE = frozenset(' \t\r\n\u202f')
_MAX_LOGGED_IDS = 10
# (text, start_logit, end_logit) of the n-best list Model Garden's
# `postprocess_output` makes when no span is valid (SQuAD 1.1).
_NO_SPAN_ENTRIES = [('empty', 0.0, 0.0)]
_Types = Union[Type[Any], Tuple[Type[Any], ...]]


class QuestionEntry(NamedTuple):
  """A SQuAD question; `json_path` e.g. `data[0].paragraphs[2].qas[1]`."""

  qid: str
  source: str
  json_path: str
  paragraph: Dict[str, Any]
  qa: Dict[str, Any]

  def where(self, suffix: str = '') -> str:
    """`'<source>: <json_path><suffix> (question id ...)'` for messages."""
    return f'{self.source}: {self.json_path}{suffix} (question id {self.qid!r})'


@dataclasses.dataclass(frozen=True)
class FeatureMetadata:
  """What answer extraction needs of a window; named as `squad_lib`'s features.

  `token_to_orig_map`: context position -> index into `example.doc_tokens`.
  """

  unique_id: int
  example_index: int
  doc_span_index: int
  tokens: List[str]
  token_to_orig_map: Dict[int, int]
  token_is_max_context: Dict[int, bool]


class _RawResult(NamedTuple):
  """Model outputs for one feature, as `squad_lib.postprocess_output` wants."""

  unique_id: int
  start_logits: List[float]
  end_logits: List[float]


def required_field(obj: Any, key: str, expected_type: _Types, location: str):
  """`obj[key]`; a `UserError` naming `location` unless of `expected_type`."""
  if not isinstance(obj, dict):
    raise cli.UserError(
        f'{location}: expected a JSON object, got {type(obj).__name__}.'
    )
  if key not in obj:
    raise cli.UserError(f'{location}: missing key {key!r}.')
  value = obj[key]
  if not isinstance(value, expected_type):
    types = (
        expected_type if isinstance(expected_type, tuple) else [expected_type]
    )
    raise cli.UserError(
        f'{location}: {key!r} must be {" or ".join(t.__name__ for t in types)}'
        f', got {type(value).__name__}.'
    )
  return value


def load_articles(path: str) -> List[Dict[str, Any]]:
  """The `data` list of a SQuAD JSON file (any `tf.io.gfile` path)."""
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f'SQuAD file not found: {path}')
  return articles_of(json_files.read_json(path), source=path)


def articles_of(dataset: Any, source: str) -> List[Dict[str, Any]]:
  """The `data` list of a parsed SQuAD file (ValueError, naming `source`)."""
  return required_field(dataset, 'data', list, f'{source}: top level')


def iterate_questions(
    articles: Sequence[Any], source: str
) -> Iterator[QuestionEntry]:
  """Yields each question in file order, checking structure and unique ids."""
  first_seen = {}
  for a, article in enumerate(articles):
    article_path = f'data[{a}]'
    paragraphs = required_field(
        article, 'paragraphs', list, f'{source}: {article_path}'
    )
    for p, paragraph in enumerate(paragraphs):
      paragraph_path = f'{article_path}.paragraphs[{p}]'
      qas = required_field(
          paragraph, 'qas', list, f'{source}: {paragraph_path}'
      )
      for q, qa in enumerate(qas):
        json_path = f'{paragraph_path}.qas[{q}]'
        qid = required_field(qa, 'id', str, f'{source}: {json_path}')
        if qid in first_seen:
          raise cli.UserError(
              f'{source}: {json_path}: duplicate question id '
              f'{qid!r}, first used at {first_seen[qid]}.'
          )
        first_seen[qid] = json_path
        yield QuestionEntry(qid, source, json_path, paragraph, qa)


def read_examples(
    path: str, version_2_with_negative: bool, is_training: bool
) -> Tuple[List[SquadExample], read_report.ReadReport]:
  """Reads a SQuAD 1.1 or 2.0 JSON file into Model Garden `SquadExample`s.

  Training uses each answerable question's first answer; one whose text is not
  at `answer_start` would teach a wrong span, so it is skipped and reported as
  malformed. Impossible questions get positions -1 and text ''. Evaluation
  keeps every question and reads no answers. The report counts 'questions'
  and `counts['impossible']`.
  """
  articles = load_articles(path)
  report = read_report.ReadReport(path=path, record_name='questions')
  examples = []
  current_paragraph, words, char_to_word = None, [], []
  for entry in iterate_questions(articles, path):
    if entry.paragraph is not current_paragraph:
      current_paragraph = entry.paragraph
      words, char_to_word = _paragraph_words(entry, path)
    report.num_records += 1
    question = required_field(entry.qa, 'question', str, entry.where())
    is_impossible = _is_impossible(entry, version_2_with_negative)
    report.counts['impossible'] += int(is_impossible)
    if not is_training:
      examples.append(SquadExample(entry.qid, question, words))
    elif is_impossible:
      examples.append(
          SquadExample(entry.qid, question, words, '', -1, -1, True)
      )
    else:
      example = _answered_example(entry, question, words, char_to_word)
      if isinstance(example, str):
        report.add_malformed(None, example)
      else:
        examples.append(example)
  report.num_examples = len(examples)
  report.log('SQuAD')
  return examples, report


def _paragraph_words(
    entry: QuestionEntry, path: str
) -> Tuple[List[str], List[int]]:
  """`(words, char_to_word)` of the entry's context, refusing an empty one.

  A whitespace character belongs to the word before it (-1 before any).
  """
  paragraph_location = f'{path}: {entry.json_path.rsplit(".", 1)[0]}'
  context = required_field(entry.paragraph, 'context', str, paragraph_location)
  words, char_to_word = [], []
  after_whitespace = True
  for char in context:
    if char in _WHITESPACE:
      after_whitespace = True
    elif after_whitespace:
      words.append(char)
      after_whitespace = False
    else:
      words[-1] += char
    char_to_word.append(len(words) - 1)
  if not words:
    raise cli.UserError(f'{paragraph_location}: context is empty.')
  return words, char_to_word


def _is_impossible(entry: QuestionEntry, version_2_with_negative: bool) -> bool:
  """The question's `is_impossible`, checked for type and SQuAD version."""
  is_impossible = entry.qa.get('is_impossible', False)
  if not isinstance(is_impossible, bool):
    raise cli.UserError(
        f"{entry.where()}: 'is_impossible' must be bool, got "
        f'{type(is_impossible).__name__}.'
    )
  if is_impossible and not version_2_with_negative:
    raise cli.UserError(
        f'{entry.where()}: question is marked is_impossible (SQuAD 2.0 '
        'data) but the file is read with version_2_with_negative=False.'
    )
  return is_impossible


def _answered_example(
    entry: QuestionEntry,
    question: str,
    words: List[str],
    char_to_word: List[int],
) -> Union[SquadExample, str]:
  """The training example of its first answer, or why the answer is not used."""
  answers = required_field(entry.qa, 'answers', list, entry.where())
  if not answers:
    raise cli.UserError(
        f'{entry.where()}: an answerable training question '
        'needs at least one answer.'
    )
  answer_location = entry.where('.answers[0]')
  answer_text = required_field(answers[0], 'text', str, answer_location)
  answer_start = required_field(
      answers[0], 'answer_start', int, answer_location
  )
  # The answer's words must hold its text (Model Garden's test).
  end_char = answer_start + len(answer_text) - 1
  span = None
  if answer_text.strip() and 0 <= answer_start <= end_char < len(char_to_word):
    span = max(char_to_word[answer_start], 0), char_to_word[end_char]
    covered = ' '.join(words[span[0] : span[1] + 1])
    if ' '.join(tokenization.whitespace_tokenize(answer_text)) not in covered:
      span = None
  if span is None:
    return (
        f'{entry.json_path} (question id {entry.qid!r}): answer '
        f'text {answer_text!r} is not in the context at answer_start '
        f'{answer_start}'
    )
  return SquadExample(entry.qid, question, words, answer_text, *span)


def convert_to_features(
    examples: Sequence[SquadExample],
    tokenizer: Any,
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
    is_training: bool,
) -> Tuple[Dict[str, np.ndarray], List[FeatureMetadata]]:
  """Tokenizes examples into `[CLS] question [SEP] context [SEP]` windows.

  Windows are `doc_stride` WordPieces apart (Model Garden's); `tokenizer` is
  a WordPiece `FullTokenizer`-like object with [CLS], [SEP] and [PAD].

  Returns:
    `(features, metadata)`: int32 `[N, S]` `input_word_ids`, `input_mask`,
    `input_type_ids` and, when training, `[N]` `start_positions` and
    `end_positions` (0, [CLS], without the whole answer); one
    `FeatureMetadata` per window for `extract_answers`.
  """
  if doc_stride < 1 or max_query_length < 1:
    raise cli.UserError(
        'doc_stride and max_query_length must be >= 1, got '
        f'{doc_stride} and {max_query_length}.'
    )
  if max_seq_length < max_query_length + 4:
    raise cli.UserError(
        f'max_seq_length {max_seq_length} leaves no room for context: it must '
        'hold [CLS], the question (up to max_query_length = '
        f'{max_query_length}), two [SEP] and at least one context WordPiece.'
    )
  if getattr(tokenizer, 'kind', vocab_lib.WORDPIECE) != vocab_lib.WORDPIECE:
    # Answers are mapped back to text through WordPiece's '##' pieces and
    # BERT's BasicTokenizer (Model Garden's squad_lib).
    raise cli.UserError(
        'SQuAD here reads WordPiece vocabularies only: its answers are '
        "aligned with the text through WordPiece's pieces; give a model "
        'with a vocab.txt.'
    )
  pad_id = vocab_lib.finetuning_token_ids(tokenizer)[vocab_lib.PAD_TOKEN]
  mg_features = []
  # Model Garden tokenizes the question, each context word and the answer.
  texts = []
  for example in examples:
    texts += [example.question_text, *example.doc_tokens]
    if is_training and example.orig_answer_text:
      texts.append(example.orig_answer_text)
  with vocab_lib.prefetched(tokenizer, texts):
    squad_lib.convert_examples_to_features(
        examples,
        tokenizer,
        max_seq_length,
        doc_stride,
        max_query_length,
        is_training,
        # With batch_size=1 Model Garden emits no padding features.
        output_fn=lambda feature, is_padding=False: mg_features.append(feature),
        batch_size=1,
    )
  _refuse_examples_without(
      examples,
      {feature.example_index for feature in mg_features},
      'no context WordPieces (the tokenizer dropped every character)',
  )
  arrays = _feature_arrays(mg_features, max_seq_length, pad_id, is_training)
  logging.info(
      'Converted %d SQuAD examples into %d windows.',
      len(examples),
      len(mg_features),
  )
  # Model Garden's features hold the `FeatureMetadata` fields by name.
  names = [field.name for field in dataclasses.fields(FeatureMetadata)]
  return arrays, [
      FeatureMetadata(**{name: getattr(feature, name) for name in names})
      for feature in mg_features
  ]


def _refuse_examples_without(
    examples: Sequence[SquadExample],
    example_indices: AbstractSet[int],
    problem: str,
) -> None:
  """Refuses examples whose index is not in `example_indices`."""
  ids = [e.qas_id for i, e in enumerate(examples) if i not in example_indices]
  if ids:
    raise cli.UserError(
        f'{len(ids)} examples have {problem}; first ids: '
        f'{ids[:_MAX_LOGGED_IDS]}.'
    )


def _feature_arrays(
    mg_features: Sequence[squad_lib.InputFeatures],
    max_seq_length: int,
    pad_id: int,
    is_training: bool,
) -> Dict[str, np.ndarray]:
  """The `[N, S]` encoder inputs (and `[N]` positions when training)."""

  def stack(name: str) -> np.ndarray:
    rows = [getattr(feature, name) for feature in mg_features]
    return np.array(rows, np.int32).reshape(len(rows), max_seq_length)

  arrays = dict(
      input_word_ids=stack('input_ids'),
      input_mask=stack('input_mask'),
      input_type_ids=stack('segment_ids'),
  )
  arrays['input_word_ids'][arrays['input_mask'] == 0] = pad_id
  if is_training:
    for name in ('start_position', 'end_position'):
      arrays[name + 's'] = np.array(
          [getattr(feature, name) for feature in mg_features], np.int32
      )
    logging.info(
        '%d training windows of %d are labelled [CLS] (impossible '
        'question or answer outside the window).',
        int(np.sum(arrays['start_positions'] == 0)),
        len(mg_features),
    )
  return arrays


def extract_answers(
    examples: Sequence[SquadExample],
    features_metadata: Sequence[FeatureMetadata],
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    version_2_with_negative: bool = False,
    do_lower_case: bool = True,
) -> Tuple[Dict[str, str], Dict[str, float]]:
  """Turns float `[N, S]` span logits into an answer text per question.

  Model Garden's `postprocess_output` searches the spans. For SQuAD 2.0,
  `null_score_diffs[qid]` is the [CLS] score (minimised over windows) minus
  the best span's; the caller predicts '' above a threshold
  (`squad_metrics.apply_null_threshold`). No valid span: ''.

  Returns:
    `(predictions, null_score_diffs)` by question id (diffs empty for 1.1).
  """
  if n_best_size < 1 or max_answer_length < 1:
    raise cli.UserError(
        'n_best_size and max_answer_length must be >= 1, got '
        f'{n_best_size} and {max_answer_length}.'
    )
  start_logits, end_logits = np.asarray(start_logits), np.asarray(end_logits)
  _check_outputs(examples, features_metadata, start_logits, end_logits)
  results = [
      _RawResult(feature.unique_id, start.tolist(), end.tolist())
      for feature, start, end in zip(
          features_metadata, start_logits, end_logits
      )
  ]
  predictions, nbest, null_score_diffs = squad_lib.postprocess_output(
      examples,
      features_metadata,
      results,
      n_best_size,
      max_answer_length,
      do_lower_case,
      version_2_with_negative,
      null_score_diff_threshold=math.inf,
  )
  # '' for the questions Model Garden found no valid span for.
  no_span_ids = [
      qid
      for qid, entries in nbest.items()
      if [(e['text'], e['start_logit'], e['end_logit']) for e in entries]
      == _NO_SPAN_ENTRIES
  ]
  for qid in no_span_ids:
    predictions[qid] = ''
  if no_span_ids:
    logging.warning(
        '%d questions have no valid answer span; predicting "". '
        'First ids: %s',
        len(no_span_ids),
        ', '.join(no_span_ids[:_MAX_LOGGED_IDS]),
    )
  return (
      dict(predictions),
      {qid: float(diff) for qid, diff in null_score_diffs.items()},
  )


def _check_outputs(
    examples: Sequence[SquadExample],
    features_metadata: Sequence[FeatureMetadata],
    start_logits: np.ndarray,
    end_logits: np.ndarray,
) -> None:
  """Refuses logits not `[N, >= longest window]`, unknown or unfed examples."""
  longest_window = max((len(f.tokens) for f in features_metadata), default=0)
  num = len(features_metadata)
  named_logits = dict(start_logits=start_logits, end_logits=end_logits)
  for name, logits in named_logits.items():
    shape = logits.shape
    if len(shape) != 2 or shape[0] != num or shape[1] < longest_window:
      raise cli.UserError(
          f'{name} must be [num_features={num}, '
          f'seq_length>={longest_window}], got shape {shape}.'
      )
  example_indices = {f.example_index for f in features_metadata}
  if any(index < 0 or index >= len(examples) for index in example_indices):
    raise cli.UserError(
        'features_metadata refers to examples outside the '
        f'{len(examples)} given.'
    )
  _refuse_examples_without(
      examples, example_indices, 'no feature (were features dropped?)'
  )
