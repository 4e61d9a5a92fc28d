"""Ours beside the paper's: a grid's results as markdown, JSON and PNG.

GLUE scores come from `experiments.glue_suite` as fractions, aggregated
over seeds as the paper's fine-tuning protocol says (max for 001, median
for 002 and 003, mean for 004). A paper that prints scores x100 (002, 003,
004) is compared on its own scale. Where the table has a column per task
the difference is per task; where it only has a GLUE average, ours is the
mean over the tasks run and is marked as such, since an average over fewer
tasks is not the paper's quantity.
"""

import json
import os
from typing import Dict, List, Optional, Tuple

import tensorflow as tf

from experiments import paper_tables
from experiments.regeneration import registry


def score_scale(unit: Optional[str]) -> float:
  """1 for a score printed as a fraction, 100 for one printed x100 or in %.

  Raises:
    ValueError: for a unit that says neither.
  """
  if unit and 'fraction' in unit:
    return 1.0
  if unit and ('x100' in unit or '%' in unit):
    return 100.0
  raise ValueError(f'Unit {unit!r} says neither "fraction" nor "x100"/"%".')


def _has(table: paper_tables.Table, row: str, column: str) -> bool:
  """Whether the table has a number at (row, column)."""
  try:
    return table.cell(row, column).is_number
  except (KeyError, ValueError):
    return False


def rows(target: registry.Target, results: Dict[str, Dict]) -> List[Dict]:
  """One entry per finished run, with ours beside the paper's.

  Args:
    target: the table or figure.
    results: {run name: result} as `runner.run_grid` returns them.

  Returns:
    Entries {run, row, train_steps, cells, average, parameters, curve}:
    `parameters` ours beside the paper's count where the target has a
    parameters column and the result carries one (else None); `cells` one per
    GLUE task run ({column, task, ours, paper, difference, seeds, std});
    `average` ours over the tasks run beside the paper's mean over the same
    tasks where the table has a column per task, else beside the paper's
    printed average (`paper_quantity` says which), or None; scores on the
    paper's scale (x100 for 002-004).
  """
  table = (paper_tables.load(target.paper).table(target.table)
           if target.table else None)
  scale = 1.0
  if table is not None and target.average_column:
    scale = score_scale(table.units.get(target.average_column))
  entries = []
  for run in target.runs:
    if run.name not in results:
      continue
    glue = results[run.name]['glue']
    cells = []
    for task, outcome in glue.items():
      column = target.columns.get(task)
      paper = None
      if table is not None and column and _has(table, run.row, column):
        paper = table.cell(run.row, column).value
      summary = outcome.get('summary', {})
      ours = outcome['score'] * scale
      cells.append(dict(
          column=column or task, task=task, ours=ours, paper=paper,
          difference=None if paper is None else ours - paper,
          seeds=summary.get('n'),
          std=None if 'std' not in summary else summary['std'] * scale))
    parameters = None
    if target.parameters_column and 'parameters' in results[run.name]:
      paper = (table.cell(run.row, target.parameters_column).value
               if _has(table, run.row, target.parameters_column) else None)
      parameters = dict(column=target.parameters_column,
                        ours=results[run.name]['parameters'], paper=paper)
    average = None
    if table is not None and target.average_column and _has(
        table, run.row, target.average_column):
      ours = sum(cell['ours'] for cell in cells) / len(cells)
      same_tasks = [cell['paper'] for cell in cells]
      if all(value is not None for value in same_tasks):
        paper = sum(same_tasks) / len(same_tasks)
        quantity = f'paper mean over {", ".join(sorted(glue))}'
      else:
        paper = table.cell(run.row, target.average_column).value
        quantity = f'paper {target.average_column} (all its tasks)'
      average = dict(column=target.average_column, ours=ours, paper=paper,
                     paper_quantity=quantity, tasks=sorted(glue))
    entries.append(dict(run=run.name, row=run.row,
                        train_steps=results[run.name]['train_steps'],
                        cells=cells, average=average, parameters=parameters,
                        curve=_curve(results[run.name])))
  return entries


def _curve(result: Dict) -> Dict[int, float]:
  """{pretraining step: mean GLUE score over the tasks run}."""
  return {int(step): sum(o['score'] for o in glue.values()) / len(glue)
          for step, glue in result.get('curve', {}).items()}


def _number(value: Optional[float]) -> str:
  """Three decimals, or '-' for a missing value."""
  return '-' if value is None else f'{value:.3f}'


def order(entries: List[Dict]) -> Dict[str, List[str]]:
  """Rows with both an ours and a paper average, best first by each.

  Returns:
    {'ours': row names, 'paper': row names}, over the same rows.
  """
  both = [entry for entry in entries
          if entry['average'] and entry['average']['paper'] is not None]
  return {key: [entry['row'] for entry in sorted(
      both, key=lambda entry: entry['average'][key], reverse=True)]
          for key in ('ours', 'paper')}


def markdown(target: registry.Target, entries: List[Dict], header: str
             ) -> str:
  """The comparison table, the setup and whether the order matches."""
  lines = [f'## {target.key}: {target.description}', '', header, '',
           '| row | steps | column | ours | seeds (std) | paper | '
           'ours - paper |', '|---|---|---|---|---|---|---|']
  for entry in entries:
    for cell in entry['cells']:
      spread = ('-' if cell['seeds'] is None else
                f'{cell["seeds"]} ({_number(cell["std"])})')
      lines.append(f'| {entry["row"]} | {entry["train_steps"]:,} | '
                   f'{cell["column"]} | {_number(cell["ours"])} | {spread} | '
                   f'{_number(cell["paper"])} | '
                   f'{_number(cell["difference"])} |')
    if entry.get('parameters'):
      counts = entry['parameters']
      paper = ('-' if counts['paper'] is None
               else f'{counts["paper"] / 1e6:g}M')
      lines.append(f'| {entry["row"]} | {entry["train_steps"]:,} | '
                   f'{counts["column"]} (at this scale) | '
                   f'{counts["ours"] / 1e6:.3f}M | - | {paper} | - |')
    if entry['average']:
      average = entry['average']
      lines.append(
          f'| {entry["row"]} | {entry["train_steps"]:,} | '
          f'{average["column"]}: ours over {", ".join(average["tasks"])}; '
          f'{average["paper_quantity"]} | {_number(average["ours"])} | - | '
          f'{_number(average["paper"])} | '
          f'{_number(average["ours"] - average["paper"])} |')
  if target.figure:
    series, references = figure_lines(target, entries)
    x_label = ('pretraining step' if target.figure == 'steps'
               else target.figure)
    lines += ['', f'Figure points (x: {x_label}; y: GLUE dev, mean over the '
              'tasks run):', '', '| series | x | ours |', '|---|---|---|']
    lines += [f'| {name} | {x:g} | {_number(y)} |'
              for name, points in series.items() for x, y in points]
    lines += [f'| {name} (reference) | - | {_number(y)} |'
              for name, y in references.items()]
  ranking = order(entries)
  if len(ranking['paper']) > 1:
    lines += ['', f'Paper order (best first): {" > ".join(ranking["paper"])}',
              f'Our order: {" > ".join(ranking["ours"])}',
              'Same order as the paper: '
              f'{"yes" if ranking["ours"] == ranking["paper"] else "no"}.']
  return '\n'.join(lines) + '\n'


def write(target: registry.Target, entries: List[Dict], header: str,
          out: str) -> str:
  """Writes <out>/<key>.md and .json (and .png for figures); returns the
  markdown."""
  text = markdown(target, entries, header)
  with tf.io.gfile.GFile(os.path.join(out, f'{target.key}.md'), 'w') as f:
    f.write(text)
  with tf.io.gfile.GFile(os.path.join(out, f'{target.key}.json'), 'w') as f:
    json.dump(dict(target=target.key, header=header, rows=entries), f,
              indent=1, default=float)
  if target.figure:
    plot(target, entries, os.path.join(out, f'{target.key}.png'))
  return text


def figure_lines(target: registry.Target, entries: List[Dict]
                 ) -> Tuple[Dict[str, List[Tuple[float, float]]],
                            Dict[str, float]]:
  """What a figure draws of ours.

  Args:
    target: a figure (`target.figure` set).
    entries: `rows(target, ...)`.

  Returns:
    `(series, references)`: {series name: [(x, GLUE score), ...] sorted by
    x} and {reference row: its GLUE score}. For learning curves ('steps')
    each run is a series over its checkpoints; otherwise a run's row
    "<series>@<x>" is its series' point at x (its final checkpoint), and a
    row without "@" is a reference.
  """
  series: Dict[str, List[Tuple[float, float]]] = {}
  references: Dict[str, float] = {}
  for entry in entries:
    curve = entry['curve']
    if target.figure == 'steps':
      series[entry['row']] = [(float(step), curve[step])
                              for step in sorted(curve)]
      continue
    name, at, x = entry['row'].partition('@')
    if not at:
      references[name] = curve[max(curve)]
      continue
    series.setdefault(name, []).append((float(x), curve[max(curve)]))
  return {name: sorted(points) for name, points in series.items()}, references


def plot(target: registry.Target, entries: List[Dict], path: str) -> None:
  """The figure: `figure_lines` (references as horizontal lines), with the
  paper's stated points."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
  figure, axes = pyplot.subplots(figsize=(6, 4))
  series, references = figure_lines(target, entries)
  for name, points in series.items():
    axes.plot([p[0] for p in points], [p[1] for p in points], marker='o',
              label=f'{name} (ours)')
  for name, score in references.items():
    axes.axhline(score, color='gray', linestyle=':',
                 label=f'{name} (ours, reference)')
  axes.set_xlabel('pretraining steps' if target.figure == 'steps'
                  else target.figure)
  paper = paper_tables.load(target.paper)
  figure_id = target.key.split('.fig')[-1]
  for name, points in paper.figures[figure_id].series.items():
    axes.plot([p[0] for p in points], [p[1] for p in points], 'x--',
              label=f'{name} (paper)')
  axes.set_ylabel('GLUE dev, mean over the tasks run')
  axes.set_title(f'{target.key}: {target.description}', fontsize=8)
  axes.legend(fontsize=7)
  figure.tight_layout()
  with tf.io.gfile.GFile(path, 'wb') as f:
    figure.savefig(f, format='png', dpi=120)
  pyplot.close(figure)
