r"""Readers of first-pass N-best hypotheses with scores, and of references.

N-best formats: 'espnet' (`<N>best_recog/{text,score,scores}`), 'json' (the
mlm-scoring repository's `{"<utt-id>": {"ref": ..., "hyp_1": {"score",
"text"}}}`) and 'tsv' (`utt_id<TAB>rank<TAB>first_pass_score<TAB>text`).
References: Kaldi `text` or sclite `.trn`. A malformed line is skipped and
named in the `ReadReport`; a rank or id given twice, or an N-best list without
a reference, is an error, since either would change the WER silently.
"""

import dataclasses
import json
import math
import re
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence
from typing import Tuple

from absl import logging
import tensorflow as tf

from official_repro.common import cli
from official_repro.data import text_files

NBEST_FORMATS = ('auto', 'espnet', 'json', 'tsv')
REFERENCE_FORMATS = ('auto', 'kaldi', 'trn')
TSV_HEADER = 'utt_id\trank\tfirst_pass_score\ttext'

_ESPNET_RANK_DIRECTORY = re.compile(r'^([1-9][0-9]*)best_recog$')
_ESPNET_SCORE = re.compile(
    r'^(?:tensor\(\s*([^,()\s]+)\s*(?:,[^()]*)?\)|' r'([^()\s]+))$'
)
_JSON_HYPOTHESIS_KEY = re.compile(r'^hyp_([1-9][0-9]*)$')
_TRN_LINE = re.compile(r'^(.*?)\s*\(([^()\s]+)\)\s*$')
_MAX_LINES_TO_DETECT_FORMAT = 100
_MAX_LOGGED_PROBLEMS = 5
_MAX_NAMED_IDS = 5


@dataclasses.dataclass(frozen=True)
class Hypothesis:
  """One hypothesis; score higher is better, `components` ESPnet's `scores`."""

  rank: int
  text: str
  first_pass_score: float
  components: Mapping[str, float] = dataclasses.field(default_factory=dict)

  @property
  def num_words(self) -> int:
    """The number of words of `text`."""
    return len(self.text.split())


@dataclasses.dataclass(frozen=True)
class NBestList:
  """The hypotheses of one utterance, by increasing (not contiguous) rank."""

  utterance_id: str
  hypotheses: Tuple[Hypothesis, ...]


@dataclasses.dataclass(frozen=True)
class ReadReport:
  """What a reader read, and `(location, description)` of what it skipped."""

  path: str
  file_format: str
  num_utterances: int
  num_hypotheses: int
  malformed: Tuple[Tuple[str, str], ...]

  def as_dict(self) -> dict:
    """The report as JSON-serialisable values."""
    return {
        'path': self.path,
        'format': self.file_format,
        'num_utterances': self.num_utterances,
        'num_hypotheses': self.num_hypotheses,
        'num_malformed': len(self.malformed),
        'malformed': [
            dict(location=where, description=what)
            for where, what in self.malformed
        ],
    }


@dataclasses.dataclass(frozen=True)
class NBestSet:
  """N-best lists in first-appearance order, with 'json''s "ref"s by id."""

  lists: Tuple[NBestList, ...]
  embedded_references: Mapping[str, str]
  report: ReadReport


def read_nbest(
    path: str, nbest_format: str = 'auto', lower_case: bool = False
) -> NBestSet:
  """Reads N-best lists ('auto': espnet for a directory, json if '{', tsv)."""
  if nbest_format not in NBEST_FORMATS:
    raise cli.UserError(
        f'nbest_format must be one of {NBEST_FORMATS}, got {nbest_format!r}.'
    )
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f'N-best path not found: {path}')
  if nbest_format == 'auto' and tf.io.gfile.isdir(path):
    nbest_format = 'espnet'
  elif nbest_format == 'auto':  # 'json' if the file starts with '{'.
    with tf.io.gfile.GFile(path, 'rb') as f:
      start = f.read(4096).removeprefix(b'\xef\xbb\xbf')
    nbest_format = 'json' if start.lstrip().startswith(b'{') else 'tsv'
  collector = _NBestCollector(path, lower_case)
  read = {'espnet': _read_espnet, 'json': _read_mlm_scoring_json}.get(
      nbest_format, _read_tsv
  )
  references = read(path, collector) or {}  # Only 'json' has references.
  nbest_set = collector.build(nbest_format, references)
  _log_report(nbest_set.report)
  return nbest_set


def read_references(
    path: str, reference_format: str = 'auto', lower_case: bool = False
) -> Tuple[Dict[str, str], ReadReport]:
  """References by id in file order, and a report ('auto': 'trn' or 'kaldi')."""
  if reference_format not in REFERENCE_FORMATS:
    raise cli.UserError(
        f'reference_format must be one of {REFERENCE_FORMATS}, '
        f'got {reference_format!r}.'
    )
  lines = text_files.read_lines(path, 'References file')
  if reference_format == 'auto':  # 'trn' if named so or all trn at first.
    content = [line for line in lines if line.strip()]
    content = content[:_MAX_LINES_TO_DETECT_FORMAT]
    is_trn = content and all(_TRN_LINE.match(line) for line in content)
    reference_format = 'trn' if path.endswith('.trn') or is_trn else 'kaldi'
  references, first_line, malformed = {}, {}, []
  for line_number, line in enumerate(lines, start=1):
    if not line.strip():
      continue
    if reference_format == 'trn':
      match = _TRN_LINE.match(line)
      if not match:
        where = f'{path} line {line_number}'
        malformed.append((where, 'expected "WORDS ... (<utt-id>)"'))
        continue
      text, utterance_id = match.groups()
    else:
      utterance_id, text = (line.split(maxsplit=1) + [''])[:2]
    if utterance_id in first_line:
      raise cli.UserError(
          f'{path} line {line_number}: reference id {utterance_id!r} was '
          f'already given at line {first_line[utterance_id]}; expected each '
          'id once.'
      )
    first_line[utterance_id] = line_number
    references[utterance_id] = _normalize_text(text, lower_case)
  report = ReadReport(
      path, reference_format, len(references), 0, tuple(malformed)
  )
  if not references:
    raise cli.UserError(
        f'{path}: no reference could be read as '
        f'{reference_format}{_first_problem(report)}.'
    )
  _log_report(report)
  return references, report


def match_references(
    nbest_lists: Sequence[NBestList],
    references: Mapping[str, str],
    nbest_path: str = '',
    references_path: str = '',
) -> List[str]:
  """Each list's reference: by id, or ending a `<speaker>-<utt-id>` id."""
  by_suffix = {}  # Reference ids by each of their ends after a '-'.
  for reference_id in references:
    for position, character in enumerate(reference_id[:-1]):
      if character == '-':
        suffix = reference_id[position + 1 :]
        by_suffix.setdefault(suffix, []).append(reference_id)
  matched, missing = [], []
  for nbest_list in nbest_lists:
    utterance_id = nbest_list.utterance_id
    candidates = by_suffix.get(utterance_id, [])
    if utterance_id in references:
      candidates = [utterance_id]
    if len(candidates) > 1:
      raise cli.UserError(
          f'{references_path or "references"}: utterance {utterance_id!r} '
          f'of {nbest_path or "the N-best lists"} ends the reference ids '
          f'{candidates[:_MAX_NAMED_IDS]}; expected exactly one reference.'
      )
    if candidates:
      matched.append(references[candidates[0]])
    else:
      missing.append(utterance_id)
  if missing:
    raise cli.UserError(
        f'{len(missing)} of {len(nbest_lists)} utterances of '
        f'{nbest_path or "the N-best lists"} have no reference in '
        f'{references_path or "the references"}, e.g. '
        f'{missing[:_MAX_NAMED_IDS]}; expected a reference (id `<utt-id>` '
        'or `<speaker>-<utt-id>`) for every N-best list, since leaving '
        'utterances out changes the WER.'
    )
  return matched


class _NBestCollector:
  """Gathers hypotheses, rejects duplicate ranks, records malformed lines."""

  def __init__(self, path: str, lower_case: bool):
    self._path = path
    self._lower_case = lower_case
    self._hypotheses: Dict[str, Dict[int, Hypothesis]] = {}
    self._locations: Dict[Tuple[str, int], str] = {}
    self.malformed: List[Tuple[str, str]] = []

  def add(
      self,
      location: str,
      utterance_id: str,
      rank: int,
      text: str,
      score: float,
      components: Optional[Mapping[str, float]] = None,
  ):
    """Adds one hypothesis; `location` names its source for errors."""
    key = (utterance_id, rank)
    if key in self._locations:
      raise cli.UserError(
          f'{location}: rank {rank} of utterance {utterance_id!r} was already '
          f'given at {self._locations[key]}; expected each rank of an '
          'utterance once.'
      )
    self._locations[key] = location
    text = _normalize_text(text, self._lower_case)
    self._hypotheses.setdefault(utterance_id, {})[rank] = Hypothesis(
        rank, text, score, dict(components or {})
    )

  def skip(self, location: str, description: str):
    self.malformed.append((location, description))

  def build(self, file_format: str, references: Mapping[str, str]) -> NBestSet:
    """The `NBestSet` of everything added."""
    lists = tuple(
        NBestList(utt_id, tuple(by_rank[rank] for rank in sorted(by_rank)))
        for utt_id, by_rank in self._hypotheses.items()
    )
    num_hypotheses = sum(len(n.hypotheses) for n in lists)
    malformed = tuple(self.malformed)
    report = ReadReport(
        self._path, file_format, len(lists), num_hypotheses, malformed
    )
    if not lists:
      raise cli.UserError(
          f'{self._path}: no hypothesis could be read as '
          f'{file_format}{_first_problem(report)}.'
      )
    for nbest_list in lists:
      first = nbest_list.hypotheses[0].rank
      if first != 1:
        raise cli.UserError(
            f'{self._path}: the list of utterance '
            f'{nbest_list.utterance_id!r} starts at rank {first}; expected '
            "rank 1 (the first pass's best hypothesis), or the first-pass "
            'WER would be that of another rank.'
        )
    references = {
        utterance_id: _normalize_text(text, self._lower_case)
        for utterance_id, text in references.items()
    }
    return NBestSet(lists, references, report)


def _read_espnet(path: str, collector: _NBestCollector):
  """Reads `<N>best_recog/{text,score,scores}` under `path`."""
  ranks = {}
  for name in tf.io.gfile.listdir(path):
    match = _ESPNET_RANK_DIRECTORY.match(name.rstrip('/'))
    if match and tf.io.gfile.isdir(_join(path, match.group(0))):
      ranks[int(match.group(1))] = _join(path, match.group(0))
  if not ranks:
    raise FileNotFoundError(
        f"{path}: no N-best directories; expected ESPnet's 1best_recog/, "
        '2best_recog/, ... each holding `text` and `score`.'
    )
  for rank in sorted(ranks):  # Each `<rank>best_recog/` directory.
    directory = ranks[rank]
    score_path, text_path = _join(directory, 'score'), _join(directory, 'text')
    scores = _read_espnet_scores(score_path, collector)
    components_path = _join(directory, 'scores')
    components = {}
    if tf.io.gfile.exists(components_path):
      components = _read_espnet_components(components_path, collector)
    texts = {}
    hypothesis_lines = _id_lines(text_path, 'ESPnet hypothesis file')
    for line_number, location, [utterance_id, *text] in hypothesis_lines:
      if utterance_id in texts:
        raise cli.UserError(
            f'{location}: utterance {utterance_id!r} was already given at '
            f'line {texts[utterance_id]}; expected each utterance once per '
            'rank.'
        )
      texts[utterance_id] = line_number
      if utterance_id not in scores:
        problem = f'no score for {utterance_id!r} in {score_path}'
        collector.skip(location, problem + '; hypothesis skipped')
        continue
      score, _ = scores[utterance_id]
      hypothesis = (rank, ''.join(text), score, components.get(utterance_id))
      collector.add(location, utterance_id, *hypothesis)
    for utterance_id, (_, line_number) in scores.items():
      if utterance_id not in texts:
        problem = f'score of {utterance_id!r} has no hypothesis in {text_path}'
        collector.skip(
            f'{score_path} line {line_number}', problem + '; ignored'
        )


def _id_lines(
    path: str, description: str
) -> Iterator[Tuple[int, str, List[str]]]:
  """(line number, location, [id, rest]) of each non-blank line."""
  lines = text_files.read_lines(path, description)
  for line_number, line in enumerate(lines, start=1):
    if line.strip():
      yield line_number, f'{path} line {line_number}', line.split(maxsplit=1)


def _read_espnet_scores(
    path: str, collector: _NBestCollector
) -> Dict[str, Tuple[float, int]]:
  """`<utt-id> tensor(<score>)` lines: (score, line number) by utterance id."""
  scores = {}
  for line_number, location, fields in _id_lines(path, 'ESPnet score file'):
    score = _espnet_number(fields[1]) if len(fields) == 2 else None
    if score is None:
      collector.skip(location, 'expected "<utt-id> tensor(<finite score>)"')
      continue
    if fields[0] in scores:
      raise cli.UserError(
          f'{location}: utterance {fields[0]!r} was already scored at line '
          f'{scores[fields[0]][1]}; expected one score per utterance.'
      )
    scores[fields[0]] = (score, line_number)
  return scores


def _read_espnet_components(
    path: str, collector: _NBestCollector
) -> Dict[str, Dict[str, float]]:
  """`<utt-id> {"decoder": "tensor(x)", ...}` lines, by utterance id."""
  components = {}
  expected = (
      'expected "<utt-id> {"<name>": "tensor(<finite score>)", '
      '...}"; components ignored'
  )
  for _, location, fields in _id_lines(path, 'ESPnet scores file'):
    try:
      values = json.loads(fields[1]) if len(fields) == 2 else None
    except json.JSONDecodeError:
      values = None
    parsed = {}
    if isinstance(values, dict):
      parsed = {name: _espnet_number(value) for name, value in values.items()}
    if not isinstance(values, dict) or None in parsed.values():
      collector.skip(location, expected)
    else:
      components[fields[0]] = parsed
  return components


def _espnet_number(value) -> Optional[float]:
  """The finite number of `tensor(-1.5)`, `-1.5` or 1.5; else None."""
  if isinstance(value, (int, float)) and not isinstance(value, bool):
    return float(value) if math.isfinite(value) else None
  match = isinstance(value, str) and _ESPNET_SCORE.match(value.strip())
  return _finite_float(match.group(1) or match.group(2)) if match else None


def _read_mlm_scoring_json(
    path: str, collector: _NBestCollector
) -> Dict[str, str]:
  """Reads the mlm-scoring JSON; returns its "ref" entries."""
  references = {}
  for utterance_id, entry in _load_json_object(path).items():
    location = f'{path} utterance {utterance_id!r}'
    if not isinstance(entry, dict):
      expected = 'an object of "ref" and "hyp_<N>" entries'
      collector.skip(location, f'expected {expected}; utterance skipped')
      continue
    for key, value in entry.items():
      key_location = f'{location} key {key!r}'
      rank = _JSON_HYPOTHESIS_KEY.match(key)
      fields = value if isinstance(value, dict) else {}
      score = _espnet_number(fields.get('score'))
      if key == 'ref' and isinstance(value, str):
        references[utterance_id] = value
      elif key == 'ref':
        collector.skip(key_location, 'expected a string; reference ignored')
      elif not rank:
        problem = 'expected "ref" or "hyp_<N>" (N >= 1); ignored'
        collector.skip(key_location, problem)
      elif score is None or not isinstance(fields.get('text'), str):
        expected = '{"score": <finite number>, "text": <string>}'
        collector.skip(key_location, f'expected {expected}; hypothesis skipped')
      else:
        hypothesis = (int(rank.group(1)), fields['text'], score)
        collector.add(key_location, utterance_id, *hypothesis)
  return references


def _load_json_object(path: str) -> Dict[str, Any]:
  """The file's JSON object, refusing repeated keys and other values."""
  text = '\n'.join(text_files.read_lines(path, 'N-best JSON file'))

  def reject_duplicate_keys(pairs):
    keys = set()
    for key, _ in pairs:
      if key in keys:
        raise cli.UserError(
            f'{path}: key {key!r} appears twice in one JSON object; expected '
            'each utterance and each hyp_<N> once.'
        )
      keys.add(key)
    return dict(pairs)

  try:
    content = json.loads(text, object_pairs_hook=reject_duplicate_keys)
  except json.JSONDecodeError as e:
    raise cli.UserError(
        f'{path} line {e.lineno} column {e.colno}: not valid '
        f'JSON ({e.msg}).'
    ) from e
  if not isinstance(content, dict):
    raise cli.UserError(
        f'{path}: expected a JSON object of utterances '
        '{"<utt-id>": {"ref": ..., "hyp_1": {"score": ..., '
        f'"text": ...}}}}, got a {type(content).__name__}.'
    )
  return content


def _read_tsv(path: str, collector: _NBestCollector):
  """Reads `utt_id<TAB>rank<TAB>first_pass_score<TAB>text` lines."""
  lines = text_files.read_lines(path, 'N-best TSV file')
  for line_number, line in enumerate(lines, start=1):
    if not line.strip() or (line_number == 1 and line == TSV_HEADER):
      continue
    location = f'{path} line {line_number}'
    fields = line.split('\t')
    if len(fields) != 4:
      collector.skip(
          location,
          f'{len(fields)} tab-separated fields; expected '
          '4: utt_id, rank, first_pass_score, text',
      )
      continue
    utterance_id, rank_text, score_text, text = fields
    if not utterance_id.strip():
      collector.skip(location, 'empty utt_id')
      continue
    if not re.fullmatch(r'[1-9][0-9]*', rank_text.strip()):
      raise cli.UserError(
          f'{location}: rank {rank_text.strip()!r} is not an integer >= 1; '
          "ranks count from 1, the first pass's best hypothesis."
      )
    score = _finite_float(score_text)
    if score is None:
      raise cli.UserError(
          f'{location}: first_pass_score {score_text.strip()!r} is not a '
          'finite number.'
      )
    collector.add(location, utterance_id.strip(), int(rank_text), text, score)


def _finite_float(text: str) -> Optional[float]:
  """`float(text)` if that is a finite number, else None."""
  try:
    return float(text) if math.isfinite(float(text)) else None
  except ValueError:
    return None


def _normalize_text(text: str, lower_case: bool) -> str:
  """Words joined by single spaces, lower-cased if asked."""
  text = ' '.join(text.split())
  return text.lower() if lower_case else text


def _join(directory: str, name: str) -> str:
  """`directory/name` for local and URL-style (`gs://`, `ram://`) paths."""
  return directory.rstrip('/') + '/' + name


def _first_problem(report: ReadReport) -> str:
  """', the first of N malformed lines: ...' or '' (for error messages)."""
  if not report.malformed:
    return ''
  where, what = report.malformed[0]
  num = len(report.malformed)
  return (
      f'; all {num} lines/entries are malformed, the first at {where}: {what}'
  )


def _log_report(report: ReadReport):
  """Logs the counts and the first malformed lines."""
  if report.file_format in REFERENCE_FORMATS:
    counts = f'{report.num_utterances} references'
  else:
    counts = (
        f'{report.num_utterances} utterances, '
        f'{report.num_hypotheses} hypotheses'
    )
  logging.info(
      '%s (%s): %s, %d malformed lines.',
      report.path,
      report.file_format,
      counts,
      len(report.malformed),
  )
  for location, description in report.malformed[:_MAX_LOGGED_PROBLEMS]:
    logging.warning('%s: %s', location, description)
