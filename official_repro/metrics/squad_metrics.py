"""SQuAD 1.1 / 2.0 metrics: official answer normalization, EM/F1, evaluators.

Reported SQuAD numbers come from the official evaluation scripts, of which
Model Garden ships copies (`official.nlp.tools.squad_evaluate_v1_1` and
`squad_evaluate_v2_0`). This module delegates the scoring to them and adds:

* public, documented `normalize_answer`, `exact_match` and `f1` (the official
  functions are private to those modules);
* percentages (0-100) for both versions: Model Garden's v1.1 copy returns
  fractions under the key `final_f1`;
* a check that every question has a prediction. The v1.1 script scores a
  missing prediction 0 with only a log line, and Model Garden's v2.0 copy drops
  the question from the denominator; a partial prediction set means examples
  were lost upstream, so both evaluators here raise instead;
* SQuAD 2.0 scores both at a chosen null-score threshold and at the best
  thresholds found by the official search (`find_best_thresh`), computed from
  the un-thresholded best non-null predictions and the null score diffs that
  `official_repro.data.squad.extract_answers` returns.
"""

import os
from typing import Any, Dict, List, Mapping, Sequence, Tuple, Union

from absl import logging

from official.nlp.tools import squad_evaluate_v1_1
from official.nlp.tools import squad_evaluate_v2_0
from official_repro.data import squad

# pylint: disable=protected-access
_official_normalize = squad_evaluate_v2_0._normalize_answer
_official_exact = squad_evaluate_v2_0._compute_exact
_official_f1 = squad_evaluate_v2_0._compute_f1
# pylint: enable=protected-access

DatasetLike = Union[str, os.PathLike, Mapping[str, Any], Sequence[Any]]

_MAX_LISTED_IDS = 5
_IN_MEMORY_SOURCE = '<in-memory SQuAD dataset>'
_V2_KEYS_AT_THRESHOLD = (
    'exact',
    'f1',
    'total',
    'HasAns_exact',
    'HasAns_f1',
    'HasAns_total',
    'NoAns_exact',
    'NoAns_f1',
    'NoAns_total',
)


def normalize_answer(text: str) -> str:
  """The official SQuAD normalization.

  Lower-cases, removes ASCII punctuation, removes the articles a/an/the as
  whole words, and collapses whitespace to single spaces.

  Args:
    text: an answer string.

  Returns:
    The normalized string, e.g. `'The  Eiffel-Tower!'` -> `'eiffeltower'`.
  """
  return _official_normalize(text)


def _as_answer_list(ground_truths: Union[str, Sequence[str]]) -> List[str]:
  answers = (
      [ground_truths] if isinstance(ground_truths, str) else list(ground_truths)
  )
  if not answers:
    raise ValueError(
        'ground_truths is empty; give at least one answer '
        "(the empty string '' for an unanswerable question)."
    )
  return answers


def exact_match(
    prediction: str, ground_truths: Union[str, Sequence[str]]
) -> float:
  """1.0 if the normalized prediction equals any normalized gold answer.

  Args:
    prediction: the predicted answer.
    ground_truths: one gold answer or several; the best match counts.

  Returns:
    1.0 or 0.0.
  """
  return float(
      max(
          _official_exact(gold, prediction)
          for gold in _as_answer_list(ground_truths)
      )
  )


def f1(prediction: str, ground_truths: Union[str, Sequence[str]]) -> float:
  """Best bag-of-tokens F1 between the prediction and any gold answer.

  Tokens are the whitespace-separated words of the normalized strings.
  `precision = common / len(prediction tokens)`, `recall = common /
  len(gold tokens)`, `F1 = 2PR / (P + R)`, 0 without common tokens. As in the
  v2.0 script, if either side normalizes to no tokens, F1 is 1.0 when both do
  and 0.0 otherwise (the v1.1 script gives 0.0 to two empty strings; SQuAD 1.1
  gold answers are never empty, so the two agree there).

  Args:
    prediction: the predicted answer.
    ground_truths: one gold answer or several; the maximum counts.

  Returns:
    F1 in [0, 1].
  """
  return float(
      max(
          _official_f1(gold, prediction)
          for gold in _as_answer_list(ground_truths)
      )
  )


def apply_null_threshold(
    predictions: Mapping[str, str],
    null_score_diffs: Mapping[str, float],
    threshold: float,
) -> Dict[str, str]:
  """Predicts no answer ('') where the null score diff exceeds a threshold.

  Args:
    predictions: question id -> best non-null answer text.
    null_score_diffs: question id -> null score minus best span score.
    threshold: predict '' where `diff > threshold`.

  Returns:
    Question id -> answer text or ''.

  Raises:
    ValueError: if a predicted question has no null score diff.
  """
  missing = [qid for qid in predictions if qid not in null_score_diffs]
  if missing:
    raise ValueError(
        f'No null score diff for {len(missing)} predicted '
        f'questions; first ids: {missing[:_MAX_LISTED_IDS]}.'
    )
  return {
      qid: '' if null_score_diffs[qid] > threshold else text
      for qid, text in predictions.items()
  }


def _load_articles(dataset: DatasetLike) -> Tuple[List[Any], str]:
  """Returns `(articles, source)` from a path, a parsed file or its `data`."""
  if isinstance(dataset, (str, os.PathLike)):
    path = os.fspath(dataset)
    return squad.load_articles(path), path
  if isinstance(dataset, Mapping):
    return squad.articles_of(dict(dataset), _IN_MEMORY_SOURCE), (
        _IN_MEMORY_SOURCE
    )
  return list(dataset), _IN_MEMORY_SOURCE


def _gold_answers(entry: squad.QuestionEntry) -> List[str]:
  answers = squad.required_field(entry.qa, 'answers', list, entry.where())
  return [
      squad.required_field(answer, 'text', str, entry.where(f'.answers[{i}]'))
      for i, answer in enumerate(answers)
  ]


def _question_ids(
    articles: Sequence[Any], source: str, require_answers: bool
) -> List[str]:
  """Validates the dataset and returns its question ids in file order."""
  question_ids = []
  for entry in squad.iterate_questions(articles, source):
    if not _gold_answers(entry) and require_answers:
      raise ValueError(
          f'{entry.where()}: no gold answers; SQuAD 1.1 evaluation needs at '
          'least one (use evaluate_v2 for SQuAD 2.0 data).'
      )
    question_ids.append(entry.qid)
  if not question_ids:
    raise ValueError(f'{source}: the dataset has no questions.')
  return question_ids


def _restrict_to_questions(
    values: Mapping[str, Any],
    question_ids: Sequence[str],
    what: str,
    source: str,
) -> Dict[str, Any]:
  """Returns `values` for exactly `question_ids`, raising if any is missing."""
  missing = [qid for qid in question_ids if qid not in values]
  if missing:
    raise ValueError(
        f'{source}: no {what} for {len(missing)} of {len(question_ids)} '
        f'questions; first ids: {missing[:_MAX_LISTED_IDS]}.'
    )
  extra = len(values) - len(question_ids)
  if extra > 0:
    logging.warning(
        '%s: ignoring %d %s for questions not in the dataset.',
        source,
        extra,
        what,
    )
  return {qid: values[qid] for qid in question_ids}


def evaluate_v1(
    dataset_json_or_path: DatasetLike, predictions: Mapping[str, str]
) -> Dict[str, float]:
  """Scores SQuAD 1.1 predictions with the official v1.1 script.

  Args:
    dataset_json_or_path: the dev file path, its parsed JSON
      (`{'data': [...]}`), or its `data` list of articles.
    predictions: question id -> predicted answer text.

  Returns:
    `exact_match` and `f1`: percentages (0-100) averaged over questions, each
    question scoring the maximum over its gold answers; `total`: the number
    of questions.

  Raises:
    ValueError: if the dataset is malformed (naming the JSON location), a
      question has no gold answer, or a question has no prediction.
  """
  articles, source = _load_articles(dataset_json_or_path)
  question_ids = _question_ids(articles, source, require_answers=True)
  predictions = _restrict_to_questions(
      predictions, question_ids, 'prediction', source
  )
  scores = squad_evaluate_v1_1.evaluate(articles, predictions)
  return {
      'exact_match': 100.0 * scores['exact_match'],
      'f1': 100.0 * scores['final_f1'],
      'total': len(question_ids),
  }


def evaluate_v2(
    dataset_json_or_path: DatasetLike,
    predictions: Mapping[str, str],
    null_score_diffs: Mapping[str, float],
    null_score_diff_threshold: float = 0.0,
) -> Dict[str, float]:
  """Scores SQuAD 2.0 predictions with the official v2.0 script.

  A question with no gold answer is unanswerable; only '' is right for it.

  Args:
    dataset_json_or_path: the dev file path, its parsed JSON
      (`{'data': [...]}`), or its `data` list of articles.
    predictions: question id -> best non-null answer text, before any null
      threshold (as returned by `data.squad.extract_answers`).
    null_score_diffs: question id -> null score minus best span score.
    null_score_diff_threshold: threshold for the `exact`/`f1`/`HasAns_*`/
      `NoAns_*` scores: '' is predicted where the diff exceeds it.

  Returns:
    Percentages (0-100):
      `exact`, `f1`: over all questions at `null_score_diff_threshold`;
      `HasAns_exact`, `HasAns_f1`, `NoAns_exact`, `NoAns_f1`: the same over
        answerable / unanswerable questions (present only if the dataset has
        such questions);
      `best_exact`, `best_f1`: the best scores over all thresholds, and
      `best_exact_thresh`, `best_f1_thresh`: thresholds reaching them (the
        official search: questions sorted by diff are switched from '' to
        their prediction one at a time; the diff of the question after which
        the score is highest, 0.0 when predicting '' everywhere is best);
    and the counts `total`, `HasAns_total`, `NoAns_total`.

  Raises:
    ValueError: if the dataset is malformed (naming the JSON location), or a
      question has no prediction or no null score diff.
  """
  articles, source = _load_articles(dataset_json_or_path)
  question_ids = _question_ids(articles, source, require_answers=False)
  predictions = _restrict_to_questions(
      predictions, question_ids, 'prediction', source
  )
  null_score_diffs = {
      qid: float(diff)
      for qid, diff in _restrict_to_questions(
          null_score_diffs, question_ids, 'null score diff', source
      ).items()
  }
  thresholded = apply_null_threshold(
      predictions, null_score_diffs, null_score_diff_threshold
  )
  # Without na_probs the script scores the given texts as they are.
  at_threshold = squad_evaluate_v2_0.evaluate(articles, thresholded)
  searched = squad_evaluate_v2_0.evaluate(
      articles, predictions, na_probs=null_score_diffs
  )
  result = {
      key: at_threshold[key]
      for key in _V2_KEYS_AT_THRESHOLD
      if key in at_threshold
  }
  result.update(
      best_exact=searched['final_exact'],
      best_exact_thresh=searched['final_exact_thresh'],
      best_f1=searched['final_f1'],
      best_f1_thresh=searched['final_f1_thresh'],
  )
  return result
