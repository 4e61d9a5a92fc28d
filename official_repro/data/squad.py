"""SQuAD 1.1 / 2.0 reading, windowed feature conversion and answer extraction.

Model Garden's `squad_lib` does the heavy lifting:
`convert_examples_to_features` (question truncation, context windows
`doc_stride` apart, answer alignment, [CLS] labels for windows without the
answer) and `postprocess_output` (n-best span search mapped back to context
words). What is not reused, and why:
`read_examples` re-implements the JSON reader, since Model Garden's raises a
bare `KeyError` on a malformed file and silently drops training questions
whose answer is not at `answer_start` (here: path and JSON location, and a
`read_report.ReadReport` of dropped ones); `convert_to_features` returns numpy
arrays, not TFRecords, padded with [PAD]'s id (Model Garden: 0), without its
duplicated evaluation padding; `extract_answers` returns predictions in memory
(`write_predictions` only writes files) and leaves the SQuAD 2.0 null-score
threshold to the caller.
"""

import dataclasses
import json
import math
from typing import AbstractSet, Any, Dict, Iterator, List, Mapping, NamedTuple
from typing import Optional, Sequence, Tuple, Type, Union

from absl import logging
import numpy as np
import tensorflow as tf

from official.nlp.data import squad_lib
from official.nlp.tools import tokenization
from official_repro.common import cli
from official_repro.data import read_report
from official_repro.data import vocab as vocab_lib

SquadExample = squad_lib.SquadExample

# Characters that separate context words (Model Garden's set: ASCII whitespace
# plus the narrow no-break space U+202F).
_WHITESPACE = frozenset(' \t\r\n\u202f')
_MAX_LOGGED_IDS = 10
# What Model Garden's `postprocess_output` returns when no span is valid.
_NO_SPAN_PLACEHOLDER = 'empty'


class QuestionEntry(NamedTuple):
  """One question of a SQuAD JSON file with where it was found.

  `source` is the file path (or a description of an in-memory dataset),
  `json_path` e.g. `data[0].paragraphs[2].qas[1]`, `paragraph` and `qa` the
  objects holding the question and of the question.
  """

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
  """What answer extraction needs to know about one window (feature).

  The attribute names are those of Model Garden's `squad_lib.InputFeatures`, so
  these objects can be passed to `squad_lib.postprocess_output`.

  Attributes:
    unique_id: unique within one `convert_to_features` call.
    example_index: index in the examples given to `convert_to_features`.
    doc_span_index: index of this window among the example's windows.
    tokens: the WordPieces of the window, `[CLS] question [SEP] context [SEP]`.
    token_to_orig_map: window position -> index of the whitespace-separated
      context word (`example.doc_tokens`) the WordPiece comes from; only context
      positions are keys.
    token_is_max_context: window position -> whether this window gives the
      token its largest context (the min of left and right context) among all
      windows containing it.
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


def required_field(
    obj: Any,
    key: str,
    expected_type: Union[Type[Any], Tuple[Type[Any], ...]],
    location: str,
) -> Any:
  """Returns `obj[key]`, checking that `obj` is an object holding the type.

  Raises:
    ValueError: naming `location` if `obj` is not an object, lacks `key`, or
      the value has the wrong type.
  """
  if not isinstance(obj, dict):
    raise cli.UserError(
        f'{location}: expected a JSON object, got {type(obj).__name__}.'
    )
  if key not in obj:
    raise cli.UserError(f'{location}: missing key {key!r}.')
  value = obj[key]
  if not isinstance(value, expected_type):
    raise cli.UserError(
        f'{location}: {key!r} must be {_type_names(expected_type)}'
        f', got {type(value).__name__}.'
    )
  return value


def _type_names(expected_type: Union[Type[Any], Tuple[Type[Any], ...]]) -> str:
  types = (
      expected_type if isinstance(expected_type, tuple) else (expected_type,)
  )
  return ' or '.join(t.__name__ for t in types)


def load_articles(path: str) -> List[Dict[str, Any]]:
  """Reads a SQuAD JSON file (any `tf.io.gfile` path) and returns its `data`.

  Raises:
    FileNotFoundError: if `path` does not exist.
    ValueError: if the file is not JSON (with its line and column) or has no
      top-level `data` list.
  """
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f'SQuAD file not found: {path}')
  with tf.io.gfile.GFile(path, 'r') as f:
    text = f.read()
  try:
    dataset = json.loads(text)
  except json.JSONDecodeError as e:
    raise cli.UserError(
        f'{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}.'
    ) from e
  return articles_of(dataset, source=path)


def articles_of(dataset: Any, source: str) -> List[Dict[str, Any]]:
  """The `data` list of a parsed SQuAD file (ValueError, naming `source`)."""
  return required_field(dataset, 'data', list, f'{source}: top level')


def iterate_questions(
    articles: Sequence[Any], source: str
) -> Iterator[QuestionEntry]:
  """Yields every question of a SQuAD `data` list, checking its structure.

  Checks that each article has a `paragraphs` list, each paragraph a `qas`
  list, and each question a string `id` not used before; yields one
  `QuestionEntry` per question, in file order.

  Raises:
    ValueError: naming the JSON location of the first structural problem or
      duplicated question id.
  """
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


def _split_words(context: str) -> Tuple[List[str], List[int]]:
  """`(words, char_to_word)`: whitespace-separated words, each char's word.

  Whitespace belongs to the preceding word, -1 before the first word.
  """
  words = []
  char_to_word = []
  after_whitespace = True
  for char in context:
    if char in _WHITESPACE:
      after_whitespace = True
    else:
      if after_whitespace:
        words.append(char)
      else:
        words[-1] += char
      after_whitespace = False
    char_to_word.append(len(words) - 1)
  return words, char_to_word


def _answer_word_span(
    answer_text: str,
    answer_start: int,
    words: List[str],
    char_to_word: List[int],
) -> Optional[Tuple[int, int]]:
  """`(first_word, last_word)` of a character-level answer, or None.

  None if the answer is empty, out of the context, or not within the words
  covering its characters (whitespace collapsed; Model Garden's criterion).
  """
  end_char = answer_start + len(answer_text) - 1
  if (
      not answer_text.strip()
      or answer_start < 0
      or end_char >= len(char_to_word)
  ):
    return None
  first_word = max(char_to_word[answer_start], 0)
  last_word = char_to_word[end_char]
  covered = ' '.join(words[first_word : last_word + 1])
  wanted = ' '.join(tokenization.whitespace_tokenize(answer_text))
  return (first_word, last_word) if wanted in covered else None


def read_examples(
    path: str, version_2_with_negative: bool, is_training: bool
) -> Tuple[List[SquadExample], read_report.ReadReport]:
  """Reads a SQuAD 1.1 or 2.0 JSON file into Model Garden `SquadExample`s.

  Layout: `data[] -> paragraphs[] -> {context, qas[]}`, each question `{id,
  question, answers: [{text, answer_start}], is_impossible}` (missing: False).
  Training uses each answerable question's first answer (Model Garden
  refuses more), mapped to context words; one whose text is not at
  `answer_start` would teach a wrong span, so it is skipped and recorded as
  malformed in the report. Impossible questions get positions -1 and text
  ''. Evaluation keeps every question and reads no answers.

  Returns:
    `(examples, report)`: one example per kept question, in file order, and
    the counts of read ('questions'), impossible (`counts['impossible']`)
    and skipped questions.

  Raises:
    FileNotFoundError: if `path` does not exist.
    ValueError: naming the path and JSON location, for invalid JSON, missing
      keys or wrong types, duplicated ids, an empty context, an answerable
      training question without answers, or an `is_impossible` question when
      `version_2_with_negative` is False.
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
          SquadExample(
              entry.qid,
              question,
              words,
              orig_answer_text='',
              start_position=-1,
              end_position=-1,
              is_impossible=True,
          )
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
  """`_split_words` of the entry's context, refusing an empty one."""
  paragraph_location = f'{path}: {entry.json_path.rsplit(".", 1)[0]}'
  context = required_field(entry.paragraph, 'context', str, paragraph_location)
  words, char_to_word = _split_words(context)
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
  span = _answer_word_span(answer_text, answer_start, words, char_to_word)
  if span is None:
    return (
        f'{entry.json_path} (question id {entry.qid!r}): answer '
        f'text {answer_text!r} is not in the context at answer_start '
        f'{answer_start}'
    )
  return SquadExample(
      entry.qid,
      question,
      words,
      orig_answer_text=answer_text,
      start_position=span[0],
      end_position=span[1],
  )


def _check_window_sizes(
    max_seq_length: int, doc_stride: int, max_query_length: int
) -> None:
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


def convert_to_features(
    examples: Sequence[SquadExample],
    tokenizer: Any,
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
    is_training: bool,
) -> Tuple[Dict[str, np.ndarray], List[FeatureMetadata]]:
  """Tokenizes examples into fixed-length windows for a span-prediction model.

  Each window is `[CLS] question [SEP] context-window [SEP] [PAD]...`, type
  ids 0 then 1 from the context on; a long context is cut into windows
  `doc_stride` WordPieces apart (Model Garden's), so an example may give
  several. `examples` come from `read_examples` (same `is_training`);
  `tokenizer` is `vocab.FullTokenizer` or another WordPiece tokenizer with
  Model Garden's `FullTokenizer` interface, its vocab holding [CLS], [SEP]
  and [PAD]; questions are cut to `max_query_length` WordPieces.

  Returns:
    `(features, metadata)`: for N windows of length S = `max_seq_length`,
    int32 `[N, S]` `input_word_ids` (padded with [PAD]'s id), `input_mask`
    and `input_type_ids`, and when `is_training` int32 `[N]`
    `start_positions`, `end_positions` (0, [CLS], for an impossible question
    or a window without the whole answer); one `FeatureMetadata` per window,
    in order, for `extract_answers`.

  Raises:
    ValueError: if the window sizes leave no room for context, the vocab lacks
      a special token, or an example's context has no WordPieces.
  """
  _check_window_sizes(max_seq_length, doc_stride, max_query_length)
  pad_id = _wordpiece_pad_id(tokenizer)
  mg_features = _model_garden_features(
      examples,
      tokenizer,
      max_seq_length,
      doc_stride,
      max_query_length,
      is_training,
  )
  without_features = _ids_without_features(
      examples, {feature.example_index for feature in mg_features}
  )
  if without_features:
    raise cli.UserError(
        f'{len(without_features)} examples have no context WordPieces (the '
        'tokenizer dropped every character); first ids: '
        f'{without_features[:_MAX_LOGGED_IDS]}.'
    )
  arrays = _feature_arrays(mg_features, max_seq_length, pad_id, is_training)
  logging.info(
      'Converted %d SQuAD examples into %d windows.',
      len(examples),
      len(mg_features),
  )
  return arrays, [_metadata(feature) for feature in mg_features]


def _metadata(feature: squad_lib.InputFeatures) -> FeatureMetadata:
  """The `FeatureMetadata` fields of Model Garden's feature (same names)."""
  names = (field.name for field in dataclasses.fields(FeatureMetadata))
  return FeatureMetadata(**{name: getattr(feature, name) for name in names})


def _wordpiece_pad_id(tokenizer: Any) -> int:
  """[PAD]'s id, refusing a SentencePiece tokenizer or missing specials."""
  if getattr(tokenizer, 'kind', vocab_lib.WORDPIECE) != vocab_lib.WORDPIECE:
    # Answers are mapped back to text through WordPiece's '##' pieces and
    # BERT's BasicTokenizer (Model Garden's squad_lib).
    raise cli.UserError(
        'SQuAD here reads WordPiece vocabularies only: its answers are '
        "aligned with the text through WordPiece's pieces; give a model "
        'with a vocab.txt.'
    )
  return vocab_lib.special_token_ids(
      tokenizer.vocab,
      (vocab_lib.CLS_TOKEN, vocab_lib.SEP_TOKEN, vocab_lib.PAD_TOKEN),
  )[vocab_lib.PAD_TOKEN]


def _model_garden_features(
    examples: Sequence[SquadExample],
    tokenizer: Any,
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
    is_training: bool,
) -> List[squad_lib.InputFeatures]:
  """Model Garden's windows of `examples`, their texts tokenized in batches."""
  mg_features = []

  def collect(feature: squad_lib.InputFeatures, is_padding: bool = False):
    # With batch_size=1 below Model Garden never emits padding features.
    del is_padding
    mg_features.append(feature)

  # Model Garden tokenizes the question, each context word and the answer.
  texts = []
  for example in examples:
    texts.append(example.question_text)
    texts += example.doc_tokens
    if is_training and example.orig_answer_text:
      texts.append(example.orig_answer_text)
  with vocab_lib.prefetched(tokenizer, texts):
    squad_lib.convert_examples_to_features(
        examples=examples,
        tokenizer=tokenizer,
        max_seq_length=max_seq_length,
        doc_stride=doc_stride,
        max_query_length=max_query_length,
        is_training=is_training,
        output_fn=collect,
        batch_size=1,
    )
  return mg_features


def _ids_without_features(
    examples: Sequence[SquadExample], example_indices: AbstractSet[int]
) -> List[str]:
  """Question ids of the examples whose index is not in `example_indices`."""
  return [
      example.qas_id
      for index, example in enumerate(examples)
      if index not in example_indices
  ]


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
    arrays['start_positions'] = np.array(
        [feature.start_position for feature in mg_features], np.int32
    )
    arrays['end_positions'] = np.array(
        [feature.end_position for feature in mg_features], np.int32
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
  """Turns span logits into answer texts, one per question.

  Model Garden's `postprocess_output` pairs each window's `n_best_size` best
  starts and ends (in the context, start in its max-context window, at most
  `max_answer_length` WordPieces) and maps the best over all windows back to
  the context's characters. For SQuAD 2.0 the null score is the [CLS] one,
  minimised over windows, and `null_score_diffs[qid]` is it minus the best
  span's; the caller predicts '' above a threshold (`apply_null_threshold`
  of `metrics.squad_metrics`). A question with no valid span gets '' (SQuAD
  2.0: its null score as the diff). Logits: float `[N, S]`, a row a feature.

  Returns:
    `(predictions, null_score_diffs)`: question id -> answer text, and for
    SQuAD 2.0 question id -> null score diff (empty for SQuAD 1.1).

  Raises:
    ValueError: if the logits do not have one row per feature and at least as
      many columns as the longest window, a feature points outside
      `examples`, or an example has no feature.
  """
  if n_best_size < 1 or max_answer_length < 1:
    raise cli.UserError(
        'n_best_size and max_answer_length must be >= 1, got '
        f'{n_best_size} and {max_answer_length}.'
    )
  start_logits = np.asarray(start_logits)
  end_logits = np.asarray(end_logits)
  _check_logits(features_metadata, start_logits, end_logits)
  _check_features_cover(examples, features_metadata)
  results = [
      _RawResult(feature.unique_id, start.tolist(), end.tolist())
      for feature, start, end in zip(
          features_metadata, start_logits, end_logits
      )
  ]
  predictions, nbest, null_score_diffs = squad_lib.postprocess_output(
      all_examples=examples,
      all_features=features_metadata,
      all_results=results,
      n_best_size=n_best_size,
      max_answer_length=max_answer_length,
      do_lower_case=do_lower_case,
      version_2_with_negative=version_2_with_negative,
      null_score_diff_threshold=math.inf,
  )
  _predict_empty_without_span(predictions, nbest)
  return (
      dict(predictions),
      {qid: float(diff) for qid, diff in null_score_diffs.items()},
  )


def _predict_empty_without_span(
    predictions: Dict[str, str], nbest: Mapping[str, Any]
) -> None:
  """'' for the questions Model Garden found no valid span for."""
  no_span_ids = [
      qid for qid, entries in nbest.items() if _is_no_span_placeholder(entries)
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


def _check_logits(
    features_metadata: Sequence[FeatureMetadata],
    start_logits: np.ndarray,
    end_logits: np.ndarray,
) -> None:
  """Refuses logits other than `[N, >= longest window]`."""
  longest_window = max((len(f.tokens) for f in features_metadata), default=0)
  for name, logits in (
      ('start_logits', start_logits),
      ('end_logits', end_logits),
  ):
    if (
        logits.ndim != 2
        or logits.shape[0] != len(features_metadata)
        or logits.shape[1] < longest_window
    ):
      raise cli.UserError(
          f'{name} must be [num_features={len(features_metadata)}, '
          f'seq_length>={longest_window}], got shape {logits.shape}.'
      )


def _check_features_cover(
    examples: Sequence[SquadExample],
    features_metadata: Sequence[FeatureMetadata],
) -> None:
  """Refuses features of unknown examples, and examples without features."""
  example_indices = {f.example_index for f in features_metadata}
  if any(index < 0 or index >= len(examples) for index in example_indices):
    raise cli.UserError(
        'features_metadata refers to examples outside the '
        f'{len(examples)} given.'
    )
  without_features = _ids_without_features(examples, example_indices)
  if without_features:
    raise cli.UserError(
        f'{len(without_features)} examples have no feature (were features '
        f'dropped?); first ids: {without_features[:_MAX_LOGGED_IDS]}.'
    )


def _is_no_span_placeholder(nbest_entries: Sequence[Mapping[str, Any]]) -> bool:
  """Whether Model Garden filled an empty SQuAD 1.1 n-best list with 'empty'."""
  return (
      len(nbest_entries) == 1
      and nbest_entries[0]['text'] == _NO_SPAN_PLACEHOLDER
      and nbest_entries[0]['start_logit'] == 0.0
      and nbest_entries[0]['end_logit'] == 0.0
  )
