r"""Regenerates one paper table or figure: ours beside the paper's.

  python -m experiments.regenerate --list
  python -m experiments.regenerate --table=001.IV --scale=tiny \
    --corpus=/data/corpus/gutenberg --vocab_file=/data/vocab.txt \
    --glue_dir=/data/glue --runs_dir=/tmp/regenerate/runs \
    --out=/tmp/regenerate/001.IV
  python -m experiments.regenerate --table=001.IV --scale=paper \
    --bucket=gs://my-bucket/runs --glue_dir=gs://my-bucket/glue \
    --out=/tmp/plan [--launch | --collect]

Scales:
  tiny   every compared model of the table, shrunk alike by
         gin/regenerate/tiny.gin, pretrained on --corpus and fine-tuned on
         the --tasks of --glue_dir (task:epochs; default SST-2 for a
         quarter epoch) with gin/regenerate/tiny_finetune.gin over each
         task's paper cells (batch 32, learning rate 1e-3, length 64: the
         papers' SST-2 cells left every tiny model at the majority class)
         and --num_runs seeds aggregated by the paper's protocol; equal
         training FLOPs where the paper compares at equal compute.
  gpu    the same grid at the small models' size with gin/regenerate/gpu.gin
         (batch 128, 5000 reference steps), meant for about 30 minutes per
         table on one GPU (not yet measured on one).
  paper  the run plan: run_tpu.sh pretraining and glue_suite fine-tuning
         commands per model with their FLOPs and expected TPU v3-8 hours
         (--launch runs them in order, printing after each run the runs
         done and the time left; --collect reads finished results from the
         model directories into the same table).

Output: <out>/<key>.md and <key>.json (ours, the paper's value, the
difference, steps, scale, seeds and aggregation), <key>.png for figures,
and the plan as <key>.plan.md / .plan.json. After each job (one pretraining
seed of a run, with its fine-tuning) a line gives the jobs done, of those to
do, and the time left. A killed grid resumes where it stopped (finished runs
are read back) and refuses to mix results of other settings. Pretraining
runs are kept in --runs_dir by a digest of what decides their numbers, so
tables given the same --runs_dir pretrain a model they share once (004
Tables 1 and 2 and Fig. 2; 003 Table 1 and Fig. 3);
at paper scale the model directories under --bucket are named the same way
(see experiments/regeneration/runner.py and plan.py).

This module reads the flags; the registry entry of the table names the
runner that regenerates it (experiments/regeneration/target_runners.py and
command_runners.py).
"""

import dataclasses
import os

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app
from absl import flags

from official_repro.common import cli
from experiments.regeneration import registry
from experiments.regeneration import scales
from experiments.regeneration import target_runners

FLAGS = flags.FLAGS


def define_flags():
  """Defines the command-line flags."""
  flags.DEFINE_boolean('list', False, 'List the tables and figures.')
  flags.DEFINE_string('table', None, 'Table or figure key, e.g. 001.IV.')
  flags.DEFINE_enum('scale', 'tiny', [*scales.SCALES, 'paper'], 'Scale.')
  flags.DEFINE_string('corpus', None, 'Pretraining corpus directory.')
  flags.DEFINE_string(
      'vocab_file',
      None,
      'WordPiece vocabulary (at --scale=cpu, default: one '
      'learned from the training books).',
  )
  flags.DEFINE_string('glue_dir', None, 'GLUE root (SST-2/, MRPC/, ...).')
  flags.DEFINE_string(
      'lm_file', None, 'Word-level text for 002.3 (WikiText tokens).'
  )
  flags.DEFINE_string('out', None, 'Output directory of the table.')
  flags.DEFINE_string(
      'report_dir',
      None,
      'Below paper scale, also write the finished table '
      'there as regenerate_<scale>_<key>.md/.json/.png (the '
      'learning target as learning_<scale>.*), e.g. '
      'experiments/reports.',
  )
  flags.DEFINE_string(
      'runs_dir',
      None,
      'Tiny/gpu scale: the run store, where pretraining runs '
      'and their fine-tuning are kept by what decides their '
      'numbers; tables given the same one share their equal '
      'runs (default: <out>/runs).',
  )
  flags.DEFINE_integer(
      'reference_steps',
      None,
      "Steps of the reference run (default: the scale's, "
      + ', '.join(
          f'{scale.reference_steps} {scale.name}'
          for scale in scales.SCALES.values()
      )
      + ').',
  )
  flags.DEFINE_list(
      'tasks',
      None,
      'GLUE tasks fine-tuned below paper scale, as '
      "task:epochs (default: the scale's, "
      + '; '.join(
          f'{scale.name} {",".join(scale.default_tasks)}'
          for scale in scales.SCALES.values()
      )
      + ').',
  )
  flags.DEFINE_integer('num_runs', 3, 'Fine-tuning seeds per task.')
  flags.DEFINE_integer(
      'pretrain_seeds',
      None,
      'Pretraining seeds per compared model (default: the '
      "scale's, "
      + ', '.join(
          f'{scale.pretrain_seeds} {scale.name}'
          for scale in scales.SCALES.values()
      )
      + ').',
  )
  flags.DEFINE_string(
      'strategy',
      None,
      "Strategy of every job (default: the scale's, "
      + ', '.join(
          f'{scale.strategy} {scale.name}' for scale in scales.SCALES.values()
      )
      + ').',
  )
  flags.DEFINE_string('bucket', None, 'Paper scale: model directory root.')
  flags.DEFINE_string(
      'squad_dir',
      '$SQUAD_DIR',
      'Paper scale: folder holding squad11/ and squad20/.',
  )
  flags.DEFINE_string('tpu_name', '$TPU_NAME', 'Paper scale: TPU VM name.')
  flags.DEFINE_string('zone', '$ZONE', 'Paper scale: TPU zone.')
  flags.DEFINE_boolean('launch', False, 'Paper scale: run the plan.')
  flags.DEFINE_boolean(
      'collect', False, 'Paper scale: read finished results into the table.'
  )


def list_targets() -> str:
  """The registry as a markdown table."""
  lines = ['| key | kind | what |', '|---|---|---|']
  for target in registry.TARGETS.values():
    lines.append(f'| {target.key} | {target.kind} | {target.description} |')
  return '\n'.join(lines)


def regenerate(request: target_runners.Request) -> None:
  """Regenerates the table `request.table` by the runner its entry names.

  Raises:
    UsageError: no such table, or the runner refused the request.
  """
  try:
    target = registry.get(request.table)
  except KeyError as error:
    raise app.UsageError(str(error)) from error
  target_runners.run(target, request.absolute_paths())


def main(argv):
  """Lists, plans, runs or collects the table named by --table."""
  cli.refuse_positional(argv)
  if FLAGS.list:
    print(list_targets())
    return
  if not FLAGS.table:
    raise app.UsageError('Give --table=<key> or --list.')
  regenerate(
      target_runners.Request(
          **{
              field.name: getattr(FLAGS, field.name)
              for field in dataclasses.fields(target_runners.Request)
          }
      )
  )


if __name__ == '__main__':
  define_flags()
  cli.run(main)
