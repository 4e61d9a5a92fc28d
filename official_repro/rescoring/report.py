"""What rescoring reports: markdown tables, the JSON grid, Kaldi text."""

from typing import List, Tuple

import tensorflow as tf

from official_repro.common import json_files
from official_repro.common import markdown
from official_repro.rescoring import interpolation


def format_grid(grid: interpolation.GridSearchResult) -> str:
  """The dev WER (%) of each grid point: weights down, bonuses across."""
  weights = sorted({point.weight for point in grid.points})
  bonuses = sorted({point.length_bonus for point in grid.points})
  cells = {(point.weight, point.length_bonus): point for point in grid.points}
  rows = []
  for weight in weights:
    row = [f'{weight:g}']
    for bonus in bonuses:
      point = cells[(weight, bonus)]
      text = f'{100 * point.errors.wer:.2f}'
      row.append(f'**{text}**' if point == grid.best else text)
    rows.append(row)
  header = ['weight \\ length bonus'] + [f'{bonus:g}' for bonus in bonuses]
  lines = [
      f'Dev WER (%) on {grid.dev_set!r} of each grid point (best in bold):',
      '',
      *markdown.table(header, rows),
      '',
      f'Chosen: weight {grid.best.weight:g}, length bonus '
      f'{grid.best.length_bonus:g}.',
  ]
  return '\n'.join(lines)


def format_set_table(
    result: interpolation.SetResult, is_dev_set: bool = False
) -> str:
  """A heading and table of the set's first-pass, rescored and oracle WERs."""
  tuned = ' (tuning set)' if is_dev_set else ''
  lines = [
      f'### {result.name}{tuned}: {result.num_utterances} utterances, '
      f'{result.num_hypotheses} hypotheses, '
      f'{result.first_pass.reference_words} reference words',
      '',
  ]
  rows = [('first pass (rank 1)', result.first_pass)]
  if result.rescored is not None:
    weights = f'weight {result.weight:g}, length bonus {result.length_bonus:g}'
    rows.append((f'rescored ({weights})', result.rescored))
  rows.append(('oracle', result.oracle))
  lines += markdown.table(
      ['hypotheses', 'WER (%)', 'sub', 'del', 'ins'],
      [
          [label, f'{100 * c.wer:.2f}' if c.reference_words else 'n/a']
          + [c.substitutions, c.deletions, c.insertions]
          for label, c in rows
      ],
  )
  if result.num_rank1_not_best_first_pass:
    lines += [
        '',
        f'Note: in {result.num_rank1_not_best_first_pass} lists '
        'the rank-1 hypothesis does not have the highest first-pass '
        'score; are the scores costs (lower is better)?',
    ]
  return '\n'.join(lines)


def grid_as_dict(grid: interpolation.GridSearchResult) -> dict:
  """The grid search as JSON-serialisable values."""
  return {
      'dev_set': grid.dev_set,
      'points': [_point_as_dict(point) for point in grid.points],
      'best': _point_as_dict(grid.best),
  }


def _point_as_dict(point: interpolation.GridPoint) -> dict:
  return {
      'weight': point.weight,
      'length_bonus': point.length_bonus,
      **point.errors.as_dict(),
  }


def write_kaldi_text(path: str, texts: List[Tuple[str, str]]) -> None:
  """Writes `<utt-id> <text>` lines (Kaldi `text`) to `path`."""
  tf.io.gfile.makedirs(path.rsplit('/', 1)[0])
  lines = (
      f'{utterance_id} {text}'.rstrip() + '\n' for utterance_id, text in texts
  )
  json_files.write_text(path, ''.join(lines))
