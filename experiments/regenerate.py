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
"""

import dataclasses
import difflib
import json
import os
import subprocess
import sys
import time
from typing import Callable, List, Optional

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app
from absl import flags
import gin
import tensorflow as tf

from official_repro.common import cli
from official_repro.common import json_files
from experiments import attention_concentration
from experiments import convbert_lm
from experiments import convbert_speed
from experiments import paper_tables
from experiments import provenance
from experiments.regeneration import learning
from experiments.regeneration import plan
from experiments.regeneration import registry
from experiments.regeneration import report
from experiments.regeneration import runner
from experiments.regeneration import scales
from official_repro.data import glue as glue_data
from official_repro.tasks import finetuning_schedule
from official_repro.training import gin_utils

FLAGS = flags.FLAGS

_LOCAL_PATH_FLAGS = (
    'corpus',
    'vocab_file',
    'glue_dir',
    'lm_file',
    'out',
    'runs_dir',
    'report_dir',
)


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


def _tasks() -> dict:
  """The tasks to fine-tune, as {task: epochs}.

  --tasks (or the scale's default) as {task: epochs}, checked before any
  job starts.

  Raises:
    UsageError: an item that is not `<GLUE task>:<epochs > 0>`.
  """
  tasks = {}
  for item in FLAGS.tasks or scales.get(FLAGS.scale).default_tasks:
    task, _, epochs = item.partition(':')
    if task not in glue_data.GLUE_TASK_NAMES:
      close = difflib.get_close_matches(task, glue_data.GLUE_TASK_NAMES, n=1)
      raise app.UsageError(
          f'--tasks item {item!r}: {task!r} is not a GLUE task'
          + (f' (did you mean {close[0]!r}?)' if close else '')
          + f'; known: {", ".join(glue_data.GLUE_TASK_NAMES)}.'
      )
    try:
      epochs = float(epochs)
    except ValueError:
      epochs = 0.0
    if not epochs > 0:
      raise app.UsageError(
          f'--tasks item {item!r}: expected task:epochs '
          'with epochs a number > 0 (e.g. sst2:0.25).'
      )
    tasks[task] = epochs
  return tasks


def _check_inputs(tasks: dict) -> None:
  """Stops before any job when an input directory is missing.

  Raises:
    UsageError: naming the flag and the path.
  """
  for name in ('corpus', 'glue_dir', 'vocab_file'):
    path = getattr(FLAGS, name)
    if path and not tf.io.gfile.exists(path):
      raise app.UsageError(f'--{name} {path}: no such file or directory.')
  if FLAGS.glue_dir:
    for task in tasks:
      folder = os.path.join(
          FLAGS.glue_dir, glue_data.get_task_spec(task).directory
      )
      if not tf.io.gfile.isdir(folder):
        raise app.UsageError(
            f'--tasks {task}: --glue_dir has no '
            f'{folder}; give a GLUE root holding it or '
            'drop the task.'
        )


def _runs_dir() -> str:
  return FLAGS.runs_dir or os.path.join(FLAGS.out, 'runs')


def list_targets() -> str:
  """The registry as a markdown table."""
  lines = ['| key | kind | what |', '|---|---|---|']
  for target in registry.TARGETS.values():
    lines.append(f'| {target.key} | {target.kind} | {target.description} |')
  return '\n'.join(lines)


def _require(*names: str) -> None:
  missing = [f'--{name}' for name in names if not getattr(FLAGS, name)]
  if missing:
    raise app.UsageError(
        f'{FLAGS.table} at --scale={FLAGS.scale} needs '
        f'{", ".join(missing)}.'
    )


def _paper(target: registry.Target) -> None:
  """Writes (and with --launch runs) the plan; --collect fills the table."""
  _require('bucket', 'glue_dir', 'out')
  if not target.runs:
    print(
        f'{target.key} has no pretraining runs to plan: '
        f'{target.why_plan_only}.'
    )
    return
  planned = plan.plan(
      target,
      FLAGS.bucket,
      FLAGS.glue_dir,
      squad_dir=FLAGS.squad_dir,
      tpu_name=FLAGS.tpu_name,
      zone=FLAGS.zone,
  )
  tf.io.gfile.makedirs(FLAGS.out)
  text = plan.format_plan(target, planned)
  if target.why_plan_only:
    text += f'\nNot run below paper scale: {target.why_plan_only}.\n'
  with tf.io.gfile.GFile(
      os.path.join(FLAGS.out, f'{target.key}.plan.md'), 'w'
  ) as f:
    f.write(text)
  json_files.write_json(
      os.path.join(FLAGS.out, f'{target.key}.plan.json'),
      plan.as_json(planned),
      sort_keys=False,
  )
  print(text)
  if FLAGS.launch:
    launch(target, planned)
  if FLAGS.collect:
    results = {}
    for run in planned:
      path = f'{run.glue_dir}/glue_results.json'
      if not tf.io.gfile.exists(path):
        print(f'{run.name}: no {path} yet.')
        continue
      with tf.io.gfile.GFile(path) as f:
        glue = json.load(f)
      results[run.name] = dict(
          train_steps=run.train_steps,
          glue={
              task: dict(score=score) for task, score in glue['scores'].items()
          },
      )
    header = f'Scale: paper (collected from {FLAGS.bucket}).'
    print(report.write(target, report.rows(target, results), header, FLAGS.out))


def launch(
    target: registry.Target,
    planned: List[plan.PlannedRun],
    clock: Callable[[], float] = time.monotonic,
) -> None:
  """Runs the plan's commands in order (--launch).

  Each planned run, its pretraining then its fine-tuning, is one job; after
  each a line gives the jobs done and the time left
  (`runner.jobs_progress`).

  Args:
    target: the table or figure planned.
    planned: its runs (`plan.plan`).
    clock: seconds, for the time left.

  Raises:
    subprocess.CalledProcessError: a command failed.
  """
  jobs = runner.jobs_progress(target, len(planned), clock)
  for index, run in enumerate(planned, start=1):
    print(f'[{index}/{len(planned)}] {run.name}', flush=True)
    for command in [
        run.pretrain_command,
        *(run.finetune_command or '').splitlines(),
    ]:
      subprocess.run(command, shell=True, check=True, cwd=gin_utils.REPO_ROOT)
    jobs.advance()


def _speed_comparison(target: registry.Target) -> None:
  """004 Sec. 3.3: SCRIPT-small vs ELECTRA-small steps/s.

  004 Sec. 3.3: SCRIPT-small vs ELECTRA-small steps/s, same batch, on
  records of the built-in corpus with --vocab_file's vocabulary (the step
  time depends on the vocabulary's size, not on the text).
  """
  _require('vocab_file')
  results = {}
  for run in target.runs:
    path = os.path.join(FLAGS.out, f'{run.name}.json')
    subprocess.run(
        [
            sys.executable,
            '-m',
            'experiments.benchmark_pretraining',
            *(f'--gin_file={gin_file}' for gin_file in run.gin_files),
            '--gin_param=pretrain_data.train_batch_size=16',
            '--steps=10',
            '--variants=ours',
            f'--output_json={path}',
            f'--vocab_file={FLAGS.vocab_file}',
        ],
        check=True,
        cwd=gin_utils.REPO_ROOT,
    )
    with tf.io.gfile.GFile(path) as f:
      results[run.row] = json.load(f)['results'][0]['steps_per_second']
  stated = paper_tables.load('004').stated
  paper = {
      'ELECTRA-small': stated['ELECTRA-small iterations/s'].value,
      'SCRIPT-small': stated['SCRIPT-small iterations/s'].value,
  }
  ours_ratio = results['SCRIPT-small'] / results['ELECTRA-small']
  paper_ratio = paper['SCRIPT-small'] / paper['ELECTRA-small']
  body = (
      '| model | ours (steps/s, batch 16, this machine) | '
      '004 (it/s, TPU v3-8) |\n|---|---|---|\n'
      + ''.join(
          f'| {row} | {results[row]:.3f} | {paper[row]:g} |\n'
          for row in results
      )
      + f'\nSCRIPT / ELECTRA: ours {ours_ratio:.3f}, 004 {paper_ratio:.3f} '
      f'({stated["SCRIPT-small iterations/s"].where}).'
  )
  write_command_table(
      target,
      FLAGS.out,
      body,
      dict(
          steps_per_second=results,
          paper_iterations_per_second=paper,
          ratio=dict(ours=ours_ratio, paper=paper_ratio),
      ),
      header=f'Vocabulary: {FLAGS.vocab_file}; batch 16, 10 timed steps.',
  )


def grid_settings(
    target: registry.Target, tasks: dict, num_runs: int
) -> runner.GridSettings:
  """The settings of `target`'s grid at --scale.

  The settings of `target`'s grid at --scale from the flags, each unset
  one from the scale (`scales.SCALES`).
  """
  scale = scales.get(FLAGS.scale)
  if not FLAGS.vocab_file and not scale.learned_vocab_size:
    raise app.UsageError(
        f'{FLAGS.table} at --scale={FLAGS.scale} needs ' '--vocab_file.'
    )
  return runner.GridSettings(
      target=target.key,
      scale=scale.name,
      corpus=FLAGS.corpus,
      vocab_file=FLAGS.vocab_file,
      glue_dir=FLAGS.glue_dir,
      reference_steps=FLAGS.reference_steps or scale.reference_steps,
      tasks=tasks,
      num_runs=num_runs,
      strategy=FLAGS.strategy or scale.strategy,
      finetune_fingerprint=runner.finetune_fingerprint(scale.name),
      learned_vocab_size=(
          None if FLAGS.vocab_file else scale.learned_vocab_size
      ),
      eval_fraction=scale.eval_fraction,
      pretrain_seeds=FLAGS.pretrain_seeds or scale.pretrain_seeds,
      held_out_steps=scale.held_out_steps,
  )


def _attention_concentration(target: registry.Target) -> None:
  """002 Table 1: the attention maps' diagonal concentration.

  002 Table 1: pretrains BERT and ConvBERT alike at the scale, then
  measures their attention maps' diagonal concentration on MRPC.
  """
  _require('corpus', 'glue_dir')
  settings = dataclasses.replace(
      grid_settings(target, {}, 0), finetune_fingerprint=''
  )
  encoders = runner.pretrain_only(target, settings, FLAGS.out, _runs_dir())
  results_file = os.path.join(FLAGS.out, 'attention_concentration.json')
  command = [
      sys.executable,
      '-m',
      'experiments.attention_concentration',
      f'--glue_dir={FLAGS.glue_dir}',
      '--task=mrpc',
      '--split=dev',
      f'--output_file={results_file}',
  ]
  max_seq_length = runner.scale_max_seq_length(FLAGS.scale)
  if max_seq_length < 128:
    # The encoders' position tables end there.
    command.append(f'--max_seq_length={max_seq_length}')
  for run in target.runs:
    command += [f'--init_checkpoint={encoders[run.name]}', f'--label={run.row}']
  subprocess.run(command, check=True, cwd=gin_utils.REPO_ROOT)
  results = _read_json(results_file)
  runs = '; '.join(f'{run.row}: {encoders[run.name]}' for run in target.runs)
  write_command_table(
      target,
      FLAGS.out,
      attention_concentration.format_table(results),
      results,
      header=(
          f'Scale: {FLAGS.scale}, {settings.reference_steps} '
          f'pretraining steps each, both with their paper gin '
          f'files (ELECTRA objective). Encoders: {runs}.'
      ),
  )


def _read_json(path: str):
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)


def write_command_table(
    target: registry.Target,
    out: str,
    body: str,
    results,
    header: Optional[str] = None,
) -> str:
  """Writes a 'command' target's markdown and JSON results.

  Writes a 'command' target's <out>/<key>.md and <key>.json, as the
  grids write theirs: a heading, a header line (the scale and runs, where
  the target pretrains), and the experiment's own table and results;
  returns the markdown.
  """
  lines = f'{header}\n\n' if header else ''
  text = f'## {target.key}: {target.description}\n\n{lines}{body}\n'
  with tf.io.gfile.GFile(os.path.join(out, f'{target.key}.md'), 'w') as f:
    f.write(text)
  json_files.write_json(
      os.path.join(out, f'{target.key}.json'),
      dict(
          target=target.key,
          header=header,
          command=target.command,
          results=results,
      ),
      sort_keys=False,
  )
  print(text)
  return text


def _command(target: registry.Target) -> None:
  """Runs the experiment that computes a 'command' target."""
  _require('out')
  tf.io.gfile.makedirs(FLAGS.out)
  if target.key == '002.1':
    _attention_concentration(target)
    return
  if target.key == '004.sec3.3':
    _speed_comparison(target)
    return
  if target.key == '002.2':
    subprocess.run(
        [
            sys.executable,
            '-m',
            'experiments.convbert_speed',
            '--seq_lengths=128,512',
            f'--output_dir={FLAGS.out}',
        ],
        check=True,
        cwd=gin_utils.REPO_ROOT,
    )
    results = _read_json(os.path.join(FLAGS.out, 'convbert_speed.json'))
    body = (
        convbert_speed.format_table(results['rows'])
        + '\n\n'
        + convbert_speed.format_matches(results['paper_matches'])
    )
  else:
    _require('lm_file')
    subprocess.run(
        [
            sys.executable,
            '-m',
            'experiments.convbert_lm',
            f'--train_file={FLAGS.lm_file}',
            '--valid_fraction=0.1',
            f'--output_dir={FLAGS.out}',
        ],
        check=True,
        cwd=gin_utils.REPO_ROOT,
    )
    results = _read_json(os.path.join(FLAGS.out, 'results.json'))
    body = convbert_lm.format_table(results)
  write_command_table(target, FLAGS.out, body, results)


def _aggregation(paper_dir: str) -> str:
  """The aggregation of the paper's fine-tuning protocol ('max', ...)."""
  plan.parse_gin([f'gin/finetune/{paper_dir}/protocol.gin'])
  aggregation = finetuning_schedule.RunProtocol().aggregation
  gin.clear_config()
  return aggregation


def _grid(target: registry.Target) -> None:
  """Runs a pretraining grid below paper scale and writes its table."""
  _require('corpus', 'glue_dir', 'out')
  settings = grid_settings(target, _tasks(), FLAGS.num_runs)
  results = runner.run_grid(target, settings, FLAGS.out, _runs_dir())
  if target.parameters_column:
    for run in target.runs_at(FLAGS.scale):
      if run.name in results:
        results[run.name]['parameters'] = plan.flops_report(
            run.gin_files + runner.scale_gin_files(run, FLAGS.scale),
            run.bindings_at(FLAGS.scale),
        )[1]
  includes = sorted(
      {
          path
          for run in target.runs_at(FLAGS.scale)
          for path in runner.scale_gin_files(run, FLAGS.scale)
      }
  )
  vocabulary = settings.vocab_file or (
      f'{settings.learned_vocab_size} pieces learned from the training books'
  )
  header = (
      f'Scale: {FLAGS.scale} ({", ".join(includes)}); '
      f'reference steps {settings.reference_steps}'
      + (
          f' ({target.reference}, others at its training FLOPs)'
          if target.reference
          else ''
      )
      + f'; tasks {settings.tasks}; {settings.num_runs} seeds per task, '
      f'{_aggregation(target.finetune_paper)} over them (gin/finetune/'
      f'{target.finetune_paper}/protocol.gin)'
      + (
          f'; {settings.pretrain_seeds} pretraining seeds per model, '
          'rows their mean and std'
          if settings.pretrain_seeds > 1
          else ''
      )
      + f'; vocabulary {vocabulary}; {settings.strategy}.'
      + (
          f' Runs: {target.small_scale_note}.'
          if target.small_scale_note
          else ''
      )
      + '\n\n'
      + provenance.provenance('experiments.regenerate')
  )
  entries = report.rows(target, results)
  print(report.write(target, entries, header, FLAGS.out))
  if FLAGS.report_dir:
    tf.io.gfile.makedirs(FLAGS.report_dir)
    report.write(
        target,
        entries,
        header,
        FLAGS.report_dir,
        name=f'regenerate_{FLAGS.scale}_{target.key}',
    )


def _learning(target: registry.Target) -> None:
  """Pretrains one model per objective and writes the learning evidence.

  Pretrains one model per objective at the scale and writes the
  evidence that each learns (`learning.run_learning`).
  """
  if FLAGS.scale == 'paper':
    raise app.UsageError(f'{target.key} runs below paper scale only.')
  _require('corpus', 'glue_dir', 'out')
  content = learning.run_learning(
      target,
      grid_settings(target, _tasks(), FLAGS.num_runs),
      FLAGS.out,
      _runs_dir(),
      provenance=provenance.provenance('experiments.regenerate'),
  )
  if FLAGS.report_dir:
    learning.write(content, FLAGS.report_dir)


def main(argv):
  """Lists, plans, runs or collects the table named by --table."""
  cli.refuse_positional(argv)
  if FLAGS.list:
    print(list_targets())
    return
  if not FLAGS.table:
    raise app.UsageError('Give --table=<key> or --list.')
  try:
    target = registry.get(FLAGS.table)
  except KeyError as error:
    raise app.UsageError(str(error)) from error
  # The jobs run from the repository root: local paths are made absolute
  # here, so relative ones mean the caller's directory.
  for name in _LOCAL_PATH_FLAGS:
    value = getattr(FLAGS, name)
    if value and '://' not in value and not value.startswith('$'):
      setattr(FLAGS, name, os.path.abspath(value))
  if FLAGS.scale != 'paper' and target.kind in ('pretrain_glue', 'learning'):
    _check_inputs(_tasks())
  if target.kind == 'learning':
    _learning(target)
  elif FLAGS.scale == 'paper':
    _paper(target)
  elif target.kind == 'pretrain_glue':
    _grid(target)
  elif target.kind == 'command':
    _command(target)
  else:
    raise app.UsageError(
        f'{target.key} runs only at --scale=paper: {target.why_plan_only}.'
    )


if __name__ == '__main__':
  define_flags()
  cli.run(main)
