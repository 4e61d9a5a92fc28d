"""SQuAD 1.1 / 2.0 metrics: official normalization, EM/F1 and evaluators.

Scoring is delegated to the official scripts Model Garden ships
(`official.nlp.tools.squad_evaluate_v1_1`, `squad_evaluate_v2_0`); this
module adds public `normalize_answer`/`exact_match`/`f1` (private there),
percentages for both versions, an error for a question without a prediction
(the scripts score it 0 or drop it, hiding examples lost upstream), and
SQuAD 2.0 scores at a chosen null threshold and at the official best ones.
"""

import os
from typing import Any, Dict, List, Mapping, Sequence, Tuple, Union

from absl import logging

from official.nlp.tools import squad_evaluate_v1_1
from official.nlp.tools import squad_evaluate_v2_0
from official_repro.data import squad

# The scripts export only `evaluate`; their per-answer scorers are private.
# pylint: disable=protected-access
_official_normalize = squad_evaluate_v2_0._normalize_answer
_official_exact = squad_evaluate_v2_0._compute_exact
_official_f1 = squad_evaluate_v2_0._compute_f1
# pylint: enable=protected-access

DatasetLike = Union[str, os.PathLike, Mapping[str, Any], Sequence[Any]]

_MAX_LISTED_IDS = 5
_IN_MEMORY_SOURCE = '<in-memory SQuAD dataset>'
_V2_KEYS_AT_THRESHOLD = tuple(
    f'{prefix}{key}'
    for prefix in ('', 'HasAns_', 'NoAns_')
    for key in ('exact', 'f1', 'total')
)


def normalize_answer(text: str) -> str:
  """The official normalization: `'The  Eiffel-Tower!'` -> `'eiffeltower'`."""
  return _official_normalize(text)


def exact_match(
    prediction: str, ground_truths: Union[str, Sequence[str]]
) -> float:
  """1.0 if the normalized prediction equals any normalized gold answer."""
  return _best(_official_exact, prediction, ground_truths)


def f1(prediction: str, ground_truths: Union[str, Sequence[str]]) -> float:
  """Best bag-of-normalized-tokens F1 against any gold answer (v2.0 rules)."""
  return _best(_official_f1, prediction, ground_truths)


def _best(score, prediction: str, ground_truths) -> float:
  """The best `score(gold, prediction)` over the gold answers."""
  answers = (
      [ground_truths] if isinstance(ground_truths, str) else list(ground_truths)
  )
  if not answers:
    raise ValueError(
        'ground_truths is empty; give at least one answer '
        "(the empty string '' for an unanswerable question)."
    )
  return float(max(score(gold, prediction) for gold in answers))


def apply_null_threshold(
    predictions: Mapping[str, str],
    null_score_diffs: Mapping[str, float],
    threshold: float,
) -> Dict[str, str]:
  """Predicts '' where null score minus best span score > `threshold`."""
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
    message = '%s: ignoring %d %s for questions not in the dataset.'
    logging.warning(message, source, extra, what)
  return {qid: values[qid] for qid in question_ids}


def evaluate_v1(
    dataset_json_or_path: DatasetLike, predictions: Mapping[str, str]
) -> Dict[str, float]:
  """`exact_match`, `f1` (percent) and `total` by the official v1.1 script."""
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
  """SQuAD 2.0 scores at `null_score_diff_threshold` and at the best thresholds.

  `exact`, `f1`, `HasAns_*`/`NoAns_*`, `best_*` and their `_thresh`, in percent.
  """
  articles, source = _load_articles(dataset_json_or_path)
  question_ids = _question_ids(articles, source, require_answers=False)
  predictions = _restrict_to_questions(
      predictions, question_ids, 'prediction', source
  )
  null_score_diffs = _restrict_to_questions(
      null_score_diffs, question_ids, 'null score diff', source
  )
  null_score_diffs = {qid: float(d) for qid, d in null_score_diffs.items()}
  thresholded = apply_null_threshold(
      predictions, null_score_diffs, null_score_diff_threshold
  )
  # Without na_probs the script scores the given texts as they are.
  at_threshold = squad_evaluate_v2_0.evaluate(articles, thresholded)
  searched = squad_evaluate_v2_0.evaluate(
      articles, predictions, na_probs=null_score_diffs
  )
  result = {
      k: at_threshold[k] for k in _V2_KEYS_AT_THRESHOLD if k in at_threshold
  }
  for key in ('exact', 'exact_thresh', 'f1', 'f1_thresh'):
    result[f'best_{key}'] = searched[f'final_{key}']
  return result
