"""Ours beside the paper's: a grid's results as markdown, JSON and PNG.

Scores are compared on the paper's scale (fraction or x100), per task where
the table has task columns; against a GLUE average only, ours is the mean
over the tasks run, marked as not the paper's quantity.
"""

import os
import statistics
from typing import Dict, List, Optional, Tuple

import tensorflow as tf

from experiments import paper_tables
from experiments.regeneration import registry
from official_repro.common import json_files
from official_repro.common import markdown as md
from official_repro.metrics import aggregation

# Held-out metrics a table prints; claims are checked on the higher-is-better.
HIGHER_IS_BETTER = ('masked_lm_accuracy', 'discriminator_auc', 'mws_accuracy')
_HELD_OUT_METRICS = (*HIGHER_IS_BETTER, 'lm_example_loss')
_GLUE_MEAN = 'GLUE mean over the tasks run'


def score_scale(unit: Optional[str]) -> float:
  """1 for a score printed as a fraction, 100 for x100 or % (ValueError)."""
  if unit and 'fraction' in unit:
    return 1.0
  if unit and ('x100' in unit or '%' in unit):
    return 100.0
  raise ValueError(f'Unit {unit!r} says neither "fraction" nor "x100"/"%".')


def _paper(table, row: str, column: Optional[str]) -> Optional[float]:
  """The table's number at (row, column), or None where it has none."""
  if table is None or not column:
    return None
  try:
    cell = table.cell(row, column)
  except (KeyError, ValueError):
    return None
  return cell.value if cell.is_number else None


def _cell(column, task, ours, paper, seeds=None, std=None) -> Dict:
  """One compared number of a row: ours beside the paper's."""
  return dict(
      column=column,
      task=task,
      ours=ours,
      paper=paper,
      difference=None if paper is None else ours - paper,
      seeds=seeds,
      std=std,
  )


def rows(target: registry.Target, results: Dict[str, Dict]) -> List[Dict]:
  """One entry per finished run, with ours beside the paper's.

  Returns:
    Entries {run, row, train_steps, cells, average, parameters, curve,
    held_out, held_out_curve, held_out_seeds, seed_averages}: `cells` per
    GLUE task ({column, task, ours, paper, difference, seeds, std});
    `average` and `parameters` ours beside the paper's, or None; scores on
    the paper's scale.
  """
  table = None
  if target.table:
    table = paper_tables.load(target.paper).table(target.table)
  scale = 1.0
  if table is not None and target.average_column:
    scale = score_scale(table.units.get(target.average_column))
  entries = []
  for run in target.runs:
    if run.name not in results:
      continue
    result = results[run.name]
    cells = _glue_cells(target, table, run, result['glue'], scale)
    average = _average(target, table, run, cells, sorted(result['glue']))
    cells += [
        _cell(column, column, ours, _paper(table, run.row, column))
        for column, ours in result.get('squad', {}).items()
    ]
    parameters = None
    if target.parameters_column and 'parameters' in result:
      parameters = dict(
          column=target.parameters_column,
          ours=result['parameters'],
          paper=_paper(table, run.row, target.parameters_column),
      )
    row = run.row
    if result.get('released'):
      row = f'{run.row} (released: {result["released"]})'
    held_out = result.get('held_out')
    entries.append(
        dict(
            run=run.name,
            row=row,
            train_steps=result['train_steps'],
            cells=cells,
            average=average,
            parameters=parameters,
            curve=_curve(result),
            # The held-out metrics of the last evaluation.
            held_out=held_out[max(held_out, key=int)] if held_out else None,
            held_out_curve=held_out,
            held_out_seeds=_held_out_seeds(result),
            seed_averages=_seed_averages(result, scale),
        )
    )
  return entries


def _glue_cells(target, table, run, glue: Dict, scale: float) -> List[Dict]:
  """The cells of a run's GLUE scores, on the paper's scale."""
  cells = []
  for task, outcome in glue.items():
    column = target.columns.get(task)
    summary = outcome.get('summary', {})
    cells.append(
        _cell(
            column or task,
            task,
            outcome['score'] * scale,
            _paper(table, run.row, column),
            summary.get('n'),
            None if 'std' not in summary else summary['std'] * scale,
        )
    )
  return cells


def _average(target, table, run, cells, tasks) -> Optional[Dict]:
  """Ours over the tasks run beside the paper's average (see `rows`)."""
  if _paper(table, run.row, target.average_column) is None:
    return None
  same_tasks = [cell['paper'] for cell in cells]
  if all(value is not None for value in same_tasks):
    paper = sum(same_tasks) / len(same_tasks)
    quantity = f'paper mean over {", ".join(tasks)}'
  else:
    paper = table.cell(run.row, target.average_column).value
    quantity = f'paper {target.average_column} (all its tasks)'
  return dict(
      column=target.average_column,
      ours=sum(cell['ours'] for cell in cells) / len(cells),
      paper=paper,
      paper_quantity=quantity,
      tasks=tasks,
  )


def _seed_averages(result: Dict, scale: float) -> Optional[List[float]]:
  """Each pretraining seed's mean score over the tasks run, or None."""
  if 'seeds' not in result:
    return None
  return [
      scale * sum(o['score'] for o in seed['glue'].values()) / len(seed['glue'])
      for seed in result['seeds']
  ]


def _held_out_seeds(result: Dict) -> Optional[Dict[str, List[float]]]:
  """{metric all seeds have: each seed's value at the mean's last step}."""
  seeds = result.get('seeds')
  if not seeds or not result.get('held_out'):
    return None
  last = str(max(int(step) for step in result['held_out']))
  finals = [seed.get('held_out', {}).get(last, {}) for seed in seeds]
  return {
      name: [final[name] for final in finals]
      for name in result['held_out'][last]
      if all(name in final for final in finals)
  } or None


def _measures(
    entry: Dict, held_out_metrics: Tuple[str, ...]
) -> Dict[str, List[float]]:
  """{measure: per-seed values} of a row that a claim can be checked on."""
  measures = {}
  if entry.get('seed_averages'):
    measures[_GLUE_MEAN] = entry['seed_averages']
  held = entry.get('held_out_seeds') or {}
  for name in held_out_metrics:
    if name in held:
      measures[f'held-out {name}'] = held[name]
  return measures


def claims(target: registry.Target, entries: List[Dict]) -> List[Dict]:
  """The paper's orders, checked against ours over pretraining seeds.

  Each pair (the table's ranking, then `target.claims`) on every measure
  both rows have over seeds: per-seed mean gap against twice its standard
  error.

  Returns:
    One {better, worse, source, measure, paper_gap, ours_gap, noise,
    verdict} per pair and measure; `verdict` 'ahead', 'behind' or 'within
    noise'.

  Raises:
    ValueError: a held-out claim metric that is not better when higher.
  """
  unranked = set(target.held_out_claims) - set(HIGHER_IS_BETTER)
  if unranked:
    raise ValueError(
        f'{target.key}: held_out_claims {sorted(unranked)} are not better '
        f'when higher; claims can be checked on {", ".join(HIGHER_IS_BETTER)}.'
    )
  by_run = {entry['run']: entry for entry in entries}
  out = []
  for better_run, worse_run, source in _pairs(target, entries, by_run):
    better, worse = by_run[better_run], by_run[worse_run]
    paper_gap = None
    if _paper_average(better) is not None and _paper_average(worse) is not None:
      paper_gap = better['average']['paper'] - worse['average']['paper']
    worse_measures = _measures(worse, target.held_out_claims)
    for measure, a in _measures(better, target.held_out_claims).items():
      b = worse_measures.get(measure)
      if not b or len(a) < 2 or len(b) < 2:
        continue
      comparison = aggregation.compare(a, b)
      out.append(
          dict(
              better=better['row'],
              worse=worse['row'],
              source=source,
              measure=measure,
              paper_gap=paper_gap if measure == _GLUE_MEAN else None,
              ours_gap=comparison.gap,
              noise=comparison.noise,
              verdict=comparison.verdict,
          )
      )
  return out


def _paper_average(entry: Dict) -> Optional[float]:
  """The paper's average beside a row's, or None."""
  return entry['average']['paper'] if entry['average'] else None


def _pairs(
    target: registry.Target, entries: List[Dict], by_run: Dict[str, Dict]
) -> List[Tuple[str, str, str]]:
  """(better run, worse run, source): the table's order, then the claims."""
  ranked = sorted(
      (entry for entry in entries if _paper_average(entry) is not None),
      key=_paper_average,
      reverse=True,
  )
  source = f'{target.paper} Table {target.table}: averages'
  pairs = [
      (better['run'], worse['run'], source)
      for i, better in enumerate(ranked)
      for worse in ranked[i + 1 :]
  ]
  return pairs + [
      claim
      for claim in target.claims
      if claim[0] in by_run and claim[1] in by_run
  ]


def _curve(result: Dict) -> Dict[int, float]:
  """{pretraining step: mean GLUE score over the tasks run}."""
  return {
      int(step): sum(o['score'] for o in glue.values()) / len(glue)
      for step, glue in result.get('curve', {}).items()
  }


def number(value: Optional[float], digits: int = 3) -> str:
  """`value` to `digits` decimals, or '-' for a missing value."""
  return '-' if value is None else f'{value:.{digits}f}'


def metric_table(
    rows: Dict[str, Dict[str, float]],
    names: List[str],
    seeds: Optional[Dict[str, Dict[str, List[float]]]] = None,
) -> List[str]:
  """Markdown lines of {row: {metric: value}}, per-seed std beside a cell."""
  seeds = seeds or {}

  def cell(row: str, name: str) -> str:
    text = number(rows[row].get(name))
    values = seeds.get(row, {}).get(name)
    if values and len(values) > 1:
      text += f' ({number(statistics.stdev(values))})'
    return text

  return md.table(
      ['row', *names],
      [[row] + [cell(row, name) for name in names] for row in rows],
  )


def held_out_curve_table(entries: List[Dict], name: str) -> List[str]:
  """Markdown lines: held-out `name` at each step (and share of steps)."""
  points = [
      [entry['row'], f'{step:,}', f'{step / entry["train_steps"]:.3f}']
      + [number(value)]
      for entry in entries
      if entry.get('held_out_curve')
      for step, value in sorted(
          (int(step), metrics[name])
          for step, metrics in entry['held_out_curve'].items()
          if name in metrics
      )
  ]
  if not points:
    return []
  return [
      '',
      f'Held-out {name} during pretraining (mean over pretraining seeds; '
      "share: of the run's steps, so of its training FLOPs):",
      '',
      *md.table(['row', 'step', 'share', 'value'], points),
  ]


def order(entries: List[Dict]) -> Dict[str, List[str]]:
  """{'ours': rows, 'paper': rows}: those with both averages, best first."""
  both = [entry for entry in entries if _paper_average(entry) is not None]
  return {
      key: [
          entry['row']
          for entry in sorted(
              both, key=lambda entry: entry['average'][key], reverse=True
          )
      ]
      for key in ('ours', 'paper')
  }


def markdown(target: registry.Target, entries: List[Dict], header: str) -> str:
  """The comparison table, the setup and whether the order matches."""
  lines = [f'## {target.key}: {target.description}', '', header, '']
  columns = 'row | steps | column | ours | seeds (std) | paper | ours - paper'
  lines += md.table(columns.split(' | '), _comparison_rows(entries))
  if target.figure:
    lines += _figure_points(target, entries)
  lines += _held_out_lines(target, entries)
  ranking = order(entries)
  if len(ranking['paper']) > 1:
    lines += [
        '',
        f'Paper order (best first): {" > ".join(ranking["paper"])}',
        f'Our order: {" > ".join(ranking["ours"])}',
        'Same order as the paper: '
        f'{"yes" if ranking["ours"] == ranking["paper"] else "no"}.',
    ]
  lines += _claim_lines(claims(target, entries))
  return '\n'.join(lines) + '\n'


def _comparison_rows(entries: List[Dict]) -> List[List[str]]:
  """The main table's rows: each cell, parameter count and average."""
  rows = []
  for entry in entries:
    row = [entry['row'], f'{entry["train_steps"]:,}']
    for cell in entry['cells']:
      spread = '-'
      if cell['seeds'] is not None:
        spread = f'{cell["seeds"]} ({number(cell["std"])})'
      rows.append(
          row
          + [cell['column'], number(cell['ours']), spread]
          + [number(cell['paper']), number(cell['difference'])]
      )
    if entry.get('parameters'):
      counts = entry['parameters']
      paper = '-' if counts['paper'] is None else f'{counts["paper"] / 1e6:g}M'
      rows.append(
          row
          + [f'{counts["column"]} (at this scale)']
          + [f'{counts["ours"] / 1e6:.3f}M', '-', paper, '-']
      )
    if entry['average']:
      average = entry['average']
      ours, paper = average['ours'], average['paper']
      column = (
          f'{average["column"]}: ours over {", ".join(average["tasks"])}; '
          f'{average["paper_quantity"]}'
      )
      numbers = (ours, None, paper, ours - paper)
      rows.append(row + [column] + [number(value) for value in numbers])
  return rows


def _figure_points(target: registry.Target, entries: List[Dict]) -> List[str]:
  """Markdown lines: the figure's points of ours."""
  series, references = figure_lines(target, entries)
  x_label = 'pretraining step' if target.figure == 'steps' else target.figure
  points = [
      [name, f'{x:g}', number(y)]
      for name, points in series.items()
      for x, y in points
  ]
  points += [
      [f'{name} (reference)', '-', number(y)] for name, y in references.items()
  ]
  return [
      '',
      f'Figure points (x: {x_label}; y: GLUE dev, mean over the tasks run):',
      '',
      *md.table(['series', 'x', 'ours'], points),
  ]


def _held_out_lines(target: registry.Target, entries: List[Dict]) -> List[str]:
  """Markdown lines: the held-out metrics at the last step, and curves."""
  held = [entry for entry in entries if entry.get('held_out')]
  if not held:
    return []
  names = {name for entry in held for name in entry['held_out']}
  names = sorted(names & set(_HELD_OUT_METRICS))
  lines = [
      '',
      'Pretraining metrics on the held-out books at the last '
      'step (mean over pretraining seeds, their std in brackets):',
      '',
  ]
  lines += metric_table(
      {entry['row']: entry['held_out'] for entry in held},
      names,
      {entry['row']: entry.get('held_out_seeds') or {} for entry in held},
  )
  for name in target.held_out_claims:
    lines += held_out_curve_table(held, name)
  return lines


def _claim_lines(checked: List[Dict]) -> List[str]:
  """Markdown lines: the paper's claims checked (`claims`), if any."""
  if not checked:
    return []
  columns = (
      'paper says | where | measure | paper gap | our gap | noise | '
      'ours: the first'
  )
  rows = [
      [f'{claim["better"]} > {claim["worse"]}', claim['source']]
      + [claim['measure']]
      + [number(claim[key]) for key in ('paper_gap', 'ours_gap', 'noise')]
      + [claim['verdict']]
      for claim in checked
  ]
  return [
      '',
      "The paper's claims, ours over pretraining seeds (gap of the "
      "seeds' means of the measure: the GLUE mean is each seed's "
      'mean score over the tasks run; noise: twice its standard error):',
      '',
      *md.table(columns.split(' | '), rows),
  ]


def write(
    target: registry.Target,
    entries: List[Dict],
    header: str,
    out: str,
    name: Optional[str] = None,
) -> str:
  """Writes <out>/<name>.md and .json (and .png for figures); the markdown."""
  name = name or target.key
  text = markdown(target, entries, header)
  json_files.write_text(os.path.join(out, f'{name}.md'), text)
  content = dict(target=target.key, header=header, rows=entries)
  content['claims'] = claims(target, entries)
  json_files.write_json(
      os.path.join(out, f'{name}.json'), content, sort_keys=False, default=float
  )
  if target.figure:
    plot(target, entries, os.path.join(out, f'{name}.png'))
  return text


def figure_lines(
    target: registry.Target, entries: List[Dict]
) -> Tuple[Dict[str, List[Tuple[float, float]]], Dict[str, float]]:
  """What a figure draws of ours: ({series: [(x, score), ...]}, {ref: score}).

  Learning curves ('steps') are a series per run; otherwise a row
  "<series>@<x>" is a point at x and a row without "@" a reference.
  """
  series: Dict[str, List[Tuple[float, float]]] = {}
  references: Dict[str, float] = {}
  for entry in entries:
    curve = entry['curve']
    if target.figure == 'steps':
      series[entry['row']] = [
          (float(step), curve[step]) for step in sorted(curve)
      ]
      continue
    name, at, x = entry['row'].partition('@')
    if not at:
      references[name] = curve[max(curve)]
      continue
    series.setdefault(name, []).append((float(x), curve[max(curve)]))
  return {name: sorted(points) for name, points in series.items()}, references


def plot(target: registry.Target, entries: List[Dict], path: str) -> None:
  """Draws `figure_lines` (references as horizontal lines) and the paper's."""
  pyplot = pyplot_module()
  figure, axes = pyplot.subplots(figsize=(6, 4))
  series, references = figure_lines(target, entries)
  for name, points in series.items():
    axes.plot(*zip(*points), marker='o', label=f'{name} (ours)')
  for name, score in references.items():
    axes.axhline(
        score, color='gray', linestyle=':', label=f'{name} (ours, reference)'
    )
  axes.set_xlabel(
      'pretraining steps' if target.figure == 'steps' else target.figure
  )
  paper = paper_tables.load(target.paper)
  figure_id = target.key.split('.fig')[-1]
  for name, points in paper.figures[figure_id].series.items():
    axes.plot(
        [p[0] for p in points],
        [p[1] for p in points],
        'x--',
        label=f'{name} (paper)',
    )
  axes.set_ylabel('GLUE dev, mean over the tasks run')
  axes.set_title(f'{target.key}: {target.description}', fontsize=8)
  axes.legend(fontsize=7)
  save_png(pyplot, figure, path, dpi=120)


def pyplot_module():
  """The pyplot of matplotlib, drawing off screen (imported when needed)."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use('Agg')
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top

  return pyplot


def save_png(pyplot, figure, path: str, dpi: int) -> None:
  """Writes `figure` to `path` (any `tf.io.gfile` path) and closes it."""
  figure.tight_layout()
  with tf.io.gfile.GFile(path, 'wb') as f:
    figure.savefig(f, format='png', dpi=dpi)
  pyplot.close(figure)
