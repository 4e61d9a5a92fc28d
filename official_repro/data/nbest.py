r"""Readers of N-best hypotheses with first-pass scores, and of references.

A speech recogniser's first pass writes, per utterance, its N best
hypotheses (rank 1 is its output) with their scores; a second pass rescores
them with a language model. Three N-best formats are read into `NBestList`s:

  * 'espnet': an ESPnet N-best decode directory holding one directory per
    rank, `1best_recog/` ... `<N>best_recog/`. Each holds
      - `text`: `<utt-id> <HYPOTHESIS WORDS>` a line (an utterance with no
        words is `<utt-id>` alone);
      - `score`: `<utt-id> tensor(-46.63)` (or a bare number): the total
        first-pass score, used as `first_pass_score`;
      - `scores` (optional): `<utt-id> {"decoder": "tensor(-0.37)", "ctc":
        "tensor(-0.004)", "lm": "tensor(-77.35)"}`, a JSON object of the
        unweighted score components, kept in `Hypothesis.components`.
  * 'json': the JSON of the mlm-scoring repository,
    `{"<utt-id>": {"ref": "...", "hyp_1": {"score": -12.3, "text": "..."},
    ...}, ...}`. `hyp_<N>` is rank N; "ref", where present, is returned as
    the utterance's embedded reference.
  * 'tsv': one hypothesis a line, four tab-separated fields
    `utt_id<TAB>rank<TAB>first_pass_score<TAB>text`, rank an integer >= 1,
    the score a finite number (higher is better, e.g. a log-probability),
    the text possibly empty (the line then ends in a tab). An optional first
    line `utt_id<TAB>rank<TAB>first_pass_score<TAB>text` is a header.

References are a Kaldi-style `text` file (`<utt-id> WORDS ...`) or an sclite
`.trn` file (`WORDS ... (<utt-id>)`, a tab or a space before the
parenthesis). ESPnet writes trn ids as `<speaker>-<utt-id>`;
`match_references` accepts those for an N-best list of `<utt-id>`.

What is skipped and what is an error:

  * A malformed line or entry (too few fields, a rank or score that is not a
    finite number, a hypothesis with no score line) is skipped and named
    (file, line number or JSON key, and what was expected) in the
    `ReadReport`; its other lines are read.
  * The same rank of the same utterance twice, or the same reference id
    twice, is an error: which copy is right cannot be known, and either
    choice changes the WER silently.
  * An N-best list with no reference is an error in `match_references`: left
    out, it would change the WER silently. References without an N-best list
    are allowed (a reference file may cover several sets).
  * Reading fails when nothing at all could be read.

All paths go through `tf.io.gfile` (local, `gs://`, ...). Texts are split at
whitespace and re-joined with single spaces; `lower_case=True` lower-cases
hypotheses and references (for uncased vocabularies).
"""

import dataclasses
import json
import math
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

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
  """One first-pass hypothesis.

  Attributes:
    rank: its 1-based rank in the first pass (1 is the first-pass output).
    text: its words, separated by single spaces.
    first_pass_score: the first pass's total score (higher is better).
    components: the first pass's score components by name (ESPnet's
      `scores` file), empty where the format has none.
  """

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
  """The hypotheses of one utterance, by increasing rank.

  Attributes:
    utterance_id: the utterance's id.
    hypotheses: its hypotheses, sorted by rank (ranks need not be
      contiguous).
  """

  utterance_id: str
  hypotheses: Tuple[Hypothesis, ...]


@dataclasses.dataclass(frozen=True)
class ReadReport:
  """What a reader read and skipped.

  Attributes:
    path: the file or directory read.
    file_format: the format used (resolved if 'auto').
    num_utterances: N-best lists (or references) returned.
    num_hypotheses: hypotheses in them (0 for references).
    malformed: `(location, description)` of each skipped line or entry; the
      location names the file and the 1-based line number (or the JSON
      utterance and key).
  """

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
            {'location': location, 'description': description}
            for location, description in self.malformed
        ],
    }


@dataclasses.dataclass(frozen=True)
class NBestSet:
  """The N-best lists of one file or directory.

  Attributes:
    lists: the N-best lists, in the order their utterances first appear.
    embedded_references: references stored with the hypotheses ('json'
      format's "ref"), by utterance id; empty for other formats.
    report: what was read and skipped.
  """

  lists: Tuple[NBestList, ...]
  embedded_references: Mapping[str, str]
  report: ReadReport


def read_nbest(
    path: str, nbest_format: str = 'auto', lower_case: bool = False
) -> NBestSet:
  """Reads N-best lists with first-pass scores.

  Args:
    path: an ESPnet decode directory, or a JSON or TSV file.
    nbest_format: one of `NBEST_FORMATS`. 'auto' picks 'espnet' for a
      directory, 'json' for a file whose first non-blank character is '{',
      and 'tsv' otherwise.
    lower_case: lower-case hypotheses (and embedded references).

  Returns:
    The N-best lists and a report of what was read and skipped.

  Raises:
    FileNotFoundError: `path`, or a file the format requires, is missing.
    ValueError: unknown format, text that is not UTF-8 or (for 'json') not
      JSON, a rank given twice for one utterance, or no hypothesis at all.
  """
  if nbest_format not in NBEST_FORMATS:
    raise cli.UserError(
        f'nbest_format must be one of {NBEST_FORMATS}, got {nbest_format!r}.'
    )
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f'N-best path not found: {path}')
  if nbest_format == 'auto':
    nbest_format = _detect_nbest_format(path)
  collector = _NBestCollector(path, lower_case)
  references = {}
  if nbest_format == 'espnet':
    _read_espnet(path, collector)
  elif nbest_format == 'json':
    references = _read_mlm_scoring_json(path, collector)
  else:
    _read_tsv(path, collector)
  nbest_set = collector.build(nbest_format, references)
  _log_report(nbest_set.report)
  return nbest_set


def read_references(
    path: str, reference_format: str = 'auto', lower_case: bool = False
) -> Tuple[Dict[str, str], ReadReport]:
  """Reads reference transcripts.

  Args:
    path: a Kaldi-style `text` file or an sclite `.trn` file.
    reference_format: one of `REFERENCE_FORMATS`. 'auto' picks 'trn' for a
      name ending in '.trn' or when each of the first 100 non-blank lines
      ends in `(<id>)`, and 'kaldi' otherwise.
    lower_case: lower-case the references.

  Returns:
    The references by id, in file order, and a report.

  Raises:
    FileNotFoundError: `path` does not exist.
    ValueError: unknown format, a line that is not UTF-8, an id given twice,
      or no reference at all.
  """
  if reference_format not in REFERENCE_FORMATS:
    raise cli.UserError(
        f'reference_format must be one of {REFERENCE_FORMATS}, '
        f'got {reference_format!r}.'
    )
  lines = text_files.read_lines(path, 'References file')
  if reference_format == 'auto':
    reference_format = _detect_reference_format(path, lines)
  references = {}
  first_line = {}
  malformed = []
  for line_number, line in enumerate(lines, start=1):
    if not line.strip():
      continue
    if reference_format == 'trn':
      match = _TRN_LINE.match(line)
      if not match:
        malformed.append(
            (f'{path} line {line_number}', 'expected "WORDS ... (<utt-id>)"')
        )
        continue
      text, utterance_id = match.group(1), match.group(2)
    else:
      fields = line.split(maxsplit=1)
      utterance_id = fields[0]
      text = fields[1] if len(fields) > 1 else ''
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
  """The reference of each N-best list.

  An utterance id is looked up as it is, and else as the end of a reference
  id `<prefix>-<utt-id>` (ESPnet's trn ids are `<speaker>-<utt-id>`).

  Args:
    nbest_lists: the N-best lists.
    references: references by id.
    nbest_path: where the lists were read from (for error messages).
    references_path: where the references were read from (ditto).

  Returns:
    The reference of each list, in the order of `nbest_lists`.

  Raises:
    ValueError: a list has no reference, or its id ends two reference ids.
  """
  by_suffix = {}
  for reference_id in references:
    for position, character in enumerate(reference_id):
      if character == '-' and position + 1 < len(reference_id):
        by_suffix.setdefault(reference_id[position + 1 :], []).append(
            reference_id
        )
  matched = []
  missing = []
  for nbest_list in nbest_lists:
    utterance_id = nbest_list.utterance_id
    if utterance_id in references:
      matched.append(references[utterance_id])
      continue
    candidates = by_suffix.get(utterance_id, [])
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
    self._hypotheses.setdefault(utterance_id, {})[rank] = Hypothesis(
        rank=rank,
        text=_normalize_text(text, self._lower_case),
        first_pass_score=score,
        components=dict(components or {}),
    )

  def skip(self, location: str, description: str):
    """Records a malformed line or entry."""
    self.malformed.append((location, description))

  def build(self, file_format: str, references: Mapping[str, str]) -> NBestSet:
    """The `NBestSet` of everything added."""
    lists = tuple(
        NBestList(
            utterance_id, tuple(by_rank[rank] for rank in sorted(by_rank))
        )
        for utterance_id, by_rank in self._hypotheses.items()
    )
    report = ReadReport(
        self._path,
        file_format,
        len(lists),
        sum(len(n.hypotheses) for n in lists),
        tuple(self.malformed),
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
  for rank in sorted(ranks):
    directory = ranks[rank]
    score_path = _join(directory, 'score')
    scores = _read_espnet_scores(score_path, collector)
    components_path = _join(directory, 'scores')
    components = (
        _read_espnet_components(components_path, collector)
        if tf.io.gfile.exists(components_path)
        else {}
    )
    text_path = _join(directory, 'text')
    texts = {}
    for line_number, line in enumerate(
        text_files.read_lines(text_path, 'ESPnet hypothesis file'), start=1
    ):
      if not line.strip():
        continue
      fields = line.split(maxsplit=1)
      utterance_id = fields[0]
      location = f'{text_path} line {line_number}'
      if utterance_id in texts:
        raise cli.UserError(
            f'{location}: utterance {utterance_id!r} was already given at '
            f'line {texts[utterance_id]}; expected each utterance once per '
            'rank.'
        )
      texts[utterance_id] = line_number
      if utterance_id not in scores:
        collector.skip(
            location,
            f'no score for {utterance_id!r} in '
            f'{score_path}; hypothesis skipped',
        )
        continue
      collector.add(
          location,
          utterance_id,
          rank,
          fields[1] if len(fields) > 1 else '',
          scores[utterance_id][0],
          components.get(utterance_id),
      )
    for utterance_id, (_, line_number) in scores.items():
      if utterance_id not in texts:
        collector.skip(
            f'{score_path} line {line_number}',
            f'score of {utterance_id!r} has no hypothesis in '
            f'{text_path}; ignored',
        )


def _read_espnet_scores(
    path: str, collector: _NBestCollector
) -> Dict[str, Tuple[float, int]]:
  """`<utt-id> tensor(<score>)` lines: (score, line number) by utterance id."""
  scores = {}
  for line_number, line in enumerate(
      text_files.read_lines(path, 'ESPnet score file'), start=1
  ):
    if not line.strip():
      continue
    location = f'{path} line {line_number}'
    fields = line.split(maxsplit=1)
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
  for line_number, line in enumerate(
      text_files.read_lines(path, 'ESPnet scores file'), start=1
  ):
    if not line.strip():
      continue
    location = f'{path} line {line_number}'
    fields = line.split(maxsplit=1)
    expected = (
        'expected "<utt-id> {"<name>": "tensor(<finite score>)", '
        '...}"; components ignored'
    )
    try:
      values = json.loads(fields[1]) if len(fields) == 2 else None
    except json.JSONDecodeError:
      values = None
    if not isinstance(values, dict):
      collector.skip(location, expected)
      continue
    parsed = {name: _espnet_number(value) for name, value in values.items()}
    if any(value is None for value in parsed.values()):
      collector.skip(location, expected)
      continue
    components[fields[0]] = parsed
  return components


def _espnet_number(value) -> Optional[float]:
  """The finite number of `tensor(-1.5)`, `-1.5` or 1.5; else None."""
  if isinstance(value, bool):
    return None
  if isinstance(value, (int, float)):
    return float(value) if math.isfinite(value) else None
  if not isinstance(value, str):
    return None
  match = _ESPNET_SCORE.match(value.strip())
  if not match:
    return None
  return _finite_float(match.group(1) or match.group(2))


def _read_mlm_scoring_json(
    path: str, collector: _NBestCollector
) -> Dict[str, str]:
  """Reads the mlm-scoring JSON; returns its "ref" entries."""
  text = '\n'.join(text_files.read_lines(path, 'N-best JSON file'))

  def reject_duplicate_keys(pairs):
    keys = set()
    for key, _ in pairs:
      if key in keys:
        raise cli.UserError(
            f'{path}: key {key!r} appears twice in one JSON '
            'object; expected each utterance and each hyp_<N> '
            'once.'
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
  references = {}
  for utterance_id, entry in content.items():
    location = f'{path} utterance {utterance_id!r}'
    if not isinstance(entry, dict):
      collector.skip(
          location,
          'expected an object of "ref" and "hyp_<N>" '
          'entries; utterance skipped',
      )
      continue
    for key, value in entry.items():
      key_location = f'{location} key {key!r}'
      if key == 'ref':
        if isinstance(value, str):
          references[utterance_id] = value
        else:
          collector.skip(key_location, 'expected a string; reference ignored')
        continue
      match = _JSON_HYPOTHESIS_KEY.match(key)
      if not match:
        collector.skip(
            key_location, 'expected "ref" or "hyp_<N>" (N >= 1); ' 'ignored'
        )
        continue
      score = (
          _espnet_number(value.get('score'))
          if isinstance(value, dict)
          else None
      )
      if score is None or not isinstance(value.get('text'), str):
        collector.skip(
            key_location,
            'expected {"score": <finite number>, '
            '"text": <string>}; hypothesis skipped',
        )
        continue
      collector.add(
          key_location, utterance_id, int(match.group(1)), value['text'], score
      )
  return references


def _read_tsv(path: str, collector: _NBestCollector):
  """Reads `utt_id<TAB>rank<TAB>first_pass_score<TAB>text` lines."""
  for line_number, line in enumerate(
      text_files.read_lines(path, 'N-best TSV file'), start=1
  ):
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


def _detect_nbest_format(path: str) -> str:
  """'espnet' for a directory, 'json' if the file starts with '{', or 'tsv'."""
  if tf.io.gfile.isdir(path):
    return 'espnet'
  with tf.io.gfile.GFile(path, 'rb') as f:
    start = f.read(4096)
  start = start[3:] if start.startswith(b'\xef\xbb\xbf') else start
  return 'json' if start.lstrip().startswith(b'{') else 'tsv'


def _detect_reference_format(path: str, lines: Sequence[str]) -> str:
  """'trn' for a '.trn' name or all-trn first lines, else 'kaldi'."""
  if path.endswith('.trn'):
    return 'trn'
  content = [line for line in lines if line.strip()]
  content = content[:_MAX_LINES_TO_DETECT_FORMAT]
  if content and all(_TRN_LINE.match(line) for line in content):
    return 'trn'
  return 'kaldi'


def _finite_float(text: str) -> Optional[float]:
  """`float(text)` if that is a finite number, else None."""
  try:
    value = float(text)
  except ValueError:
    return None
  return value if math.isfinite(value) else None


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
  location, description = report.malformed[0]
  return (
      f'; all {len(report.malformed)} lines/entries are malformed, the '
      f'first at {location}: {description}'
  )


def _log_report(report: ReadReport):
  """Logs the counts and the first malformed lines."""
  if report.file_format in REFERENCE_FORMATS:
    logging.info(
        '%s (%s): %d references, %d malformed lines.',
        report.path,
        report.file_format,
        report.num_utterances,
        len(report.malformed),
    )
  else:
    logging.info(
        '%s (%s): %d utterances, %d hypotheses, %d malformed lines.',
        report.path,
        report.file_format,
        report.num_utterances,
        report.num_hypotheses,
        len(report.malformed),
    )
  for location, description in report.malformed[:_MAX_LOGGED_PROBLEMS]:
    logging.warning('%s: %s', location, description)
