"""The functions that regenerate a target, each under the name it has.

Each `registry.Target` names its runner, a `(target, request)` function in
`RUNNERS`; `experiments.regenerate` builds the `Request` from its flags and
calls it, so there is no dispatch on keys or kinds to extend. Here: `grid`,
`learning` and `plan_only` (the 'command' runners are in `command_runners`).
"""

import dataclasses
import difflib
import functools
import os
from typing import Callable, Dict, List, Optional

from absl import app
import tensorflow as tf

from experiments import provenance
from experiments.regeneration import learning as learning_evidence
from experiments.regeneration import paper_scale
from experiments.regeneration import plan
from experiments.regeneration import registry
from experiments.regeneration import rehearsal
from experiments.regeneration import report
from experiments.regeneration import runner
from experiments.regeneration import scales
from official_repro.common import cli
from official_repro.common import dataclass_flags
from official_repro.common import registry as entry_registry
from official_repro.data import glue as glue_data
from official_repro.modeling.networks import pretrained
from official_repro.tasks import finetuning_schedule

# The request fields holding local paths, made absolute by `absolute_paths`.
_LOCAL_PATHS = (
    'corpus',
    'vocab_file',
    'glue_dir',
    'lm_file',
    'out',
    'runs_dir',
    'report_dir',
    'rehearse_faults',
    'rehearse_gcloud',
)


def _per_scale(text: str, value: Callable, separator: str = ', ') -> str:
  """A flag's help: `text`, then each scale's default (`value(scale)`)."""
  defaults = separator.join(
      f'{value(scale)} {scale.name}' for scale in scales.SCALES.values()
  )
  return f"{text} (default: the scale's, {defaults})."


@dataclasses.dataclass(frozen=True)
class Request:
  """What a runner is asked for: experiments.regenerate's flags.

  Each field is the flag of its name; `tasks` is the raw --tasks list.
  """

  table: Optional[str] = dataclass_flags.option(
      None, 'Table or figure key, e.g. 001.IV.'
  )
  scale: str = dataclass_flags.option(
      'tiny', 'Scale.', choices=[*scales.SCALES, 'paper']
  )
  corpus: Optional[str] = dataclass_flags.option(
      None, 'Pretraining corpus directory.'
  )
  vocab_file: Optional[str] = dataclass_flags.option(
      None,
      'WordPiece vocabulary (at --scale=cpu, default: one learned from the '
      'training books).',
  )
  glue_dir: Optional[str] = dataclass_flags.option(
      None, 'GLUE root (SST-2/, MRPC/, ...).'
  )
  lm_file: Optional[str] = dataclass_flags.option(
      None, 'Word-level text for 002.3 (WikiText tokens).'
  )
  out: Optional[str] = dataclass_flags.option(
      None, 'Output directory of the table.'
  )
  report_dir: Optional[str] = dataclass_flags.option(
      None,
      'Below paper scale, also write the finished table there as '
      'regenerate_<scale>_<key>.md/.json/.png (the learning target as '
      'learning_<scale>.*), e.g. experiments/reports.',
  )
  runs_dir: Optional[str] = dataclass_flags.option(
      None,
      'Tiny/gpu scale: the run store, where pretraining runs and their '
      'fine-tuning are kept by what decides their numbers; tables given the '
      'same one share their equal runs (default: <out>/runs).',
  )
  reference_steps: Optional[int] = dataclass_flags.option(
      None,
      _per_scale(
          'Steps of the reference run', lambda s: f'{s.reference_steps}'
      ),
  )
  tasks: Optional[List[str]] = dataclass_flags.option(
      None,
      _per_scale(
          'GLUE tasks fine-tuned below paper scale, as task:epochs',
          lambda s: ','.join(s.default_tasks),
          separator='; ',
      ),
  )
  num_runs: int = dataclass_flags.option(3, 'Fine-tuning seeds per task.')
  released: Optional[List[str]] = dataclass_flags.option(
      None,
      'Below paper scale, ROW=PATH items: fine-tune the released encoder at '
      'PATH (a Hugging Face folder, an original TF1 checkpoint, a TEAMS '
      'checkpoint or an official_repro.convert output) for the ROW of the '
      'table instead of pretraining it.',
  )
  pretrain_seeds: Optional[int] = dataclass_flags.option(
      None,
      _per_scale(
          'Pretraining seeds per compared model',
          lambda s: f'{s.pretrain_seeds}',
      ),
  )
  strategy: Optional[str] = dataclass_flags.option(
      None, _per_scale('Strategy of every job', lambda s: s.strategy)
  )
  bucket: Optional[str] = dataclass_flags.option(
      None,
      'Paper scale: model directory root (gs://...; with --rehearse a local '
      'folder, default <out>/rehearsal/bucket).',
  )
  records: Optional[List[str]] = dataclass_flags.option(
      None,
      'Paper scale: pretraining records, PATH or LENGTH-MASKING=PATH items '
      '(e.g. 128-dynamic=gs://b/records_128,512-static=gs://b/records_512); '
      'the plan names the keys its runs read.',
  )
  squad_dir: Optional[str] = dataclass_flags.option(
      None,
      'Paper scale: folder holding squad11/ and squad20/ (without it no '
      'SQuAD jobs are planned).',
  )
  tpu_names: Optional[List[str]] = dataclass_flags.option(
      None,
      'Paper scale: TPU VMs to run on, one job at a time each, created when '
      'missing (default: one, $TPU_NAME; with --rehearse rehearsal-a).',
  )
  accelerator_type: Optional[List[str]] = dataclass_flags.option(
      None,
      'Paper scale: TYPE (default v3-8), and RUN=TYPE items for runs on '
      'another type.',
  )
  zone: str = dataclass_flags.option('$ZONE', 'Paper scale: TPU zone.')
  pod_runtime_version: Optional[str] = dataclass_flags.option(
      None,
      'Paper scale: the TPU software version of runs on multi-host slices '
      '(a TensorFlow pod version, tpu-vm-tf-<version>-pod-pjrt).',
  )
  project: Optional[str] = dataclass_flags.option(
      None, "Paper scale: Cloud project (default: gcloud's)."
  )
  spot: bool = dataclass_flags.option(
      False, 'Paper scale: Spot VMs (recreated when preempted).'
  )
  launch: bool = dataclass_flags.option(
      False,
      'Paper scale: run the plan to the end (resumable: finished jobs are '
      'skipped, running ones waited for).',
  )
  confirm: bool = dataclass_flags.option(
      False,
      'Paper scale: with --launch, start the VMs the plan lists (without '
      'it --launch prints what it would create and stops).',
  )
  collect: bool = dataclass_flags.option(
      False,
      'Paper scale: print each run as finished, running or failed and the '
      'table of the finished ones.',
  )
  rehearse: bool = dataclass_flags.option(
      False,
      'Paper scale: run the launch on this machine against a fake gcloud '
      '(needs --corpus, --vocab_file, --glue_dir; see README).',
  )
  rehearse_sizes: str = dataclass_flags.option(
      'paper',
      "With --rehearse: the papers' model sizes, or tiny ones "
      '(gin/regenerate/tiny.gin).',
      choices=['paper', 'tiny'],
  )
  rehearse_faults: Optional[str] = dataclass_flags.option(
      None,
      'With --rehearse: JSON list of faults for the fake gcloud '
      '(experiments/regeneration/fake_gcloud.py).',
  )
  rehearse_gcloud: Optional[str] = dataclass_flags.option(
      None,
      'With --rehearse: another fake gcloud to run against instead of '
      "this repository's.",
  )

  def absolute_paths(self) -> 'Request':
    """The request with its local paths absolute (URLs, '$VARS' kept).

    The jobs run from the repository root, not the caller's directory.
    """
    return dataclasses.replace(
        self,
        **{
            name: os.path.abspath(getattr(self, name))
            for name in _LOCAL_PATHS
            if getattr(self, name)
            and '://' not in getattr(self, name)
            and not getattr(self, name).startswith('$')
        },
    )

  def require(self, *names: str) -> None:
    """Stops unless every flag of `names` is given (a UsageError)."""
    missing = [f'--{name}' for name in names if not getattr(self, name)]
    if missing:
      raise app.UsageError(
          f'{self.table} at --scale={self.scale} needs '
          f'{", ".join(missing)}.'
      )

  def task_epochs(self) -> Dict[str, float]:
    """--tasks (or the scale's default) as {task: epochs}; UsageError if bad."""
    tasks = {}
    for item in self.tasks or scales.get(self.scale).default_tasks:
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

  def checked_tasks(self) -> Dict[str, float]:
    """`task_epochs`, once the inputs they need are there (else UsageError)."""
    tasks = self.task_epochs()
    for name in ('corpus', 'glue_dir', 'vocab_file'):
      path = getattr(self, name)
      if path and not tf.io.gfile.exists(path):
        raise app.UsageError(f'--{name} {path}: no such file or directory.')
    if self.glue_dir:
      for task in tasks:
        folder = self.glue_folder(task)
        if not tf.io.gfile.isdir(folder):
          raise app.UsageError(
              f'--tasks {task}: --glue_dir has no '
              f'{folder}; give a GLUE root holding it or '
              'drop the task.'
          )
    return tasks

  def glue_folder(self, task: str) -> str:
    """The --glue_dir folder of a GLUE task."""
    return os.path.join(self.glue_dir, glue_data.get_task_spec(task).directory)

  def released_encoders(self, target: registry.Target) -> Dict[str, str]:
    """--released as {run name: path}, checked against the table's rows.

    Raises:
      UsageError: for a figure, an item not ROW=PATH, an unknown ROW or a
        PATH that is not there (folder, file or checkpoint prefix).
    """
    if self.released and target.figure:
      raise app.UsageError(
          f'--released: {target.key} is a figure of pretraining curves; a '
          'release has no curve. Give it to a table.'
      )
    runs = target.runs_at(self.scale)
    encoders = {}
    for item in self.released or ():
      row, _, path = item.partition('=')
      matches = [run for run in runs if row in (run.row, run.name)]
      if not path or not matches:
        raise app.UsageError(
            f'--released item {item!r}: expected ROW=PATH with ROW one of '
            f'{", ".join(run.row for run in runs)} ({target.key} at '
            f'--scale={self.scale}).'
        )
      if not (tf.io.gfile.exists(path) or tf.io.gfile.exists(path + '.index')):
        raise app.UsageError(
            f'--released item {item!r}: {path}: no such folder, file or '
            'checkpoint prefix.'
        )
      try:  # Converts a release once, before any pretraining starts.
        pretrained.resolve(path)
      except (FileNotFoundError, cli.UserError) as error:
        raise app.UsageError(f'--released item {item!r}: {error}') from error
      encoders[matches[0].name] = path
    return encoders

  def store(self) -> str:
    """The run store: --runs_dir, default <out>/runs."""
    return self.runs_dir or os.path.join(self.out, 'runs')

  def grid_settings(
      self, target: registry.Target, tasks: Dict[str, float], num_runs: int
  ) -> runner.GridSettings:
    """`target`'s grid settings: the request's, else the scale's."""
    scale = scales.get(self.scale)
    if not scale.learned_vocab_size:
      self.require('vocab_file')
    return runner.GridSettings(
        target=target.key,
        scale=scale.name,
        corpus=self.corpus,
        vocab_file=self.vocab_file,
        glue_dir=self.glue_dir,
        reference_steps=self.reference_steps or scale.reference_steps,
        tasks=tasks,
        num_runs=num_runs,
        strategy=self.strategy or scale.strategy,
        finetune_fingerprint=runner.finetune_fingerprint(scale.name),
        learned_vocab_size=(
            None if self.vocab_file else scale.learned_vocab_size
        ),
        eval_fraction=scale.eval_fraction,
        pretrain_seeds=self.pretrain_seeds or scale.pretrain_seeds,
        held_out_steps=scale.held_out_steps,
        released=tuple(sorted(self.released_encoders(target).items())),
    )


TargetRunner = Callable[[registry.Target, Request], None]

# The runners by name: those of every module of this package, imported the
# first time a name is looked up.
RUNNERS = entry_registry.Registry[TargetRunner](
    'target runner', 'Target.runner', ('experiments.regeneration',)
)


def registered(
    name: str, plans_at_paper_scale: bool = True
) -> Callable[[TargetRunner], TargetRunner]:
  """Decorator: registers the function as the runner `name`.

  With `plans_at_paper_scale`, --scale=paper writes the run plan instead.
  """

  def register(regenerate: TargetRunner) -> TargetRunner:
    @functools.wraps(regenerate)
    def regenerate_or_plan(target: registry.Target, request: Request) -> None:
      if plans_at_paper_scale and request.scale == 'paper':
        paper_scale.run(target, request)
      else:
        regenerate(target, request)

    return RUNNERS.register(name, regenerate_or_plan)

  return register


def run(target: registry.Target, request: Request) -> None:
  """Regenerates `target` by its runner, after checking counts and releases."""
  for name in ('num_runs', 'pretrain_seeds'):
    value = getattr(request, name)
    if value is not None and value < 1:
      raise app.UsageError(f'--{name} must be at least 1, got {value}.')
  if request.released and (target.runner != 'grid' or request.scale == 'paper'):
    raise app.UsageError(
        f'--released: {target.key} at --scale={request.scale} pretrains no '
        'grid to put a release in; fine-tune a release with '
        'experiments.glue_suite --init_checkpoint=<path>.'
    )
  request.released_encoders(target)
  RUNNERS.get(target.runner)(target, request)


@registered('plan_only')
def plan_only(target: registry.Target, request: Request) -> None:
  """Refuses below paper scale a target that only paper scale can run."""
  del request
  raise app.UsageError(
      f'{target.key} runs only at --scale=paper: {target.why_plan_only}.'
  )


def _grid_header(target: registry.Target, settings: runner.GridSettings) -> str:
  """The header line of a grid's table: scale, steps, tasks, seeds, runs."""
  scale = settings.scale
  includes = sorted(
      {
          path
          for run in target.runs_at(scale)
          for path in runner.scale_gin_files(run, scale)
      }
  )
  vocabulary = settings.vocab_file or (
      f'{settings.learned_vocab_size} pieces learned from the training books'
  )
  reference = ''
  if target.reference:
    reference = f' ({target.reference}, others at its training FLOPs)'
  seeds = ''
  if settings.pretrain_seeds > 1:
    seeds = (
        f'; {settings.pretrain_seeds} pretraining seeds per model, '
        'rows their mean and std'
    )
  note = f' Runs: {target.small_scale_note}.' if target.small_scale_note else ''
  protocol = f'gin/finetune/{target.finetune_paper}/protocol.gin'
  aggregation = plan.query(
      (protocol,),
      'run_protocol.aggregation',
      finetuning_schedule.RunProtocol.aggregation,
  )
  return (
      f'Scale: {scale} ({", ".join(includes)}); '
      f'reference steps {settings.reference_steps}{reference}'
      f'; tasks {settings.tasks}; {settings.num_runs} '
      f'seed{"s" if settings.num_runs != 1 else ""} per task, '
      f'{aggregation} over them ({protocol}){seeds}'
      f'; vocabulary {vocabulary}; {settings.strategy}.{note}\n\n'
      + provenance.provenance('experiments.regenerate')
  )


@registered('grid')
def grid(target: registry.Target, request: Request) -> None:
  """Runs a pretraining grid below paper scale and writes its table."""
  tasks = request.checked_tasks()
  request.require('corpus', 'glue_dir', 'out')
  settings = request.grid_settings(target, tasks, request.num_runs)
  store = request.store()
  if request.rehearse:
    if request.scale != 'gpu':
      raise app.UsageError(
          '--rehearse rehearses --scale=paper (a launch) or --scale=gpu.'
      )
    root = os.path.join(request.out, 'rehearsal')
    settings = rehearsal.gpu_grid(settings, root)
    store = os.path.join(root, 'runs')
  results = runner.run_grid(target, settings, request.out, store)
  if target.parameters_column:
    for run in target.runs_at(request.scale):
      if run.name in results:
        results[run.name]['parameters'] = plan.flops_report(
            run.gin_files + runner.scale_gin_files(run, request.scale),
            run.bindings_at(request.scale),
        )[1]
  header = _grid_header(target, settings)
  if request.rehearse:
    header += (
        '\n\nA rehearsal of --scale=gpu on this machine (float16 with loss '
        'scaling on one_device; steps, batches and GLUE rows capped): its '
        'numbers compare nothing.'
    )
  entries = report.rows(target, results)
  print(report.write(target, entries, header, request.out))
  if request.report_dir:
    tf.io.gfile.makedirs(request.report_dir)
    name = f'regenerate_{request.scale}_{target.key}'
    report.write(target, entries, header, request.report_dir, name=name)


@registered('learning', plans_at_paper_scale=False)
def learning(target: registry.Target, request: Request) -> None:
  """Pretrains one model per objective and writes the learning evidence."""
  if request.scale == 'paper':
    raise app.UsageError(f'{target.key} runs below paper scale only.')
  tasks = request.checked_tasks()
  request.require('corpus', 'glue_dir', 'out')
  content = learning_evidence.run_learning(
      target,
      request.grid_settings(target, tasks, request.num_runs),
      request.out,
      request.store(),
      provenance=provenance.provenance('experiments.regenerate'),
  )
  if request.report_dir:
    learning_evidence.write(content, request.report_dir)


def output_dir(request: Request) -> str:
  """--out, made (a UsageError without it)."""
  request.require('out')
  tf.io.gfile.makedirs(request.out)
  return request.out
