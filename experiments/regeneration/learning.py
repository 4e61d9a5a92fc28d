"""Evidence that every objective learns at a scale, not just runs.

The `learning` target pretrains one model per objective (masked LM, ELECTRA,
TEAMS, SCRIPT, each with its paper's gin files and the scale's includes) for
the scale's reference steps, evaluating the held-out books at every
checkpoint, and writes into `--out`:

  * `learning_<scale>.md` / `.json`: each run's held-out metrics at its last
    step beside the targets of issue 28 (`TARGETS`), its steps, FLOPs and
    training time; the masked LM's held-out accuracy with the words of each
    segment in order and shuffled, beside the best a model without context
    scores on the same slots (`official_repro.metrics.context_free`)
    (`experiments.word_order`); and fine-tuning from the pretrained masked
    LM against the same encoder from random initialisation, mean and
    standard deviation over fine-tuning seeds, and whether the gap exceeds
    twice its standard error (the objectives' GLUE comparisons, with
    several pretraining seeds, are the paper tables' job);
  * `learning_<scale>_<run>.png`: the run's held-out metrics against steps
    and against training FLOPs;
  * `learning_<scale>_overlay.png`: masked-LM accuracy and replaced-token
    AUC of every run against training FLOPs.

Runs live in the run store like a table's, with the scale's first
pretraining seed, so a table at the same scale and store reads them back.
"""

import dataclasses
import math
import os
import time
from typing import Dict, List, Optional, Sequence

import tensorflow as tf

from official_repro.training import word_order
from experiments.regeneration import held_out
from experiments.regeneration import plan
from experiments.regeneration import registry
from experiments.regeneration import report
from experiments.regeneration import runner
from official_repro.common import json_files
from official_repro.common import markdown as md
from official_repro.metrics import aggregation


@dataclasses.dataclass(frozen=True)
class Threshold:
  """A held-out metric a run must reach at its last step.

  Attributes:
    metric: the evaluation's metric name (`held_out.read_curve`).
    minimum: the value to reach.
    meaning: what the metric is, for the report.
  """

  metric: str
  minimum: float
  meaning: str


# Issue 28's targets per run of the `learning` target. TEAMS selects among
# the original and K = 5 sampled tokens (003 Sec. 4.1): chance is 1/6.
TARGETS: Dict[str, Sequence[Threshold]] = {
    'masked_lm': (Threshold('masked_lm_accuracy', 0.30, 'masked-LM accuracy'),),
    'electra': (
        Threshold('discriminator_auc', 0.85, 'discriminator AUC'),
        Threshold('masked_lm_accuracy', 0.25, 'generator masked-LM accuracy'),
    ),
    'teams': (
        Threshold(
            'mws_accuracy',
            3.0 / 6.0,
            'multi-word selection accuracy (3 x chance, 1/6)',
        ),
    ),
    'script': (Threshold('discriminator_auc', 0.85, 'critic AUC'),),
}
# The fine-tuning tasks that test whether pretraining helped.
CONTEXT_TASKS = ('sst2', 'mrpc', 'cola')
# The curves' metrics, in the order the figures draw them.
CURVE_METRICS = ('masked_lm_accuracy', 'discriminator_auc', 'mws_accuracy')
# The run whose encoder is fine-tuned against random initialisation, and
# whose word-order test is reported: the plain masked LM.
TRANSFER_RUN = 'masked_lm'
_WORD_ORDER_BATCHES = 50


def _training_minutes(model_dir: str) -> Optional[float]:
  """Minutes from the first to the last training summary of a run.

  Minutes from the first to the last training summary of a run (None
  without summaries); a run resumed after a pause counts the pause.
  """
  times = []
  for path in tf.io.gfile.glob(
      os.path.join(model_dir, 'train', 'events.out.tfevents.*')
  ):
    for record in tf.data.TFRecordDataset(path):
      event = tf.compat.v1.Event.FromString(record.numpy())
      if event.summary.value:
        times.append(event.wall_time)
  return (max(times) - min(times)) / 60.0 if len(times) > 1 else None


def _checked(run: registry.Run, final: Dict[str, float]) -> List[Dict]:
  """The run's thresholds with its values and whether each is met."""
  return [
      dict(
          metric=threshold.metric,
          meaning=threshold.meaning,
          minimum=threshold.minimum,
          value=final.get(threshold.metric),
          met=final.get(threshold.metric, -math.inf) >= threshold.minimum,
      )
      for threshold in TARGETS.get(run.name, ())
  ]


def _gap(pretrained: Dict, random_init: Dict) -> Dict:
  """The pretraining gain over random initialisation, with its error.

  Pretrained minus random-init mean score, twice its standard error over
  the fine-tuning seeds, and the verdict: 'ahead' or 'behind' by more than
  that, or 'within noise'.
  """
  return dataclasses.asdict(
      aggregation.compare_summaries(
          pretrained['summary'], random_init['summary']
      )
  )


def run_learning(
    target: registry.Target,
    settings: runner.GridSettings,
    out: str,
    runs_dir: str,
    provenance: str = '',
) -> Dict:
  """Pretrains (or reads back) the target's runs and writes the report.

  Args:
    target: a 'learning' target.
    settings: its settings (`tasks` restricted to `CONTEXT_TASKS` here).
    out: where the report goes.
    runs_dir: the run store.
    provenance: the command, date and machine, printed in the report.

  Returns:
    The report's JSON content.
  """
  runner.check_settings(out, settings)
  records = runner.records_dir(runs_dir, settings)
  vocab_size = runner.build_records(settings, records)
  steps = runner.run_steps(target, settings, vocab_size)
  seed = settings.seeds()[0]
  tasks = dataclasses.replace(
      settings,
      tasks={
          task: epochs
          for task, epochs in settings.tasks.items()
          if task in CONTEXT_TASKS
      },
  )
  runs, random_init, started = {}, {}, time.monotonic()
  for index, run in enumerate(target.runs, start=1):
    print(
        f'[{index}/{len(target.runs)}] {run.name} ({run.row}): '
        f'{steps[run.name]:,} pretraining steps',
        flush=True,
    )
    model_dir, _ = runner.pretrain_into_store(
        run, settings, runs_dir, records, steps[run.name], seed=seed
    )
    report, parameters = plan.flops_report(
        run.gin_files + runner.scale_gin_files(run, settings.scale),
        (f'experiment.train_steps = {steps[run.name]}',),
        vocab_size,
    )
    curve = held_out.read_curve(model_dir)
    final = curve[max(curve)] if curve else {}
    runs[run.name] = dict(
        row=run.row,
        model_dir=model_dir,
        train_steps=steps[run.name],
        flops_per_step=report.train_flops_per_step(),
        parameters=parameters,
        training_minutes=_training_minutes(model_dir),
        held_out={str(step): metrics for step, metrics in curve.items()},
        final=final,
        targets=_checked(run, final),
    )
    if run.name == TRANSFER_RUN:
      step_dir = os.path.join(model_dir, 'glue', target.finetune_paper)
      runs[run.name]['finetuned'] = runner.finetune(
          target,
          tasks,
          model_dir,
          os.path.join(step_dir, f'step_{steps[run.name]}'),
      )
      random_init = runner.finetune(
          target,
          tasks,
          model_dir,
          os.path.join(step_dir, 'random_init'),
          random_init=True,
      )
      runs[run.name]['against_random_init'] = {
          task: _gap(runs[run.name]['finetuned'][task], random_init[task])
          for task in random_init
      }
    print(
        f'  done, {(time.monotonic() - started) / 60:.0f} min so far',
        flush=True,
    )
  masked_lm = runs.get(TRANSFER_RUN)
  order = None
  if masked_lm:
    order = word_order.word_order(
        masked_lm['model_dir'], records, steps=_WORD_ORDER_BATCHES
    )
  content = dict(
      target=target.key,
      scale=settings.scale,
      provenance=provenance,
      settings=dataclasses.asdict(settings),
      runs=runs,
      random_init=random_init,
      word_order=order,
  )
  print(write(content, out))
  return content


def _number(value: Optional[float], digits: int = 3) -> str:
  return '-' if value is None else f'{value:.{digits}f}'


def markdown(content: Dict) -> str:
  """The report's markdown."""
  scale = content['scale']
  settings = content['settings']
  seed = 1 if settings['pretrain_seeds'] > 1 else 'drawn by each run'
  lines = [
      f'## Learning at scale {scale}',
      '',
      f'Scale {scale} (gin/regenerate/{scale}*.gin), every run '
      f'{settings["reference_steps"]:,} steps, pretraining seed {seed}; '
      f'held-out: {settings["held_out_steps"]} batches of the held-out '
      'books at every checkpoint; wall minutes from the first to the last '
      'training summary, pauses and other jobs on the cores included.',
      '',
      content.get('provenance', ''),
      '',
  ]
  rows = []
  for run in content['runs'].values():
    flops_total = run['flops_per_step'] * run['train_steps']
    row = [run['row'], f'{run["train_steps"]:,}', f'{flops_total:.2e}']
    row.append(_number(run['training_minutes'], 1))
    for check in run['targets'] or [None]:
      rows.append(
          row
          + (
              [check['meaning'], _number(check['value'])]
              + [f'>= {check["minimum"]:.3f}', 'yes' if check['met'] else 'no']
              if check
              else ['-'] * 4
          )
      )
  columns = (
      'run | steps | training FLOPs | wall minutes | metric | held-out | '
      'target | met'
  )
  lines += md.table(columns.split(' | '), rows)
  names = [
      name
      for name in CURVE_METRICS + ('lm_example_loss',)
      if any(name in run['final'] for run in content['runs'].values())
  ]
  lines += [
      '',
      "Every held-out metric at the last step (a generator's "
      'masked-LM accuracy for ELECTRA and TEAMS):',
      '',
  ]
  lines += report.metric_table(
      {run['row']: run['final'] for run in content['runs'].values()}, names
  )
  order = content.get('word_order')
  if order:
    texts = (
        ('in_order', 'in order'),
        ('shuffled', 'words of each segment shuffled'),
    )
    lines += [
        '',
        'Word order (masked LM, held-out books, '
        f'{order["steps"]} batches, the same masks):',
        '',
    ]
    columns, keys = 'text | masked-LM accuracy', ['masked_lm_accuracy']
    if 'context_free' in order['in_order']:  # older reports lack the ceiling
      columns += ' | best without context | on [MASK] slots | '
      columns += 'best without context'
      keys += ['context_free', 'mask_token_accuracy', 'mask_token_context_free']
    lines += md.table(
        columns.split(' | '),
        [
            [label] + [_number(order[name][key]) for key in keys]
            for name, label in texts
        ],
    )
    if order.get('note'):
      lines += ['', order['note']]
  random_init = content['random_init']
  if not random_init:
    return '\n'.join(lines) + '\n'
  tasks = list(random_init)
  lines += [
      '',
      'Fine-tuning, the pretrained masked LM against the same encoder '
      'from random initialisation (dev score, mean ± std over '
      f'{settings["num_runs"]} fine-tuning seeds; the gap is ahead or '
      'behind when it exceeds twice its standard error):',
      '',
  ]
  rows = [
      ['random initialisation']
      + [
          f'{random_init[task]["summary"]["mean"]:.3f} ± '
          f'{random_init[task]["summary"]["std"]:.3f}'
          for task in tasks
      ]
  ]
  for run in content['runs'].values():
    if 'finetuned' not in run:
      continue
    cells = []
    for task in tasks:
      summary = run['finetuned'][task]['summary']
      gap = run['against_random_init'][task]
      cells.append(
          f'{summary["mean"]:.3f} ± {summary["std"]:.3f} '
          f'({gap["gap"]:+.3f}, {gap["verdict"]})'
      )
    rows.append([run['row'], *cells])
  return '\n'.join(lines + md.table(['encoder', *tasks], rows)) + '\n'


def _plot_runs(content: Dict, out: str) -> List[str]:
  """The per-run and overlay figures; returns their paths."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use('Agg')
  from matplotlib import pyplot  # pylint: disable=g-import-not-at-top

  scale = content['scale']
  paths = []

  def save(figure, name):
    path = os.path.join(out, f'learning_{scale}_{name}.png')
    figure.tight_layout()
    with tf.io.gfile.GFile(path, 'wb') as f:
      figure.savefig(f, format='png', dpi=110)
    pyplot.close(figure)
    paths.append(path)

  for name, run in content['runs'].items():
    figure, (by_step, by_flops) = pyplot.subplots(1, 2, figsize=(9, 3.5))
    steps = sorted(int(step) for step in run['held_out'])
    for metric in CURVE_METRICS:
      values = [run['held_out'][str(step)].get(metric) for step in steps]
      if any(value is None for value in values):
        continue
      by_step.plot(steps, values, marker='o', label=metric)
      by_flops.plot(
          [step * run['flops_per_step'] for step in steps],
          values,
          marker='o',
          label=metric,
      )
    for check in run['targets']:
      for axes in (by_step, by_flops):
        axes.axhline(check['minimum'], color='gray', linestyle=':')
    by_step.set_xlabel('pretraining step')
    by_flops.set_xlabel('training FLOPs')
    by_step.set_ylabel('held-out books')
    by_step.legend(fontsize=7)
    figure.suptitle(
        f'{run["row"]} at scale {scale} (dotted: targets)', fontsize=9
    )
    save(figure, name)

  figure, axes = pyplot.subplots(1, 2, figsize=(9, 3.5))
  for panel, metric in zip(axes, ('masked_lm_accuracy', 'discriminator_auc')):
    # One colour per run in both panels.
    for index, run in enumerate(content['runs'].values()):
      steps = sorted(int(step) for step in run['held_out'])
      values = [run['held_out'][str(step)].get(metric) for step in steps]
      if steps and all(value is not None for value in values):
        panel.plot(
            [step * run['flops_per_step'] for step in steps],
            values,
            marker='o',
            color=f'C{index}',
            label=run['row'],
        )
    panel.set_xlabel('training FLOPs')
    panel.set_ylabel(f'held-out {metric}')
    panel.legend(fontsize=7)
  figure.suptitle(
      f'Every objective at equal training FLOPs, scale {scale}', fontsize=9
  )
  save(figure, 'overlay')
  return paths


def write(content: Dict, out: str) -> str:
  """Writes the markdown, JSON and figures into `out`; returns the markdown."""
  tf.io.gfile.makedirs(out)
  text = markdown(content)
  name = f'learning_{content["scale"]}'
  json_files.write_text(os.path.join(out, f'{name}.md'), text)
  json_files.write_json(os.path.join(out, f'{name}.json'), content)
  _plot_runs(content, out)
  return text
