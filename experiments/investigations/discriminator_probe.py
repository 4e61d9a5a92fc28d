r"""What a run's replaced-token detector detects, as a report.

  python -m experiments.investigations.discriminator_probe \
    --model_dir=<pretraining run> \
    --name=electra --output_dir=experiments/reports [--records=...] \
    [--checkpoint=<model_dir>/ckpt-<step>] [--steps=20] [--description=...]

Probes an ELECTRA, ALE, TEAMS or SCRIPT run (`discriminator_probe_lib`) and
writes `<output_dir>/discriminator_probe_<name>.md` and `.json`.
"""

import math
import os
from typing import Any, Dict, List, Optional

from absl import flags
import tensorflow as tf

from experiments import provenance
from official_repro.common import cli
from official_repro.common import json_files
from official_repro.common import markdown
from experiments.investigations import discriminator_probe_lib

FLAGS = flags.FLAGS

_SOURCE_LABELS = {
    'generator': "the run's generator (its temperature)",
    'unigram': 'training-split unigram frequencies (ignores context)',
    'uniform': 'any non-special token, equally likely',
}


# The sources table's columns: metric -> header.
_SOURCE_COLUMNS = {
    'auc': 'AUC',
    'recall': 'recall',
    'accuracy': 'accuracy',
    'replaced_share': 'replaced share of tokens',
    'unchanged_share_of_masked': 'masked slots unchanged',
    'identity_auc': 'identity-only AUC',
    'auc_on_identity_half': 'detector AUC, same half',
}


def define_flags() -> None:
  """The command's flags."""
  flags.DEFINE_string('model_dir', None, 'An ELECTRA-family or SCRIPT run.')
  flags.DEFINE_string('name', None, 'Names the report files.')
  flags.DEFINE_string('output_dir', None, 'Where the report goes.')
  flags.DEFINE_string(
      'records',
      None,
      "Records (default: the run's own); same vocabulary and length.",
  )
  flags.DEFINE_string('checkpoint', None, 'ckpt-<step> (default: latest).')
  flags.DEFINE_integer('steps', 20, 'Held-out batches (-1: the whole split).')
  flags.DEFINE_integer('seed', 0, 'Seeds the replacement draws.')
  flags.DEFINE_string(
      'description', None, 'What the run is, for the report (optional).'
  )
  cli.require_flags('model_dir', 'name', 'output_dir')


def cell(value: float) -> str:
  """A table cell: three decimals, '-' for NaN."""
  return '-' if math.isnan(value) else f'{value:.3f}'


def report_lines(result: Dict[str, Any]) -> List[str]:
  """The markdown body: one table of sources, one of plausibility bands."""
  sources = [
      [
          _SOURCE_LABELS[source],
          *(cell(result['sources'][source][key]) for key in _SOURCE_COLUMNS),
      ]
      for source in discriminator_probe_lib.SOURCES
  ]
  bands = result['plausibility']
  return [
      f'Checkpoint `{result["checkpoint"]}` (step {result["step"]:,}), '
      f'{result["batches"]} held-out batches of `{result["records"]}` with '
      "the masks the run's input pipeline gives them, evaluated in "
      'float32; draws seeded '
      f'{result["seed"]}.',
      '',
      '## By source of the replacements',
      '',
      'Identity-only AUC: each token scored by its replaced rate on the even '
      "sequences, on the odd ones, beside the detector's AUC there.",
      '',
      *markdown.table(['replacements', *_SOURCE_COLUMNS.values()], sources),
      '',
      "## The generator's replacements by its probability of them",
      '',
      'The probability is the softmax at temperature 1 of the generator; '
      'AUC is against every original token.',
      '',
      *markdown.table(
          ['probability', 'replaced tokens', 'recall', 'AUC'],
          [
              [
                  f'[{b["low"]:g}, {b["high"]:g}'
                  + (']' if b is bands[-1] else ')'),
                  f'{b["replaced"]:,}',
                  *(cell(b[k]) for k in ('recall', 'auc')),
              ]
              for b in bands
          ],
      ),
  ]


def write_report(
    result: Dict[str, Any],
    name: str,
    output_dir: str,
    description: Optional[str] = None,
) -> str:
  """Writes `discriminator_probe_<name>.md` and `.json`; returns the md."""
  tf.io.gfile.makedirs(output_dir)
  stem = os.path.join(output_dir, f'discriminator_probe_{name}')
  lines = [
      f'# What the replaced-token detector detects: {name}',
      '',
      *([description, ''] if description else []),
      provenance.provenance('experiments.investigations.discriminator_probe'),
      '',
      *report_lines(result),
      '',
  ]
  json_files.write_json(stem + '.json', result)
  json_files.write_text(stem + '.md', '\n'.join(lines))
  return stem + '.md'


def main(_) -> None:
  """Runs the command with the parsed flags (the absl entry point)."""
  if FLAGS.steps == 0 or FLAGS.steps < -1:
    raise cli.UserError(f'--steps={FLAGS.steps}: give a positive count or -1.')
  stem = os.path.join(FLAGS.output_dir, f'discriminator_probe_{FLAGS.name}')
  for suffix in ('.md', '.json'):
    json_files.check_writable(stem + suffix, '--output_dir')
  result = discriminator_probe_lib.probe(
      FLAGS.model_dir, FLAGS.records, FLAGS.steps, FLAGS.checkpoint, FLAGS.seed
  )
  print('\n'.join(report_lines(result)))
  path = write_report(result, FLAGS.name, FLAGS.output_dir, FLAGS.description)
  print(f'report: {path}')


if __name__ == '__main__':
  define_flags()
  cli.run(main)
