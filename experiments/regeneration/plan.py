"""The paper-scale run plan of a table: commands, FLOPs and TPU-hours.

Per compared model: its `run_tpu.sh` pretraining command, training FLOPs
(ELECTRA's formula) and expected TPU v3-8 time at the rate ELECTRA-small
reaches in 004 Sec. 3.3 (one measured point, assumed for every model); then
its fine-tuning commands and GLUE fine-tuning FLOPs (6 x parameters x
tokens, train sizes of 001 Table II).
"""

import copy
import dataclasses
import functools
import hashlib
import os
import re
import shlex
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import gin
import tensorflow as tf

from experiments import paper_tables
from experiments.regeneration import fit as fit_lib
from experiments.regeneration import registry
from official_repro.common import markdown
from official_repro import count_flops
from official_repro.data import glue as glue_data
from official_repro.metrics import flops
from official_repro.modeling.networks import export_layout
from official_repro.tasks import finetuning_schedule
from official_repro.training import gin_utils

# Our GLUE task name -> 001 Table II's row (train sizes): Table IV's names.
_TABLE_II_ROWS = registry.get('001.IV').columns
# 002 Table 5's column: TPU v3-8 hours per model.
_TRAINING_TIME = 'Training time'
_CALIBRATION_GIN = ('gin/papers/001_ale/electra_small.gin',)
_CALIBRATION_BINDINGS = (
    'pretrain_data.train_batch_size = 128',
    'pretrain_data.max_seq_length = 128',
)


@dataclasses.dataclass(frozen=True)
class Stage:
  """One job of a planned run, started on a TPU VM by `run_tpu.sh`.

  Attributes:
    name: 'pretrain', 'glue' or a SQuAD version ('squad11').
    model_dir: the job's output folder.
    done_file: the file that exists once the job has finished.
    flags: `run_tpu.sh`'s flags for the job, after those of the VM.
  """

  name: str
  model_dir: str
  done_file: str
  flags: Tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class PaperSettings:
  """What a paper-scale plan is made from besides the table.

  Attributes:
    bucket: model directory root (gs://, or local in a rehearsal).
    squad_dir: folder holding squad11/ and squad20/ (None: no SQuAD jobs).
    records: --records items, `LENGTH-MASKING=PATH` or one PATH for all.
    accelerator_types: --accelerator_type items, `TYPE` or `RUN=TYPE`.
    extra_gin_files, pretrain_bindings, finetune_flags: after every run's
      (a rehearsal's sizes and caps).
    train_steps_cap: a rehearsal's steps at budget ratio 1 (None: plan's).
    vocab_size: vocabulary size where the records are not read.
  """

  bucket: str
  glue_dir: str
  squad_dir: Optional[str] = None
  records: Tuple[str, ...] = ()
  accelerator_types: Tuple[str, ...] = ('v3-8',)
  extra_gin_files: Tuple[str, ...] = ()
  pretrain_bindings: Tuple[str, ...] = ()
  train_steps_cap: Optional[int] = None
  finetune_flags: Tuple[str, ...] = ()
  vocab_size: int = 30522


@dataclasses.dataclass(frozen=True)
class PlannedRun:
  """One model's pretraining and fine-tuning jobs at paper scale.

  Attributes:
    name, row: the run and the paper row it fills.
    records: its records' `records_key`.
    train_steps, train_flops, parameters: of its pretraining and encoder.
    tpu_v3_8_hours, paper_hours: expected, and the paper's if reported.
    glue_dir: its GLUE fine-tuning directory (--collect reads it), if any.
    finetune_flops, finetune_tpu_v3_8_hours: its estimated cost.
    accelerator_type, hours, fit, refusal: its TPU, estimated hours there,
      `fit.check` of it there, and why it cannot run there (or None).
    stages: its jobs in order.
  """

  name: str
  row: str
  gin_files: List[str]
  model_dir: str
  records: str
  records_key: str
  train_steps: int
  train_flops: float
  tpu_v3_8_hours: float
  paper_hours: Optional[float]
  parameters: int
  glue_dir: Optional[str]
  finetune_flops: Optional[float]
  finetune_tpu_v3_8_hours: Optional[float]
  accelerator_type: str
  hours: float
  fit: fit_lib.Fit
  refusal: Optional[str]
  stages: Tuple[Stage, ...]

  def commands(self, tpu_name: str = '$TPU_NAME', zone: str = '$ZONE'):
    """Its jobs as `run_tpu.sh` command lines on VM `tpu_name`."""
    return [
        ' '.join(
            ['./run_tpu.sh', f'--tpu_name={tpu_name}', f'--zone={zone}']
            + [f'--accelerator_type={self.accelerator_type}']
            + [_display_quote(flag) for flag in stage.flags]
        )
        for stage in self.stages
    ]


def _display_quote(word: str) -> str:
  """A shell word, double-quoted if it can be (a $PLACEHOLDER expands)."""
  if re.fullmatch(r'[A-Za-z0-9_@%+=:,./-]+', word):
    return word
  if not re.search(r'["\\`]', word):
    return f'"{word}"'
  return shlex.quote(word)


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
  """A run directory's readable part: '001_ale.electra_small'."""
  paper_dir, name = gin_files[0].split('/')[-2:]
  return f'{paper_dir}.{os.path.splitext(name)[0]}'


def shared_label(
    run: registry.Run,
    fingerprint: str,
    fingerprint_of: Callable[[registry.Run], str],
) -> str:
  """The `run_label` of the first registry run training `run`'s bindings.

  Rows of different gin files can train equal bindings (003 Table 2's
  "Only MLM" is Table 1's BERT-Small++) and are then one run.
  """
  for target in registry.TARGETS.values():
    for other in target.runs:
      if other.gin_files == run.gin_files:
        return run_label(run.gin_files)
      if fingerprint_of(other) == fingerprint:
        return run_label(other.gin_files)
  return run_label(run.gin_files)


def flops_report(
    gin_files: Tuple[str, ...],
    bindings: Tuple[str, ...] = (),
    vocab_size: int = 30522,
) -> Tuple[flops.ComputeReport, int]:
  """(ComputeReport, encoder parameters) of a gin configuration (cached)."""
  facts = config_facts(gin_files, bindings, vocab_size)
  return copy.deepcopy(facts.report), facts.encoder_parameters


@dataclasses.dataclass(frozen=True)
class ConfigFacts:
  """What a plan reads from a pretraining gin configuration."""

  report: flops.ComputeReport
  encoder_parameters: int
  trainable_parameters: int
  optimizer: str
  masking: str


@functools.lru_cache(maxsize=None)
def config_facts(
    gin_files: Tuple[str, ...],
    bindings: Tuple[str, ...] = (),
    vocab_size: int = 30522,
) -> ConfigFacts:
  """The `ConfigFacts` of a gin configuration (cached per process)."""
  parse_gin(gin_files, bindings)
  report, task_config = count_flops.report_from_gin(vocab_size)
  model = count_flops.build_pretrainer(task_config)
  facts = ConfigFacts(
      report=report,
      encoder_parameters=count_flops.model_parameters(model)['encoder'],
      trainable_parameters=int(
          sum(v.shape.num_elements() for v in model.trainable_variables)
      ),
      optimizer=query(gin_files, 'optimization.optimizer', 'lamb', bindings),
      masking=query(gin_files, 'pretrain_data.masking', 'dynamic', bindings),
  )
  gin.clear_config()
  return facts


_REQUIRED = object()


@functools.lru_cache(maxsize=None)
def query(
    gin_files: Tuple[str, ...],
    name: str,
    default=_REQUIRED,
    bindings: Tuple[str, ...] = (),
):
  """What `gin_files`, then `bindings`, bind `name` to, else `default`.

  Without a `default`, an unbound `name` raises a ValueError.
  """
  parse_gin(gin_files, bindings)
  try:
    return gin.query_parameter(name)
  except ValueError:
    if default is _REQUIRED:
      raise
    return default
  finally:
    gin.clear_config()


def tpu_v3_8_flops_per_second(vocab_size: int = 30522) -> float:
  """004 Sec. 3.3's ELECTRA-small it/s times our FLOPs per step of it."""
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
    cost = 6.0 * parameters * examples * schedule.num_epochs
    total += cost * schedule.max_seq_length * runs
  gin.clear_config()
  return total


def size_files(paper_dir: str, task: str, size: Optional[str]) -> List[str]:
  """The fine-tuning gin file of a model size ([] for None), after the task's.

  A FileNotFoundError when `paper_dir` has none.
  """
  if size is None:
    return []
  for name in (f'{task}_{size}.gin', f'{size}.gin'):
    path = f'gin/finetune/{paper_dir}/{name}'
    if tf.io.gfile.exists(os.path.join(gin_utils.REPO_ROOT, path)):
      return [path]
  raise FileNotFoundError(
      f'gin/finetune/{paper_dir} has no {task}_{size}.gin or {size}.gin.'
  )


def model_directory(
    bucket: str,
    run: registry.Run,
    bindings: Sequence[str] = (),
    extra_gin_files: Sequence[str] = (),
) -> str:
  """A paper-scale run's model directory: `shared_label` and a digest.

  Equal models of different tables (ELECTRA-small in 001 and 004) are one.
  """
  extra = tuple(extra_gin_files)
  fingerprint = gin_fingerprint(tuple(run.gin_files) + extra, bindings)
  label = shared_label(
      run,
      fingerprint,
      lambda other: gin_fingerprint(tuple(other.gin_files) + extra, bindings),
  )
  return f'{bucket.rstrip("/")}/{label}-{fingerprint[:12]}'


def records_key(facts: ConfigFacts) -> str:
  """'<max_seq_length>-<masking>': which records a run reads."""
  return f'{facts.report.seq_length}-{facts.masking}'


def records_paths(items: Sequence[str]) -> Dict[str, str]:
  """--records items as {records key or '': path}.

  Raises:
    ValueError: an item whose key is not LENGTH-MASKING, or a key twice.
  """
  paths = {}
  for item in items:
    key, has_key, path = item.partition('=')
    if not has_key:
      key, path = '', item
    elif not re.fullmatch(r'[0-9]+-(dynamic|static)', key):
      raise ValueError(
          f'--records item {item!r}: expected PATH or LENGTH-MASKING=PATH '
          '(e.g. 512-static=gs://bucket/records_512).'
      )
    if key in paths:
      raise ValueError(f'--records names {key or "a default"} twice.')
    paths[key] = path
  return paths


def _finetune_stages(
    target: registry.Target,
    run: registry.Run,
    model_dir: str,
    settings: PaperSettings,
) -> List[Stage]:
  """The GLUE suite (and SQuAD) jobs of one pretrained run.

  GLUE's directory is named by the protocol (and by the size's cells).
  """
  glue_dir = f'{model_dir}/glue_{target.finetune_paper}' + (
      f'_{run.finetune_size}' if run.finetune_size else ''
  )
  sized = tuple(
      f'--gin_file={path}'
      for path in size_files(target.finetune_paper, 'glue', run.finetune_size)
  )
  stages = [
      Stage(
          'glue',
          glue_dir,
          f'{glue_dir}/glue_results.json',
          (
              '--module=experiments.glue_suite',
              f'--model_dir={glue_dir}',
              '--',
              f'--paper={target.finetune_paper}',
              f'--init_checkpoint={model_dir}',
              f'--glue_dir={settings.glue_dir}',
              *sized,
              *settings.finetune_flags,
          ),
      )
  ]
  for squad in target.squad if settings.squad_dir else ():
    files = [
        f'gin/finetune/{target.finetune_paper}/{squad}.gin',
        *size_files(target.finetune_paper, squad, run.finetune_size),
    ]
    squad_dir = f'{model_dir}/{squad}_{target.finetune_paper}'
    stages.append(
        Stage(
            squad,
            squad_dir,
            f'{squad_dir}/results.json',
            (
                '--module=official_repro.finetune',
                f'--model_dir={squad_dir}',
                '--',
                *(f'--gin_file={path}' for path in files),
                f'--init_checkpoint={model_dir}',
                f'--data_dir={settings.squad_dir}/{squad}',
                *settings.finetune_flags,
            ),
        )
    )
  return stages


def _paper_hours(target: registry.Target, run: registry.Run):
  if not target.table:
    return None
  table = paper_tables.load(target.paper).table(target.table)
  if _TRAINING_TIME in table.columns and run.row in table.row_keys:
    return table.cell(run.row, _TRAINING_TIME).value
  return None


def plan(target: registry.Target, settings: PaperSettings) -> List[PlannedRun]:
  """The paper-scale jobs of `target`'s compared models.

  Raises:
    ValueError: a bad --records or --accelerator_type item, or a global
      batch that does not divide over a run's replicas.
  """
  rate = tpu_v3_8_flops_per_second(settings.vocab_size)
  records = records_paths(settings.records)
  default_type, run_types = fit_lib.parse_types(settings.accelerator_types)
  unknown = set(run_types) - {run.name for run in target.runs}
  if unknown:
    raise ValueError(
        f'--accelerator_type names {", ".join(sorted(unknown))}, not a run '
        f'of {target.key}: {", ".join(run.name for run in target.runs)}.'
    )
  planned = []
  for run in target.runs:
    kind = run_types.get(run.name, default_type)
    planned.append(_planned_run(target, run, settings, rate, records, kind))
  return planned


def _steps(
    run: registry.Run, settings: PaperSettings, report: flops.ComputeReport
) -> Tuple[int, int, List[str]]:
  """(planned steps, steps trained, the bindings that say so) of a run."""
  bindings = []
  steps = trained_steps = report.train_steps
  if run.budget_ratio != 1.0:
    steps = trained_steps = int(round(report.train_steps * run.budget_ratio))
    bindings = [f'experiment.train_steps={steps}']
  if settings.train_steps_cap:
    trained_steps = int(round(settings.train_steps_cap * run.budget_ratio))
    bindings = [f'experiment.train_steps={trained_steps}']
  return steps, trained_steps, bindings + list(settings.pretrain_bindings)


def _planned_run(
    target: registry.Target,
    run: registry.Run,
    settings: PaperSettings,
    rate: float,
    records: Dict[str, str],
    accelerator_type: str,
) -> PlannedRun:
  """One run's jobs, cost and fit (`plan`)."""
  gin_files = tuple(run.gin_files) + settings.extra_gin_files
  facts = config_facts(gin_files, vocab_size=settings.vocab_size)
  report = facts.report
  steps, trained_steps, bindings = _steps(run, settings, report)
  model_dir = model_directory(
      settings.bucket, run, bindings, settings.extra_gin_files
  )
  key = records_key(facts)
  # Records not given: the shell variable the command names instead.
  placeholder = f'$RECORDS_{key.replace("-", "_").upper()}'
  run_records = records.get(key, records.get('', placeholder))
  train_flops = report.total_train_flops() * steps / report.train_steps
  stages = [
      Stage(
          'pretrain',
          model_dir,
          f'{model_dir}/{export_layout.ENCODER_SUBDIR}/encoder-'
          f'{trained_steps}.index',
          (
              *(f'--gin_file={path}' for path in gin_files),
              f"--gin_param=pretrain_data.input_path='{run_records}'",
              *(f'--gin_param={binding}' for binding in bindings),
              f'--model_dir={model_dir}',
          ),
      )
  ]
  finetune_flops = finetune_hours = None
  if target.finetune_paper:
    stages += _finetune_stages(target, run, model_dir, settings)
    finetune_flops = _finetune_flops(
        target.finetune_paper, facts.encoder_parameters
    )
    finetune_hours = finetune_flops / rate / 3600.0
  device = fit_lib.accelerator(accelerator_type)
  what = f'{run.name} on a {device.name}'
  run_fit = fit_lib.check(
      report, facts.trainable_parameters, facts.optimizer, device, what
  )
  hours = train_flops / rate / 3600.0
  return PlannedRun(
      name=run.name,
      row=run.row,
      gin_files=list(run.gin_files),
      model_dir=model_dir,
      records=run_records,
      records_key=key,
      train_steps=steps,
      train_flops=train_flops,
      tpu_v3_8_hours=hours,
      paper_hours=_paper_hours(target, run),
      parameters=facts.encoder_parameters,
      glue_dir=stages[1].model_dir if target.finetune_paper else None,
      finetune_flops=finetune_flops,
      finetune_tpu_v3_8_hours=finetune_hours,
      accelerator_type=device.name,
      hours=device.hours_from_v3_8(hours + (finetune_hours or 0.0)),
      fit=run_fit,
      refusal=fit_lib.refusal(run_fit, report.batch_size, what),
      stages=tuple(stages),
  )


def format_plan(
    target: registry.Target,
    planned: List[PlannedRun],
    vms: Optional[Dict[str, str]] = None,
    zone: str = '$ZONE',
) -> str:
  """The plan as markdown: one table, then the commands.

  `vms` is {run name: the TPU VM it runs on} (default '$TPU_NAME').
  """
  vms = vms or {}
  with_paper = any(run.paper_hours is not None for run in planned)
  columns = (
      'run | row | steps | train FLOPs | TPU v3-8 hours (est.) | '
      + ('paper hours | ' if with_paper else '')
      + 'encoder params | fine-tuning FLOPs | fine-tuning hours (est.) | '
      'accelerator | VM | hours there (est.) | per-replica batch, memory'
  )
  rows = []
  for run in planned:
    finetune = (
        [f'{run.finetune_flops:.3g}', f'{run.finetune_tpu_v3_8_hours:.1f}']
        if run.finetune_flops is not None
        else ['-', '-']
    )
    paper = []
    if with_paper:
      paper = ['-' if run.paper_hours is None else f'{run.paper_hours:g}']
    rows.append(
        [run.name, run.row, f'{run.train_steps:,}', f'{run.train_flops:.3g}']
        + [f'{run.tpu_v3_8_hours:.1f}', *paper, f'{run.parameters / 1e6:.2f}M']
        + finetune
        + [run.accelerator_type, vms.get(run.name, '$TPU_NAME')]
        + [f'{run.hours:.1f}']
        + [run.fit.describe() + (' (does not fit)' if run.refusal else '')]
    )
  lines = [
      f'## {target.key}: {target.description} (paper scale)',
      '',
      *markdown.table(columns.split(' | '), rows),
  ]
  lines += [
      '',
      'Memory: an analytic estimate of one replica in a pretraining step '
      '(weights, gradients, optimizer slots, stored activations, masked-LM '
      'logits; experiments/regeneration/fit.py), not a measurement. Hours '
      'elsewhere than a v3-8: scaled by peak bfloat16 FLOP/s.',
      '',
      'Commands:',
      '',
      '```sh',
  ]
  for run in planned:
    lines += run.commands(vms.get(run.name, '$TPU_NAME'), zone)
  lines += ['```', '']
  return '\n'.join(lines)


def as_json(planned: List[PlannedRun]) -> List[Dict]:
  """The plan as JSON-serialisable dictionaries."""
  return [dataclasses.asdict(run) for run in planned]
