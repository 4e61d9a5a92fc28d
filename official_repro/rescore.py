r"""Rescores speech-recognition N-best lists with second-pass LM scores.

  python -m official_repro.rescore \
    --nbest=dev=exp/decode_dev_clean --nbest=test=exp/decode_test_clean \
    --references=data/all/text --lm_scores=exp/pll_scores.tsv \
    --dev_set=dev --weights=0:1:0.05 --length_bonuses=-1:2:0.5 \
    --lower_case --output_json=/tmp/rescore.json

The grid point with the fewest dev word errors is applied to every set
(`rescoring.interpolation`); tables are `rescoring.report`'s. A path without
`<set>=` serves every other set. Without `--lm_scores` or `--init_checkpoint`
(a SCRIPT run or masked LM, `official_repro.score`) only first-pass and
oracle WERs are reported; from Python any `lm_scores.Scorer` serves.
"""

import dataclasses
import functools
import json
import os
import re
from typing import Mapping, Optional, Sequence, Tuple

from absl import flags
import numpy as np

from official_repro.common import cli
from official_repro import score
from official_repro.common import json_files
from official_repro.data import nbest
from official_repro.rescoring import interpolation
from official_repro.rescoring import lm_scores
from official_repro.rescoring import report

FLAGS = flags.FLAGS

_SET_PATH = re.compile(r'^([A-Za-z0-9_.-]+)=(.+)$')

# The last line printed when no LM scores were given.
NO_LM_SCORES = (
    'No rescoring: interpolating the first pass with an LM needs LM scores; '
    'give --lm_scores=[<set>=]<path> (utt_id<TAB>rank<TAB>score lines from '
    'any LM) or --init_checkpoint=<SCRIPT pretraining model_dir>.'
)


@dataclasses.dataclass(frozen=True)
class Settings:
  """What `run` does: the flags of the same names (`(set, path)` pairs)."""

  nbest: Tuple[Tuple[str, str], ...]
  nbest_format: str = 'auto'
  references: Tuple[Tuple[str, str], ...] = ()
  reference_format: str = 'auto'
  lm_scores: Tuple[Tuple[str, str], ...] = ()
  lower_case: bool = False
  dev_set: str = ''
  weights: Tuple[float, ...] = (1.0,)
  length_bonuses: Tuple[float, ...] = (0.0,)
  output_json: str = ''
  output_text_dir: str = ''

  def __post_init__(self):
    names = [name for name, _ in self.nbest]
    if not names:
      raise cli.UserError('No N-best lists; give --nbest=[<set>=]<path>.')
    _check_set_pairs('nbest', self.nbest, names)
    _check_set_pairs('references', self.references, names)
    _check_set_pairs('lm_scores', self.lm_scores, names)
    if not self.weights or not self.length_bonuses:
      raise cli.UserError(
          '--weights and --length_bonuses must each give at least one value.'
      )
    if self.dev_set and self.dev_set not in names:
      raise cli.UserError(
          f'--dev_set={self.dev_set!r} is not one of the sets '
          f'{names} given by --nbest.'
      )

  def as_dict(self) -> dict:
    """The settings as JSON-serialisable values."""
    # Through JSON: tuples become lists, as they read back.
    values = json.loads(json.dumps(dataclasses.asdict(self)))
    return {**values, 'nbest': dict(self.nbest)}


def _check_set_pairs(
    flag: str, pairs: Sequence[Tuple[str, str]], names: Sequence[str]
) -> None:
  """Each set of `--flag` pairs is an --nbest set, given at most once."""
  named = [name for name, _ in pairs]
  unknown = sorted(set(named) - set(names) - {''})
  if unknown:
    raise cli.UserError(
        f'--{flag} names the sets {unknown}, which no '
        f'--nbest gives; the sets are {names}.'
    )
  repeated = sorted({name for name in named if named.count(name) > 1})
  if repeated:
    what = (
        'more than one path without <set>='
        if '' in repeated
        else f'the sets {repeated} more than once'
    )
    raise cli.UserError(f'--{flag} gives {what}; expected one path per set.')


# More points than any sensible grid: a typo such as a step of 1e-9.
_MAX_GRID_POINTS = 100000


def parse_grid(spec: str, flag_name: str) -> Tuple[float, ...]:
  """The sorted distinct values of numbers and inclusive `start:stop:step`s."""
  values = set()
  for item in spec.split(','):
    item = item.strip()
    parts = item.split(':')
    try:
      numbers = [float(part) for part in parts]
    except ValueError:
      numbers = []
    if len(numbers) == 1:
      values.add(numbers[0])
      continue
    if len(numbers) != 3 or not all(np.isfinite(numbers)):
      raise cli.UserError(
          f'--{flag_name}: {item!r} is not a number or a '
          'start:stop:step range.'
      )
    start, stop, step = numbers
    if step <= 0 or stop < start:
      raise cli.UserError(
          f'--{flag_name}: range {item!r} needs step > 0 and stop >= start.'
      )
    count = int(np.floor((stop - start) / step + 1e-9)) + 1
    if count > _MAX_GRID_POINTS:
      raise cli.UserError(
          f'--{flag_name}: range {item!r} has {count} values; '
          f'at most {_MAX_GRID_POINTS}.'
      )
    values.update(round(start + i * step, 10) for i in range(count))
  return tuple(sorted(values))


_STRING_FLAGS = (
    (
        'init_checkpoint',
        '',
        'Instead of --lm_scores, score the hypotheses with the one-pass PLL '
        'of this SCRIPT pretraining run (its model_dir), or with the '
        'masked-LM PLL of a released masked LM (a Hugging Face folder or a '
        'conversion by official_repro.convert).',
    ),
    ('dev_set', '', 'The set the grid search tunes on.'),
    (
        'weights',
        '0:1:0.1',
        'LM weights to try: values, '
        'start:stop:step ranges (inclusive), comma-separated.',
    ),
    (
        'length_bonuses',
        '0',
        'Per-word bonuses to try, same syntax as --weights.',
    ),
    ('output_json', '', 'Write the grid and the results here.'),
    (
        'output_text_dir',
        '',
        "Write each set's rescored hypotheses to <dir>/<set>/text.",
    ),
)


def define_flags():
  """Defines the command-line flags."""
  flags.DEFINE_multi_string(
      'nbest',
      None,
      '[<set>=]<path> of N-best lists (ESPnet decode directory, '
      'mlm-scoring JSON or utt_id/rank/first_pass_score/text TSV); repeat '
      'for each set.',
  )
  flags.DEFINE_enum(
      'nbest_format',
      'auto',
      nbest.NBEST_FORMATS,
      'Format of every --nbest path.',
  )
  flags.DEFINE_multi_string(
      'references',
      [],
      '[<set>=]<path> of a Kaldi text or sclite .trn '
      'reference file; without <set>= it serves every other set.',
  )
  flags.DEFINE_enum(
      'reference_format',
      'auto',
      nbest.REFERENCE_FORMATS,
      'Format of every --references file.',
  )
  flags.DEFINE_multi_string(
      'lm_scores',
      [],
      '[<set>=]<path> of utt_id<TAB>rank<TAB>score '
      'second-pass LM scores; without <set>= it serves every other set. '
      'Without it or --init_checkpoint, only the first-pass and oracle WERs '
      'are printed.',
  )
  flags.DEFINE_bool(
      'lower_case',
      False,
      'Lower-case hypotheses and references (for uncased vocabularies).',
  )
  for name, default, help_text in _STRING_FLAGS:
    flags.DEFINE_string(name, default, help_text)
  cli.require_flags('nbest')


def settings_from_flags() -> Settings:
  """`Settings` from the parsed flags."""
  return Settings(
      nbest=tuple(_named_nbest_path(value) for value in FLAGS.nbest),
      nbest_format=FLAGS.nbest_format,
      references=tuple(_set_and_path(v) for v in FLAGS.references),
      reference_format=FLAGS.reference_format,
      lm_scores=tuple(_set_and_path(v) for v in FLAGS.lm_scores),
      lower_case=FLAGS.lower_case,
      dev_set=FLAGS.dev_set,
      weights=parse_grid(FLAGS.weights, 'weights'),
      length_bonuses=parse_grid(FLAGS.length_bonuses, 'length_bonuses'),
      output_json=FLAGS.output_json,
      output_text_dir=FLAGS.output_text_dir,
  )


def check_lm_source(settings: Settings, has_scorer: bool) -> None:
  """Checks the settings against where the LM scores come from."""
  if has_scorer and settings.lm_scores:
    raise cli.UserError(
        'Give the LM scores either as --lm_scores files or as a '
        'scorer (--init_checkpoint), not both.'
    )
  if not has_scorer and not settings.lm_scores:
    if settings.output_text_dir:
      raise cli.UserError(
          '--output_text_dir gets the rescored hypotheses, and rescoring '
          'needs LM scores: give --lm_scores or --init_checkpoint, or drop '
          '--output_text_dir.'
      )
    return
  grid_size = len(settings.weights) * len(settings.length_bonuses)
  if grid_size > 1 and not settings.dev_set:
    raise cli.UserError(
        f'The grid has {grid_size} points; give --dev_set, '
        'the set to choose the weight and length bonus on.'
    )


def run(
    settings: Settings,
    scorer: Optional[lm_scores.Scorer] = None,
    batch_size: int = 64,
) -> dict:
  """Reads every set, tunes on the dev set, rescores; `--output_json`'s dict.

  `scorer` replaces `settings.lm_scores` files. Without LM scores only the
  first-pass and oracle WERs are reported, and the grid and weights are None.
  """
  check_lm_source(settings, scorer is not None)
  interpolating = scorer is not None or bool(settings.lm_scores)
  reader = _SetReader(settings, scorer, batch_size, interpolating)
  for name, path in settings.nbest:
    reader.read(name, path)
  grid = weight = length_bonus = None
  if interpolating:
    weight, length_bonus = settings.weights[0], settings.length_bonuses[0]
  if interpolating and settings.dev_set:
    grid = interpolation.grid_search(
        reader.scored_sets[settings.dev_set],
        settings.weights,
        settings.length_bonuses,
    )
    weight, length_bonus = grid.best.weight, grid.best.length_bonus
  results = {
      'settings': settings.as_dict(),
      'weight': weight,
      'length_bonus': length_bonus,
      'grid_search': report.grid_as_dict(grid) if grid else None,
      'sets': {},
  }
  for name, scored_set in reader.scored_sets.items():
    result = interpolation.evaluate(scored_set, weight, length_bonus)
    is_dev_set = interpolating and name == settings.dev_set
    results['sets'][name] = {
        **reader.reports[name],
        'result': result.as_dict(),
        'markdown': report.format_set_table(result, is_dev_set),
    }
    if settings.output_text_dir:
      report.write_kaldi_text(
          f'{settings.output_text_dir.rstrip("/")}/{name}/text',
          interpolation.selected_texts(
              reader.nbest_sets[name].lists,
              interpolation.select(scored_set, weight, length_bonus),
          ),
      )
  if grid:
    results['grid_search']['markdown'] = report.format_grid(grid)
  if settings.output_json:
    json_files.write_json(settings.output_json, results, sort_keys=False)
  return results


class _SetReader:
  """Reads each set's lists, references and LM scores for `run`."""

  def __init__(self, settings, scorer, batch_size, interpolating):
    self._settings, self._scorer = settings, scorer
    self._batch_size, self._interpolating = batch_size, interpolating
    # Each file is read once (a file may serve several sets).
    self._reference_files = functools.cache(
        lambda path: nbest.read_references(
            path, settings.reference_format, settings.lower_case
        )
    )
    self._score_files = functools.cache(lm_scores.read_lm_scores)
    self.scored_sets, self.nbest_sets, self.reports = {}, {}, {}

  def read(self, name: str, path: str) -> None:
    """Reads set `name` of N-best lists at `path` into the three dicts."""
    settings = self._settings
    nbest_set = nbest.read_nbest(
        path, settings.nbest_format, settings.lower_case
    )
    read_report = {'nbest': nbest_set.report.as_dict()}
    references_path = _path_for(name, settings.references)
    if references_path:
      references, references_report = self._reference_files(references_path)
      read_report['references'] = references_report.as_dict()
    elif nbest_set.embedded_references:
      references, references_path = nbest_set.embedded_references, path
      read_report['references'] = {'path': path, 'format': 'embedded'}
    else:
      raise cli.UserError(
          f'Set {name!r} ({path}) has no references; give '
          f'--references={name}=<text or trn file>.'
      )
    scores, scores_path = self._lm_scores(name, nbest_set, read_report)
    matched = nbest.match_references(
        nbest_set.lists, references, path, references_path
    )
    self.scored_sets[name] = interpolation.build_scored_set(
        name, nbest_set.lists, matched, scores, scores_path
    )
    self.nbest_sets[name] = nbest_set
    self.reports[name] = read_report

  def _lm_scores(self, name, nbest_set, read_report):
    """`(scores or None, where they come from)` of a set."""
    scorer = self._scorer
    if not self._interpolating:
      return None, ''
    if scorer is None:
      scores_path = _path_for(name, self._settings.lm_scores)
      if not scores_path:
        raise cli.UserError(
            f'Set {name!r} has no LM scores; give --lm_scores={name}=<tsv>.'
        )
      scores, scores_report = self._score_files(scores_path)
      read_report['lm_scores'] = scores_report.as_dict()
      return scores, scores_path
    scores = lm_scores.score_nbest(
        scorer, nbest_set.lists, self._batch_size, f'LM scores of {name}'
    )
    read_report['lm_scores'] = {'scorer': type(scorer).__name__}
    return scores, f'scorer {type(scorer).__name__}'


def _path_for(name: str, pairs: Sequence[Tuple[str, str]]) -> str:
  """The path given for set `name`, else the one given for every set."""
  paths: Mapping[str, str] = dict(pairs)
  return paths.get(name) or paths.get('', '')


def _set_and_path(value: str) -> Tuple[str, str]:
  """('<set>', '<path>') for '<set>=<path>', ('', value) for a bare path."""
  match = _SET_PATH.match(value)
  return (match.group(1), match.group(2)) if match else ('', value)


def _named_nbest_path(value: str) -> Tuple[str, str]:
  """Like `_set_and_path`, naming a bare path after its last component."""
  name, path = _set_and_path(value)
  if not name:
    name = os.path.splitext(os.path.basename(path.rstrip('/')))[0]
  return name, path


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  settings = settings_from_flags()
  # Checked before a model is loaded, which takes a while.
  check_lm_source(settings, bool(FLAGS.init_checkpoint))
  if settings.output_json:
    json_files.check_writable(settings.output_json, '--output_json')
  scorer = (
      score.PllScorer.from_checkpoint(FLAGS.init_checkpoint)
      if FLAGS.init_checkpoint
      else None
  )
  results = run(settings, scorer=scorer)
  if results['grid_search']:
    print(results['grid_search']['markdown'] + '\n')
  for set_results in results['sets'].values():
    print(set_results['markdown'] + '\n')
  if scorer is None and not settings.lm_scores:
    print(NO_LM_SCORES)


if __name__ == '__main__':
  define_flags()
  cli.run(main)
