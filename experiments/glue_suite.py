r"""Fine-tunes one checkpoint on the GLUE tasks and prints the paper's table.

Usage:
  python -m experiments.glue_suite --paper=001_ale \
    --init_checkpoint=/tmp/electra_small --glue_dir=/data/glue \
    --model_dir=/tmp/glue_electra_small --published_row=ELECTRA_small

Fine-tunes every GLUE task under --glue_dir (or --tasks) with
`gin/finetune/<paper>/<task>.gin` (the paper's `run_protocol`) and prints the
aggregated scores, GLUE average and seed spread beside --published_row. A
killed suite resumes. Writes <model_dir>/glue_results.json and glue_table.md.
`--paper=electra` is google-research/electra's recipe for released models:
  python -m experiments.glue_suite --paper=electra \
    --init_checkpoint=/data/electra-small-discriminator --glue_dir=/data/glue \
    --model_dir=/tmp/glue_released_small --published_row=ELECTRA-Small
"""

import dataclasses
import os
from typing import Dict

from absl import app
from absl import flags
import gin
import tensorflow as tf

from official_repro.common import cli
from experiments import paper_tables
from official_repro.common import json_files
from official_repro.common import markdown
from official_repro.data import glue as glue_data
from official_repro.metrics import glue_metrics
from official_repro.modeling.networks import pretrained
from official_repro.tasks import finetuning_registry
from official_repro.tasks import finetuning_schedule
from official_repro.training import distribute
from official_repro.training import finetuning
from official_repro.training import gin_utils
from official_repro.training import precision

FLAGS = flags.FLAGS

flags.DEFINE_string(
    'paper', '001_ale', 'Folder under gin/finetune/ with per-task gin files.'
)
flags.DEFINE_string('init_checkpoint', None, 'Pretrained encoder to evaluate.')
flags.DEFINE_boolean(
    'random_init',
    False,
    "Fine-tune --init_checkpoint's architecture from random "
    'initialisation instead of its weights (the baseline '
    'that pretraining must beat).',
)
flags.DEFINE_string(
    'vocab_file', None, 'Vocabulary, if the checkpoint carries none.'
)
flags.DEFINE_string('glue_dir', None, 'GLUE root (CoLA/, MRPC/, ...).')
flags.DEFINE_string('model_dir', None, 'One folder per task, plus the table.')
flags.DEFINE_list('tasks', None, 'Tasks to run (default: all present).')
flags.DEFINE_multi_string(
    'gin_file',
    [],
    'Gin files parsed after each task file (e.g. '
    'gin/finetune/003_teams/glue_base.gin).',
)
flags.DEFINE_multi_string('gin_param', [], 'Bindings applied to every task.')
flags.DEFINE_string(
    'published_row',
    None,
    'Row of the paper table to print beside ours, as '
    'experiments/paper_tables names it (001: BERT_small, '
    "ELECTRA_small, '2x time', ALE_small; electra: ELECTRA-Small, "
    'ELECTRA-Base, ELECTRA-Large).',
)
distribute.define_flags()
precision.define_flags()

# The paper table printed beside ours, per --paper: (paper, table id, {our
# GLUE task: the table's column}); its row keys are the --published_row
# values. The cells are read from `experiments.paper_tables`.
PUBLISHED_TABLES = {
    # 001 Table IV: GLUE dev, max of 10 runs, as fractions.
    '001_ale': (
        '001',
        'IV',
        dict(
            zip(
                'mrpc cola mnli sst2 qqp qnli rte stsb'.split(),
                'MRPC CoLA MNLI SST-2 QQP QNLI RTE STS-B'.split(),
            )
        ),
    ),
}


def published_rows(paper: str) -> Dict[str, Dict[str, float]]:
  """{row key: {our task: score}} of `paper`'s GLUE table ({} if none)."""
  if paper in paper_tables.RELEASES:
    return paper_tables.release_rows(paper)
  if paper not in PUBLISHED_TABLES:
    return {}
  paper_id, table_id, columns = PUBLISHED_TABLES[paper]
  table = paper_tables.load(paper_id).table(table_id)
  return {
      row: {
          task: table.cell(row, column).value
          for task, column in columns.items()
      }
      for row in table.row_keys
  }


def glue_tasks():
  """The fine-tuning tasks registered as GLUE's, in paper column order."""
  return finetuning_registry.task_names(group='glue')


def present_tasks(glue_dir: str):
  """GLUE tasks (in paper column order) whose folder exists in `glue_dir`."""
  return [
      task
      for task in glue_tasks()
      if tf.io.gfile.isdir(
          os.path.join(glue_dir, glue_data.get_task_spec(task).directory)
      )
  ]


def run_task(
    task: str, encoder: pretrained.PretrainedEncoder, strategy
) -> dict:
  """Fine-tunes `encoder` on one GLUE task under the gin protocol."""
  gin.clear_config()
  gin_utils.parse_config(
      [
          os.path.join(
              gin_utils.REPO_ROOT, 'gin/finetune', FLAGS.paper, f'{task}.gin'
          ),
          *FLAGS.gin_file,
      ],
      FLAGS.gin_param,
  )
  with gin.unlock_config():
    schedule = finetuning_schedule.FinetuningSchedule()
    protocol = finetuning_schedule.RunProtocol()
  model_dir = os.path.join(FLAGS.model_dir, task)
  results = finetuning.run(
      schedule,
      protocol,
      encoder,
      FLAGS.glue_dir,
      model_dir,
      strategy,
      mixed_precision=precision.resolve(FLAGS.mixed_precision, strategy),
  )
  gin_utils.save_config(model_dir, 'operative_config.gin', operative=True)
  return results


def _examples_per_second(results: dict) -> float:
  """Mean training throughput of the runs' last loops (nan if unknown)."""
  rates = [
      run.get('last_train_logs', {}).get('examples_per_second')
      for run in results['runs']
  ]
  rates = [rate for rate in rates if rate is not None]
  return sum(rates) / len(rates) if rates else float('nan')


def format_table(rows: dict, tasks) -> str:
  """Markdown: one row per model, one column per task, then the average."""
  table_rows = []
  for name, scores in rows.items():
    cells = [f'{scores[task]:.3f}' if task in scores else '-' for task in tasks]
    present = {task: scores[task] for task in tasks if task in scores}
    average = glue_metrics.glue_average(present) if present else float('nan')
    table_rows.append([name, *cells, f'{average:.3f}'])
  return '\n'.join(markdown.table(['model', *tasks, 'Avg.'], table_rows))


def _tasks():
  """--tasks, or every GLUE task under --glue_dir."""
  unknown = sorted(set(FLAGS.tasks or ()) - set(glue_tasks()))
  if unknown:
    raise app.UsageError(
        f'--tasks {unknown} are not GLUE tasks; expected '
        f'names in {list(glue_tasks())}.'
    )
  tasks = FLAGS.tasks or present_tasks(FLAGS.glue_dir)
  if not tasks:
    raise app.UsageError(
        f'--glue_dir {FLAGS.glue_dir} holds no GLUE task '
        'folder (CoLA, SST-2, MRPC, ...).'
    )
  return tasks


def _table_rows(ours: Dict[str, float]) -> Dict[str, Dict[str, float]]:
  """Our row and, with --published_row, the paper's."""
  rows = {f'ours ({FLAGS.paper} protocol)': ours}
  published = published_rows(FLAGS.paper)
  if FLAGS.published_row:
    if FLAGS.published_row not in published:
      raise app.UsageError(
          f'--published_row {FLAGS.published_row!r}: known rows for '
          f'{FLAGS.paper} are {sorted(published)}.'
      )
    rows[f'{FLAGS.paper} {FLAGS.published_row}'] = published[
        FLAGS.published_row
    ]
  return rows


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  strategy = distribute.strategy_from_flags()
  encoder = pretrained.resolve(
      FLAGS.init_checkpoint, vocab_file=FLAGS.vocab_file
  )
  if FLAGS.random_init:
    encoder = dataclasses.replace(encoder, checkpoint_path=None)
  tasks = _tasks()
  results = {task: run_task(task, encoder, strategy) for task in tasks}
  ours = {task: result['score'] for task, result in results.items()}
  rows = _table_rows(ours)
  spread = '\n'.join(
      f"- {task}: {result['protocol']['aggregation']} of "
      f"{result['summary']['n']} = {result['score']:.4f}; mean "
      f"{result['summary']['mean']:.4f} ± {result['summary']['std']:.4f}, "
      f"train steps {result['runs'][0]['train_steps']}, "
      f'{_examples_per_second(result):.1f} train examples/s'
      for task, result in results.items()
  )
  source = (
      f'random initialisation (the architecture of {FLAGS.init_checkpoint})'
      if FLAGS.random_init
      else f'checkpoint {encoder.checkpoint_path}'
  )
  table = f'GLUE dev, {source}\n\n{format_table(rows, tasks)}\n\n{spread}\n'
  json_files.write_text(os.path.join(FLAGS.model_dir, 'glue_table.md'), table)
  json_files.write_json(
      os.path.join(FLAGS.model_dir, 'glue_results.json'),
      dict(
          init_checkpoint=encoder.checkpoint_path,
          random_init=FLAGS.random_init,
          paper=FLAGS.paper,
          scores=ours,
          gin_files=FLAGS.gin_file,
          gin_params=FLAGS.gin_param,
          summaries={task: r['summary'] for task, r in results.items()},
      ),
  )
  print(table)


if __name__ == '__main__':
  cli.require_flags('init_checkpoint', 'glue_dir', 'model_dir')
  cli.run(main)
