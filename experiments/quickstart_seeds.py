r"""The quickstart over several seeds: does its masked LM use context?

  python -m experiments.quickstart_seeds --seeds=1,2,3 \
    --work_dir=/tmp/quickstart_seeds \
    --report_file=experiments/reports/quickstart_cpu.md

One `official_repro.quickstart` per seed, in its own work directory (a rerun
re-evaluates finished seeds); reports held-out masked-LM accuracy in order,
shuffled and context-free, and whether in order is ahead beyond noise.
"""

import os

from absl import flags

from experiments import commands
from experiments import provenance
from official_repro.common import cli
from official_repro.common import json_files
from official_repro.common import markdown
from official_repro.metrics import aggregation

FLAGS = flags.FLAGS

# (name in the report, summary section, metric) of each column.
_COLUMNS = (
    ('in order', 'in_order', 'accuracy'),
    ('shuffled', 'shuffled', 'accuracy'),
    ('no context', 'in_order', 'context_free'),
    ('[MASK] in order', 'in_order', 'mask_token_accuracy'),
    ('[MASK] no context', 'in_order', 'mask_token_context_free'),
)


def define_flags():
  """The command's flags (defined when run, not when imported)."""
  flags.DEFINE_list('seeds', ['1', '2', '3'], 'experiment.seed of each run.')
  flags.DEFINE_string('work_dir', None, 'A quickstart work_dir per seed here.')
  flags.DEFINE_string('report_file', None, 'The Markdown report (and .json).')
  cli.require_flags('work_dir', 'report_file')


def run_seed(seed: int) -> dict:
  """The quickstart's word-order summary of one seed (run if not done)."""
  work_dir = os.path.join(FLAGS.work_dir, f'seed_{seed}')
  commands.run_module(
      'official_repro.quickstart',
      [f'--work_dir={work_dir}', f'--gin_param=experiment.seed={seed}'],
      log_path=os.path.join(FLAGS.work_dir, f'seed_{seed}.log'),
  )
  path = os.path.join(work_dir, 'model', 'quickstart_summary.json')
  return json_files.read_json(path)['word_order']


def report(seeds, results) -> str:
  """The Markdown report: a row per seed, then the two comparisons."""
  values = {
      name: [result[section][metric] for result in results]
      for name, section, metric in _COLUMNS
  }
  rows = [
      [seed] + [f'{values[name][i]:.3f}' for name, _, _ in _COLUMNS]
      for i, seed in enumerate(seeds)
  ]
  lines = [
      '# The quickstart over seeds',
      '',
      provenance.provenance('experiments.quickstart_seeds'),
      '',
      'Held-out masked-LM accuracy of `python -m official_repro.quickstart` '
      '(one run per `experiment.seed`): in order, with the words of each '
      'segment shuffled (the same masks), and the best a model that ignores '
      'context scores on the same slots; then on the slots shown as [MASK].',
      '',
      *markdown.table(['seed'] + [name for name, _, _ in _COLUMNS], rows),
      '',
  ]
  for control in ('shuffled', 'no context'):
    if len(seeds) > 1:
      comparison = aggregation.compare(values['in order'], values[control])
      lines.append(
          f'- in order against {control}: {comparison.gap:+.3f} '
          f'(noise {comparison.noise:.3f}): {comparison.verdict}.'
      )
  return '\n'.join(lines) + '\n'


def main(_):
  """Runs each seed and writes the report."""
  json_files.check_writable(FLAGS.report_file, '--report_file')
  seeds = [int(seed) for seed in FLAGS.seeds]
  results = [run_seed(seed) for seed in seeds]
  text = report(seeds, results)
  json_files.write_text(FLAGS.report_file, text)
  json_files.write_json(
      os.path.splitext(FLAGS.report_file)[0] + '.json',
      dict(seeds=seeds, word_order=results),
  )
  print(text)


if __name__ == '__main__':
  define_flags()
  cli.run(main)
