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
from typing import Dict, List, Optional

import tensorflow as tf

from experiments import paper_tables
from experiments.regeneration import registry


def _percent_scale(table: paper_tables.Table, column: str) -> float:
  """100 when the paper prints this column's scores x100, else 1."""
  values = [table.cell(row, column).value for row in table.row_keys
            if _has(table, row, column)]
  return 100.0 if values and max(values) > 1.5 else 1.0


def _has(table: paper_tables.Table, row: str, column: str) -> bool:
  try:
    return table.cell(row, column).is_number
  except (KeyError, ValueError):
    return False


def rows(target: registry.Target, results: Dict[str, Dict]) -> List[Dict]:
  """One entry per run: {row, cells: [{column, ours, paper, difference}]}."""
  table = (paper_tables.load(target.paper).table(target.table)
           if target.table else None)
  entries = []
  for run in target.runs:
    if run.name not in results:
      continue
    glue = results[run.name]['glue']
    cells = []
    for task, outcome in glue.items():
      column = target.columns.get(task)
      paper = None
      scale = 1.0
      if table is not None and column and _has(table, run.row, column):
        scale = _percent_scale(table, column)
        paper = table.cell(run.row, column).value
      ours = outcome['score'] * scale
      cells.append(dict(column=column or task, task=task, ours=ours,
                        paper=paper,
                        difference=None if paper is None else ours - paper))
    mean = sum(outcome['score'] for outcome in glue.values()) / len(glue)
    average = None
    if table is not None and target.average_column and _has(
        table, run.row, target.average_column):
      scale = _percent_scale(table, target.average_column)
      average = dict(column=target.average_column, ours=mean * scale,
                     paper=table.cell(run.row, target.average_column).value,
                     tasks=sorted(glue))
    entries.append(dict(run=run.name, row=run.row,
                        train_steps=results[run.name]['train_steps'],
                        cells=cells, average=average,
                        curve=_curve(results[run.name])))
  return entries


def _curve(result: Dict) -> Dict[int, float]:
  """{pretraining step: mean GLUE score over the tasks run}."""
  return {int(step): sum(o['score'] for o in glue.values()) / len(glue)
          for step, glue in result.get('curve', {}).items()}


def _number(value: Optional[float]) -> str:
  return '-' if value is None else f'{value:.3f}'


def order(entries: List[Dict], key: str) -> List[str]:
  """Row names from best to worst by `key` ('ours' or 'paper') of the
  average (or of the only cell)."""
  scored = []
  for entry in entries:
    source = entry['average'] or (entry['cells'][0] if len(
        entry['cells']) == 1 else None)
    if source and source.get(key) is not None:
      scored.append((source[key], entry['row']))
  return [row for _, row in sorted(scored, reverse=True)]


def markdown(target: registry.Target, entries: List[Dict], header: str
             ) -> str:
  """The comparison table, the setup and whether the order matches."""
  lines = [f'## {target.key}: {target.description}', '', header, '',
           '| row | steps | column | ours | paper | ours - paper |',
           '|---|---|---|---|---|---|']
  for entry in entries:
    cells = list(entry['cells'])
    if entry['average']:
      average = entry['average']
      cells.append(dict(column=f'{average["column"]} (ours: mean of '
                                f'{", ".join(average["tasks"])})',
                        ours=average['ours'], paper=average['paper'],
                        difference=average['ours'] - average['paper']))
    for cell in cells:
      lines.append(f'| {entry["row"]} | {entry["train_steps"]:,} | '
                   f'{cell["column"]} | {_number(cell["ours"])} | '
                   f'{_number(cell["paper"])} | '
                   f'{_number(cell["difference"])} |')
  ours, paper = order(entries, 'ours'), order(entries, 'paper')
  if paper:
    lines += ['', f'Paper order (best first): {" > ".join(paper)}',
              f'Our order: {" > ".join(ours)}',
              'Same order as the paper: '
              f'{"yes" if ours == paper else "no"}.']
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


def plot(target: registry.Target, entries: List[Dict], path: str) -> None:
  """The figure: GLUE against steps (one line per run) or against the
  runs' x value (one line per series), with the paper's stated points."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top
  figure, axes = pyplot.subplots(figsize=(6, 4))
  if target.figure == 'steps':
    for entry in entries:
      steps = sorted(entry['curve'])
      axes.plot(steps, [entry['curve'][s] for s in steps], marker='o',
                label=f'{entry["row"]} (ours)')
    axes.set_xlabel('pretraining steps')
  else:
    series: Dict[str, List] = {}
    for entry in entries:
      name, _, x = entry['row'].partition('@')
      final = entry['curve'][max(entry['curve'])]
      series.setdefault(name, []).append((float(x), final))
    for name, points in series.items():
      points.sort()
      axes.plot([p[0] for p in points], [p[1] for p in points], marker='o',
                label=f'{name} (ours)')
    axes.set_xlabel(target.figure)
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
