"""The paper-scale run plan of a table: commands, FLOPs and TPU-hours.

For each compared model the plan gives its `run_tpu.sh` pretraining command
(the paper gin files, the model directory under `--bucket`), its training
FLOPs by the FLOPs tool (ELECTRA's formula, `official_repro.count_flops`),
and an expected TPU v3-8 time: FLOPs divided by the rate ELECTRA-small
reaches in 004 Sec. 3.3 (31.3 iterations/s on a v3-8 at batch 128 and
sequence 128, times our FLOPs per such step). That rate is one measured
point, so the estimate is as good as the assumption that other models run
at ELECTRA-small's utilisation (004 reports 17.9% MXU for SCRIPT against
14.9% for ELECTRA: expect +-20%). Then the fine-tuning command per model
(`experiments.glue_suite` with its paper's protocol and, for base and large
models, the paper's cells of that size) and its FLOPs, about 6 x encoder
parameters x training tokens (examples x epochs x sequence length x runs,
the train sizes of 001 Table II); and for tables with SQuAD columns the
`official_repro.finetune` command per SQuAD version (its FLOPs are not
estimated).
"""

import copy
import dataclasses
import functools
import hashlib
import os
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import gin
import tensorflow as tf

from experiments import paper_tables
from experiments.regeneration import registry
from official_repro import count_flops
from official_repro.data import glue as glue_data
from official_repro.metrics import flops
from official_repro.tasks import finetuning_schedule
from official_repro.training import gin_utils

# Our GLUE task name -> 001 Table II's row (train sizes).
_TABLE_II_ROWS = dict(
    cola='CoLA',
    sst2='SST-2',
    mrpc='MRPC',
    stsb='STS-B',
    qqp='QQP',
    mnli='MNLI',
    qnli='QNLI',
    rte='RTE',
)
# 002 Table 5's column: TPU v3-8 hours per model.
_TRAINING_TIME = 'Training time'
_CALIBRATION_GIN = ('gin/papers/001_ale/electra_small.gin',)
_CALIBRATION_BINDINGS = (
    'pretrain_data.train_batch_size = 128',
    'pretrain_data.max_seq_length = 128',
)


@dataclasses.dataclass(frozen=True)
class PlannedRun:
  """One model's pretraining and fine-tuning jobs at paper scale.

  Attributes:
    name, row: the run and the paper row it fills.
    gin_files: its paper gin files.
    model_dir: its model directory under the bucket.
    pretrain_command: the `run_tpu.sh` command.
    train_steps, train_flops: its pretraining steps and FLOPs.
    tpu_v3_8_hours: expected pretraining time on a TPU v3-8.
    paper_hours: the time the paper reports for this row, if it does.
    parameters: encoder parameters.
    finetune_command: the `experiments.glue_suite` command, if any.
    glue_dir: its model directory (where --collect reads
      glue_results.json), if any.
    finetune_flops, finetune_tpu_v3_8_hours: its estimated cost.
  """

  name: str
  row: str
  gin_files: List[str]
  model_dir: str
  pretrain_command: str
  train_steps: int
  train_flops: float
  tpu_v3_8_hours: float
  paper_hours: Optional[float]
  parameters: int
  finetune_command: Optional[str]
  glue_dir: Optional[str]
  finetune_flops: Optional[float]
  finetune_tpu_v3_8_hours: Optional[float]


def parse_gin(gin_files: Sequence[str], bindings: Sequence[str] = ()) -> None:
  """Clears gin and parses repository-relative `gin_files`, then `bindings`."""
  gin.clear_config()
  gin_utils.parse_config(
      [os.path.join(gin_utils.REPO_ROOT, path) for path in gin_files],
      list(bindings),
  )


def gin_fingerprint(
    gin_files: Sequence[str], bindings: Sequence[str] = ()
) -> str:
  """SHA-256 of the gin bindings that `gin_files` then `bindings` make."""
  return _gin_fingerprint(tuple(gin_files), tuple(bindings))


@functools.lru_cache(maxsize=None)
def _gin_fingerprint(
    gin_files: Tuple[str, ...], bindings: Tuple[str, ...]
) -> str:
  parse_gin(gin_files, bindings)
  config = gin.config_str()
  gin.clear_config()
  return hashlib.sha256(config.encode('utf-8')).hexdigest()


def run_label(gin_files: Sequence[str]) -> str:
  """A run directory's readable part.

  A run directory's readable part: the first gin file's paper folder
  and name ('001_ale.electra_small').
  """
  paper_dir, name = gin_files[0].split('/')[-2:]
  return f'{paper_dir}.{os.path.splitext(name)[0]}'


def shared_label(
    run: registry.Run,
    fingerprint: str,
    fingerprint_of: Callable[[registry.Run], str],
) -> str:
  """The label of `run`'s directory.

  The label of `run`'s directory: that of the first run in the registry
  (in --list order) that trains the same bindings, `fingerprint_of(other)
  == fingerprint`, else its own.

  Rows of different gin files can train equal bindings (003 Table 2's "Only
  MLM" is Table 1's BERT-Small++; Fig. 5's Sampled@5 is TEAMS-Small++; below
  paper scale the include erases more), and are then one run under one
  name, whichever table asks first.
  """
  for target in registry.TARGETS.values():
    for other in target.runs:
      if other.gin_files == run.gin_files:
        return run_label(run.gin_files)
      if fingerprint_of(other) == fingerprint:
        return run_label(other.gin_files)
  return run_label(run.gin_files)


def flops_report(
    gin_files: Sequence[str],
    bindings: Sequence[str] = (),
    vocab_size: int = 30522,
) -> Tuple[flops.ComputeReport, int]:
  """(ComputeReport, encoder parameters) of a gin configuration.

  Cached per process (a copy of the report is returned): a plan asks for
  the same configurations (the calibration run's, each run's) again and
  again, and each costs a model build.
  """
  report, parameters = _flops_report(
      tuple(gin_files), tuple(bindings), vocab_size
  )
  return copy.deepcopy(report), parameters


@functools.lru_cache(maxsize=None)
def _flops_report(
    gin_files: Tuple[str, ...], bindings: Tuple[str, ...], vocab_size: int
) -> Tuple[flops.ComputeReport, int]:
  parse_gin(gin_files, bindings)
  report, task_config = count_flops.report_from_gin(vocab_size)
  parameters = count_flops.model_parameters(
      count_flops.build_pretrainer(task_config)
  )['encoder']
  gin.clear_config()
  return report, parameters


def tpu_v3_8_flops_per_second(vocab_size: int = 30522) -> float:
  """Training FLOPs per second of a TPU v3-8.

  Training FLOPs per second of a TPU v3-8: 004 Sec. 3.3's ELECTRA-small
  iterations per second times our FLOPs per step of that configuration.
  """
  report, _ = flops_report(_CALIBRATION_GIN, _CALIBRATION_BINDINGS, vocab_size)
  per_step = report.total_train_flops() / report.train_steps
  rate = paper_tables.load('004').stated['ELECTRA-small iterations/s'].value
  return per_step * rate


def _finetune_flops(paper_dir: str, parameters: int) -> float:
  """6 x parameters x tokens over the GLUE tasks of the paper's protocol."""
  table_ii = paper_tables.load('001').table('II')
  total = 0.0
  for task in glue_data.GLUE_TASK_NAMES:
    path = f'gin/finetune/{paper_dir}/{task}.gin'
    if not tf.io.gfile.exists(os.path.join(gin_utils.REPO_ROOT, path)):
      continue
    parse_gin([path])
    schedule = finetuning_schedule.FinetuningSchedule()
    runs = finetuning_schedule.RunProtocol().num_runs
    examples = table_ii.cell(_TABLE_II_ROWS[task], 'Train').value
    total += (
        6.0
        * parameters
        * examples
        * schedule.num_epochs
        * schedule.max_seq_length
        * runs
    )
  gin.clear_config()
  return total


def size_files(paper_dir: str, task: str, size: Optional[str]) -> List[str]:
  """The fine-tuning gin file of a model size, parsed after the task file.

  Args:
    paper_dir: folder under gin/finetune/.
    task: 'glue' or a SQuAD version ('squad11').
    size: 'base', 'large' or None (the task files' own size).

  Raises:
    FileNotFoundError: when the paper has no file for that size.
  """
  if size is None:
    return []
  for name in (f'{task}_{size}.gin', f'{size}.gin'):
    path = f'gin/finetune/{paper_dir}/{name}'
    if tf.io.gfile.exists(os.path.join(gin_utils.REPO_ROOT, path)):
      return [path]
  raise FileNotFoundError(
      f'gin/finetune/{paper_dir} has no {task}_{size}.gin ' f'or {size}.gin.'
  )


def model_directory(
    bucket: str, run: registry.Run, bindings: Sequence[str] = ()
) -> str:
  """A paper-scale pretraining run's model directory under `bucket`.

  A paper-scale pretraining run's model directory under `bucket`: its
  `shared_label` and a digest of its gin bindings, so that the tables that
  compare the same model (ELECTRA-small in 001 Table IV and 004 Tables 1
  and 2; 003's Small++ rows repeated in Tables 2-4 and Fig. 5) pretrain it
  once.
  """
  fingerprint = gin_fingerprint(run.gin_files, bindings)
  label = shared_label(
      run, fingerprint, lambda other: gin_fingerprint(other.gin_files, bindings)
  )
  return f'{bucket.rstrip("/")}/{label}-{fingerprint[:12]}'


def glue_directory(
    model_dir: str, target: registry.Target, run: registry.Run
) -> str:
  """The GLUE fine-tuning directory of a run under a paper's protocol.

  The GLUE fine-tuning directory of a run under a paper's protocol (and
  its size's cells): one pretrained model is fine-tuned once per
  protocol.
  """
  return f'{model_dir}/glue_{target.finetune_paper}' + (
      f'_{run.finetune_size}' if run.finetune_size else ''
  )


def plan(
    target: registry.Target,
    bucket: str,
    glue_dir: str,
    squad_dir: str = '$SQUAD_DIR',
    tpu_name: str = '$TPU_NAME',
    zone: str = '$ZONE',
    vocab_size: int = 30522,
) -> List[PlannedRun]:
  """The paper-scale jobs of `target`'s compared models."""
  rate = tpu_v3_8_flops_per_second(vocab_size)
  planned = []
  for run in target.runs:
    report, parameters = flops_report(run.gin_files, vocab_size=vocab_size)
    gin_flags = ' '.join(f'--gin_file={path}' for path in run.gin_files)
    steps = report.train_steps
    bindings = []
    if run.budget_ratio != 1.0:
      steps = int(round(report.train_steps * run.budget_ratio))
      bindings = [f'experiment.train_steps={steps}']
    model_dir = model_directory(bucket, run, bindings)
    train_flops = report.total_train_flops() * steps / report.train_steps
    finetune_command = finetune_flops = finetune_hours = glue_dir_out = None
    if target.finetune_paper:
      glue_dir_out = glue_directory(model_dir, target, run)
      sized = ''.join(
          f' --gin_file={path}'
          for path in size_files(
              target.finetune_paper, 'glue', run.finetune_size
          )
      )
      commands = [
          f'python -m experiments.glue_suite --paper={target.finetune_paper}'
          f' --init_checkpoint={model_dir} --glue_dir={glue_dir}'
          f' --model_dir={glue_dir_out}{sized}'
          ' --strategy=tpu'
          f' --tpu={tpu_name}'
      ]
      for squad in target.squad:
        files = [
            f'gin/finetune/{target.finetune_paper}/{squad}.gin',
            *size_files(target.finetune_paper, squad, run.finetune_size),
        ]
        commands.append(
            'python -m official_repro.finetune '
            + ' '.join(f'--gin_file={path}' for path in files)
            + f' --init_checkpoint={model_dir} --data_dir={squad_dir}/{squad}'
            f' --model_dir={model_dir}/{squad}_{target.finetune_paper}'
            ' --strategy=tpu'
            f' --tpu={tpu_name}'
        )
      finetune_command = '\n'.join(commands)
      finetune_flops = _finetune_flops(target.finetune_paper, parameters)
      finetune_hours = finetune_flops / rate / 3600.0
    paper_hours = None
    if target.table:
      table = paper_tables.load(target.paper).table(target.table)
      if _TRAINING_TIME in table.columns and run.row in table.row_keys:
        paper_hours = table.cell(run.row, _TRAINING_TIME).value
    planned.append(
        PlannedRun(
            name=run.name,
            row=run.row,
            gin_files=list(run.gin_files),
            model_dir=model_dir,
            pretrain_command=(
                f'./run_tpu.sh --tpu_name={tpu_name} --zone={zone} '
                f'{gin_flags}'
                + ''.join(f' --gin_param={binding}' for binding in bindings)
                + f' --model_dir={model_dir}'
            ),
            train_steps=steps,
            train_flops=train_flops,
            tpu_v3_8_hours=train_flops / rate / 3600.0,
            paper_hours=paper_hours,
            parameters=parameters,
            finetune_command=finetune_command,
            glue_dir=glue_dir_out,
            finetune_flops=finetune_flops,
            finetune_tpu_v3_8_hours=finetune_hours,
        )
    )
  return planned


def format_plan(target: registry.Target, planned: List[PlannedRun]) -> str:
  """The plan as markdown: one table, then the commands."""
  with_paper = any(run.paper_hours is not None for run in planned)
  lines = [
      f'## {target.key}: {target.description} (paper scale)',
      '',
      '| run | row | steps | train FLOPs | TPU v3-8 hours (est.) | '
      + ('paper hours | ' if with_paper else '')
      + 'encoder params | fine-tuning FLOPs | fine-tuning hours (est.) |',
      '|---|---|---|---|---|' + ('---|' if with_paper else '') + '---|---|---|',
  ]
  for run in planned:
    finetune = (
        f'{run.finetune_flops:.3g} | {run.finetune_tpu_v3_8_hours:.1f}'
        if run.finetune_flops is not None
        else '- | -'
    )
    paper = ''
    if with_paper:
      paper = (
          '-' if run.paper_hours is None else f'{run.paper_hours:g}'
      ) + ' | '
    lines.append(
        f'| {run.name} | {run.row} | {run.train_steps:,} | '
        f'{run.train_flops:.3g} | {run.tpu_v3_8_hours:.1f} | '
        f'{paper}{run.parameters / 1e6:.2f}M | {finetune} |'
    )
  lines += ['', 'Commands:', '', '```sh']
  for run in planned:
    lines.append(run.pretrain_command)
    if run.finetune_command:
      lines.append(run.finetune_command)
  lines += ['```', '']
  return '\n'.join(lines)


def as_json(planned: List[PlannedRun]) -> List[Dict]:
  """The plan as JSON-serialisable dictionaries."""
  return [dataclasses.asdict(run) for run in planned]
