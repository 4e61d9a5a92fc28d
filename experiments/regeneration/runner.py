"""Runs a table's grid at a small scale: pretrain, fine-tune, aggregate.

Runs live in a run store, `runs_dir`, named by a digest of what decides their
numbers (gin bindings, corpus, vocabulary, strategy; not code), so tables
comparing the same model share one run: `records-<key>/`, `<label>-<key>/`
(a resumable model_dir) and its `glue/<paper>/step_<N>/<task>-<key>/`. The
table's `out` holds `settings.json` and each run's `<run>/result.json`. The
reference trains `reference_steps`, others its FLOPs times `budget_ratio`.
"""

import dataclasses
import functools
import hashlib
import inspect
import json
import os
import re
import statistics
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from experiments import commands
from experiments import corpus_records
from experiments.regeneration import held_out
from experiments.regeneration import plan
from experiments.regeneration import registry
from official_repro.common import json_files
from official_repro.common import progress
from official_repro.metrics import aggregation
from official_repro.metrics import flops
from official_repro.modeling.networks import export_layout
from official_repro.optimization import optimizer_config
from official_repro.training import gin_utils

SETTINGS_FILENAME = 'settings.json'
RESULT_FILENAME = 'result.json'


@dataclasses.dataclass(frozen=True)
class GridSettings:
  """Everything that decides a grid's numbers.

  Attributes:
    target: the table or figure key.
    scale: 'tiny', 'cpu' or 'gpu' (`gin/regenerate/<scale>.gin`).
    corpus: text corpus directory (one document per file).
    vocab_file: WordPiece vocabulary, or None to learn one of
      `learned_vocab_size`.
    tasks: {GLUE task: epochs}.
    num_runs: fine-tuning seeds per task.
    strategy: distribution strategy of every job.
    curve_points: checkpoints every pretraining saves (evenly spaced).
    finetune_fingerprint: SHA-256 of `finetune_gin`'s bindings, or ''.
    eval_fraction: share of the books held out from pretraining.
    pretrain_seeds: pretraining seeds per model (1: unbound; more: 1, 2, ...).
    held_out_steps: held-out batches evaluated per checkpoint (0: none).
    released: (run name, path) of runs whose released encoder is fine-tuned
      instead of pretraining them.
    mixed_precision: every job's --mixed_precision (None: 'auto').
    pretrain_bindings: gin bindings after every pretraining's.
    finetune_flags: flags after every fine-tuning job's.
  """

  target: str
  scale: str
  corpus: str
  vocab_file: Optional[str]
  glue_dir: str
  reference_steps: int
  tasks: Dict[str, float]
  num_runs: int
  strategy: str = 'cpu'
  curve_points: int = 4
  finetune_fingerprint: str = ''
  learned_vocab_size: Optional[int] = None
  eval_fraction: float = 0.01
  pretrain_seeds: int = 1
  held_out_steps: int = 0
  released: Tuple[Tuple[str, str], ...] = ()
  mixed_precision: Optional[str] = None
  pretrain_bindings: Tuple[str, ...] = ()
  finetune_flags: Tuple[str, ...] = ()

  def precision_flags(self) -> List[str]:
    """The jobs' --mixed_precision flag, if the settings name one."""
    if self.mixed_precision:
      return [f'--mixed_precision={self.mixed_precision}']
    return []

  def seeds(self) -> List[Optional[int]]:
    """The pretraining seeds bound in gin ([None]: one run, unbound)."""
    if self.pretrain_seeds == 1:
      return [None]
    return list(range(1, self.pretrain_seeds + 1))


def check_settings(out: str, settings: GridSettings) -> None:
  """Writes `out/settings.json`, or raises a ValueError if it differs."""
  path = os.path.join(out, SETTINGS_FILENAME)
  current = json.loads(json.dumps(dataclasses.asdict(settings)))
  if not tf.io.gfile.exists(path):
    tf.io.gfile.makedirs(out)
    json_files.write_json(path, current)
    return
  stored = json_files.read_json(path)
  # A setting added since the file was written reads as its default.
  for field in dataclasses.fields(GridSettings):
    if field.name not in stored and field.default is not dataclasses.MISSING:
      stored[field.name] = json.loads(json.dumps(field.default))
  differences = [
      f'{name}: stored {stored.get(name)!r}, now {current.get(name)!r}'
      for name in sorted(set(stored) | set(current))
      if stored.get(name) != current.get(name)
  ]
  if differences:
    raise ValueError(
        f'{out} holds results produced with other settings; use another '
        '--out or the same settings. Differences:\n  '
        + '\n  '.join(differences)
    )


def _existing(path: str) -> str:
  """`path` (repository-relative) if that file exists, else ''."""
  exists = tf.io.gfile.exists(os.path.join(gin_utils.REPO_ROOT, path))
  return path if exists else ''


def scale_gin_files(run: registry.Run, scale: str) -> Tuple[str, ...]:
  """The includes that shrink a run to `scale`, after its paper gin files.

  `gin/regenerate/<scale>.gin`, then `<scale>_<optimizer>.gin` and
  `<scale>_<objective>.gin` where they exist.
  """
  gin_files = tuple(run.gin_files)
  optimizer = plan.query(
      gin_files,
      'optimization.optimizer',
      inspect.signature(optimizer_config.optimization_config)
      .parameters['optimizer']
      .default,
  )
  variants = (optimizer, plan.query(gin_files, 'experiment.objective'))
  includes = [_existing(f'gin/regenerate/{scale}_{v}.gin') for v in variants]
  return (f'gin/regenerate/{scale}.gin', *filter(None, includes))


def finetune_gin(scale: str) -> str:
  """The scale's fine-tuning include (repository-relative), or ''."""
  return _existing(f'gin/regenerate/{scale}_finetune.gin')


def finetune_fingerprint(scale: str) -> str:
  """SHA-256 of the bindings `finetune_gin(scale)` makes ('' for none)."""
  path = finetune_gin(scale)
  return plan.gin_fingerprint([path]) if path else ''


def run_steps(
    target: registry.Target, settings: GridSettings, vocab_size: int
) -> Dict[str, int]:
  """{run name: train steps}: the reference's FLOPs times each budget ratio."""
  runs = target.runs_at(settings.scale)
  if target.reference is None:
    return {
        run.name: int(round(settings.reference_steps * run.budget_ratio))
        for run in runs
    }
  reports = {
      run.name: plan.flops_report(
          run.gin_files + scale_gin_files(run, settings.scale),
          (
              f'experiment.train_steps = {settings.reference_steps}',
              *run.bindings_at(settings.scale),
          ),
          vocab_size,
      )[0]
      for run in runs
  }
  budget = reports[target.reference].total_train_flops()
  return {
      run.name: int(
          round(
              flops.steps_for_budget(
                  budget * run.budget_ratio,
                  reports[run.name].per_token_forward(),
                  reports[run.name].batch_size,
                  reports[run.name].seq_length,
              )
          )
      )
      for run in runs
  }


def _digest(*parts: str) -> str:
  return hashlib.sha256('\n'.join(parts).encode('utf-8')).hexdigest()[:12]


def _path_key(path: str) -> str:
  """A path as it enters a digest: local paths absolute (one run)."""
  return path if '://' in path else os.path.abspath(path)


def _vocabulary_key(settings: GridSettings) -> str:
  """The vocabulary as it enters a digest: its path, or the size learned."""
  if settings.vocab_file:
    return _path_key(settings.vocab_file)
  return f'learned:{settings.learned_vocab_size}'


def scale_max_seq_length(scale: str) -> int:
  """The records' sequence length: the include's `max_seq_length`."""
  return plan.query(
      (f'gin/regenerate/{scale}.gin',), 'pretrain_data.max_seq_length'
  )


def records_dir(runs_dir: str, settings: GridSettings) -> str:
  """The run store's records of the settings' corpus and vocabulary.

  Also of the sequence length and eval split, unless 128 tokens and 1%.
  """
  parts = [_path_key(settings.corpus), _vocabulary_key(settings)]
  max_seq_length = scale_max_seq_length(settings.scale)
  if (max_seq_length, settings.eval_fraction) != (128, 0.01):
    parts += [str(max_seq_length), repr(settings.eval_fraction)]
  return os.path.join(runs_dir, 'records-' + _digest(*parts))


def run_dir(
    runs_dir: str,
    run: registry.Run,
    settings: GridSettings,
    steps: int,
    seed: Optional[int] = None,
) -> str:
  """A pretraining run's store directory: `plan.shared_label` and a digest."""
  label = plan.shared_label(
      run,
      run_fingerprint(run, settings.scale, steps),
      lambda other: run_fingerprint(other, settings.scale, steps),
  )
  key = _digest(
      run_fingerprint(run, settings.scale, steps, seed),
      _path_key(settings.corpus),
      _vocabulary_key(settings),
      settings.strategy,
  )
  return os.path.join(runs_dir, f'{label}-{key}')


def _glue_results_path(step_dir: str, task: str, settings: GridSettings) -> str:
  """glue_suite's results file of a job, in `<task>-<settings' digest>/`."""
  key = _digest(
      _path_key(settings.glue_dir),
      repr(settings.tasks[task]),
      str(settings.num_runs),
      finetune_fingerprint(settings.scale),
  )
  return os.path.join(step_dir, f'{task}-{key}', 'glue_results.json')


def _checkpoint_steps(train_steps: int, points: int) -> List[int]:
  """Every `train_steps // points` steps and the last: a curve's checkpoints."""
  interval = max(1, train_steps // points)
  return sorted({interval * i for i in range(1, points)} | {train_steps})


_PROGRESS = re.compile(r'^(train|eval) \| step:')


def _call(command: Sequence[str], log_path: str) -> None:
  """Runs `[python, -m, module, *args]`, progress shown, all to `log_path`."""
  commands.run_module(
      command[2], command[3:], log_path=log_path, show=_PROGRESS
  )


def _training_bindings(
    run: registry.Run, scale: str, steps: int, seed: Optional[int] = None
) -> Tuple[str, ...]:
  """A run's steps, a warmup over a tenth, its scale bindings and seed."""
  return (
      f'experiment.train_steps = {steps}',
      f'optimization.warmup_steps = {steps // 10}',
      *run.bindings_at(scale),
      *([] if seed is None else [f'experiment.seed = {seed}']),
  )


def run_fingerprint(
    run: registry.Run, scale: str, steps: int, seed: Optional[int] = None
) -> str:
  """SHA-256 of the gin bindings a run trains with."""
  return plan.gin_fingerprint(
      run.gin_files + scale_gin_files(run, scale),
      _training_bindings(run, scale, steps, seed),
  )


def _pretrain(
    run: registry.Run,
    settings: GridSettings,
    records: str,
    model_dir: str,
    steps: int,
    checkpoint_every: int,
    seed: Optional[int] = None,
) -> None:
  """Runs (or resumes) `official_repro.train` for one run.

  One loop per checkpoint interval, so checkpoints stay at its multiples
  after a resume; held-out evaluation at each with `held_out_steps`.
  """
  evaluation = ['--mode=train']
  if settings.held_out_steps:
    evaluation = [
        f'--gin_param=experiment.validation_interval={checkpoint_every}',
        f'--gin_param=experiment.validation_steps={settings.held_out_steps}',
        '--mode=train_and_eval',
    ]
  bindings = (
      f"pretrain_data.input_path='{records}'",
      *_training_bindings(run, settings.scale, steps, seed),
      f'experiment.checkpoint_interval={checkpoint_every}',
      f'experiment.steps_per_loop={checkpoint_every}',
      'experiment.max_to_keep=100',
      *settings.pretrain_bindings,
  )
  command = [
      sys.executable,
      '-m',
      'official_repro.train',
      *(f'--gin_file={path}' for path in run.gin_files),
      *(f'--gin_file={path}' for path in scale_gin_files(run, settings.scale)),
      *(f'--gin_param={binding}' for binding in bindings),
      f'--model_dir={model_dir}',
      *evaluation,
      f'--strategy={settings.strategy}',
      *settings.precision_flags(),
  ]
  tf.io.gfile.makedirs(model_dir)
  _call(command, os.path.join(model_dir, 'regenerate.log'))


def finetune(
    target: registry.Target,
    settings: GridSettings,
    checkpoint: str,
    step_dir: str,
    random_init: bool = False,
    released: bool = False,
) -> Dict[str, Dict]:
  """{task: glue_suite's summary and score} for one checkpoint.

  Fine-tunes under `step_dir` (or reads back); `random_init` from random
  weights; a `released` checkpoint brings its own vocabulary.
  """
  include = finetune_gin(settings.scale)
  scores = {}
  for task in settings.tasks:
    results_path = _glue_results_path(step_dir, task, settings)
    model_dir = os.path.dirname(results_path)
    if not tf.io.gfile.exists(results_path):
      tf.io.gfile.makedirs(model_dir)
      command = [
          sys.executable,
          '-m',
          'experiments.glue_suite',
          f'--paper={target.finetune_paper}',
          f'--init_checkpoint={checkpoint}',
          *(['--random_init'] if random_init else []),
          *(
              [f'--vocab_file={settings.vocab_file}']
              if settings.vocab_file and not released
              else []
          ),
          f'--glue_dir={settings.glue_dir}',
          f'--model_dir={model_dir}',
          f'--tasks={task}',
          f'--gin_param=run_protocol.num_runs={settings.num_runs}',
          f'--gin_param=finetuning.num_epochs={settings.tasks[task]}',
          *([f'--gin_file={include}'] if include else []),
          *settings.finetune_flags,
          f'--strategy={settings.strategy}',
          *settings.precision_flags(),
      ]
      _call(command, os.path.join(model_dir, 'regenerate.log'))
    results = json_files.read_json(results_path)
    scores[task] = dict(
        score=results['scores'][task], summary=results['summaries'][task]
    )
  return scores


def build_records(settings: GridSettings, records: str) -> int:
  """The corpus as records (built once); returns their vocabulary size."""
  return corpus_records.books_records(
      settings.corpus,
      settings.vocab_file,
      records,
      max_seq_length=scale_max_seq_length(settings.scale),
      vocab_size=settings.learned_vocab_size,
      eval_fraction=settings.eval_fraction,
  )['vocab_size']


def pretrain_into_store(
    run: registry.Run,
    settings: GridSettings,
    runs_dir: str,
    records: str,
    steps: int,
    curve: bool = False,
    seed: Optional[int] = None,
) -> Tuple[str, List[int]]:
  """Pretrains `run` in the run store (or resumes, or finds it done).

  Returns (model_dir, checkpoint steps needed: all with `curve`, else the
  last); a ValueError when an earlier run lacks a curve's checkpoint.
  """
  model_dir = run_dir(runs_dir, run, settings, steps, seed)
  checkpoints = _checkpoint_steps(steps, settings.curve_points)
  if _pretrained(model_dir, steps):
    print(f'  pretrained earlier: {model_dir}', flush=True)
  else:
    print(f'  pretraining into {model_dir}', flush=True)
    _pretrain(run, settings, records, model_dir, steps, checkpoints[0], seed)
  if not curve:
    return model_dir, checkpoints[-1:]
  missing = [
      step
      for step in checkpoints[:-1]
      if not tf.io.gfile.exists(os.path.join(model_dir, f'ckpt-{step}.index'))
  ]
  if missing:
    raise ValueError(
        f'{model_dir} ({run.name}) finished without the checkpoints of steps '
        f'{missing} that curve_points={settings.curve_points} needs; it '
        'was pretrained with other checkpoint settings. Use another '
        '--runs_dir.'
    )
  return model_dir, checkpoints


def _pretrained(model_dir: str, steps: int) -> bool:
  """Whether the run in `model_dir` exported its encoder at `steps`."""
  export_dir = os.path.join(model_dir, export_layout.ENCODER_SUBDIR)
  names = (f'encoder-{steps}.index', export_layout.ENCODER_CONFIG_FILENAME)
  return all(tf.io.gfile.exists(os.path.join(export_dir, n)) for n in names)


def announce(
    index: int, runs: Sequence[registry.Run], run: registry.Run, text: str
) -> None:
  """Prints '[index/len(runs)] run (row): text' before a run's job."""
  print(f'[{index}/{len(runs)}] {run.name} ({run.row}): {text}', flush=True)


def _job_counter(
    target: registry.Target, to_do: set, clock: Callable[[], float]
) -> Callable[[str], None]:
  """Counts the jobs of `to_do`'s store directories; a line after each.

  Runs of equal bindings share a directory, so one job; jobs take minutes.
  """
  jobs = progress.Progress(
      len(to_do),
      target.key,
      unit='jobs',
      interval_seconds=0,
      clock=clock,
      log=functools.partial(print, flush=True),
  )

  def done(model_dir: str) -> None:
    if model_dir in to_do:
      to_do.remove(model_dir)
      jobs.advance()

  return done


def prepare(
    target: registry.Target, settings: GridSettings, out: str, runs_dir: str
) -> Tuple[str, int, Dict[str, int]]:
  """Checks the settings, builds the records: (records, vocab size, steps)."""
  check_settings(out, settings)
  records = records_dir(runs_dir, settings)
  vocab_size = build_records(settings, records)
  return records, vocab_size, run_steps(target, settings, vocab_size)


def pretrain_only(
    target: registry.Target,
    settings: GridSettings,
    out: str,
    runs_dir: str,
    clock: Callable[[], float] = time.monotonic,
) -> Dict[str, str]:
  """{run name: exported encoder folder}, pretrained at the first seed."""
  records, _, steps = prepare(target, settings, out, runs_dir)
  encoders = {}
  runs = target.runs_at(settings.scale)
  seed = settings.seeds()[0]
  dirs = {
      run.name: run_dir(runs_dir, run, settings, steps[run.name], seed)
      for run in runs
  }
  done = _job_counter(
      target,
      {
          dirs[r.name]
          for r in runs
          if not _pretrained(dirs[r.name], steps[r.name])
      },
      clock,
  )
  for index, run in enumerate(runs, start=1):
    announce(index, runs, run, f'{steps[run.name]:,} pretraining steps')
    model_dir, _ = pretrain_into_store(
        run, settings, runs_dir, records, steps[run.name], seed=seed
    )
    encoders[run.name] = os.path.join(model_dir, export_layout.ENCODER_SUBDIR)
    done(model_dir)
  return encoders


def mean_over_seeds(per_seed: Sequence[Dict[str, Dict]]) -> Dict[str, Dict]:
  """{task: {score, summary}} averaged over pretraining seeds' results."""
  merged = {}
  for task in per_seed[0]:
    scores = [glue[task]['score'] for glue in per_seed]
    spread = aggregation.summarize(scores)
    merged[task] = dict(
        score=spread['mean'],
        summary=dict(
            n=spread['n'],
            mean=spread['mean'],
            scores=scores,
            std=spread['std'],
            over='pretraining seeds',
        ),
    )
  return merged


def _mean_curve(
    curves: Sequence[Dict[int, Dict[str, float]]],
) -> Dict[int, Dict[str, float]]:
  """Held-out metrics averaged over seeds at the steps all seeds have."""
  steps = set.intersection(*(set(curve) for curve in curves))
  return {
      step: {
          name: statistics.fmean(c[step][name] for c in curves)
          for name in curves[0][step]
      }
      for step in sorted(steps)
  }


def run_grid(
    target: registry.Target,
    settings: GridSettings,
    out: str,
    runs_dir: str,
    clock: Callable[[], float] = time.monotonic,
) -> Dict[str, Dict]:
  """Runs (or reads back) every run of a 'pretrain_glue' `target`.

  Returns:
    {run name: result}: row, gin files and fingerprint, run_dir, train
    steps, budget ratio, `glue` ({task: score and summary}), `curve` ({step:
    glue}), `held_out` ({step: {metric: value}}) with held-out evaluation;
    with several pretraining seeds, their means and `seeds`.

  Raises:
    ValueError: `out` holds other settings, or a run of other bindings.
  """
  if target.kind != 'pretrain_glue':
    raise ValueError(
        f'{target.key} is not a pretraining grid (kind {target.kind!r}).'
    )
  records, _, steps = prepare(target, settings, out, runs_dir)
  runs = target.runs_at(settings.scale)
  done = _job_counter(
      target, _jobs_left(target, runs, settings, out, runs_dir, steps), clock
  )
  released = dict(settings.released)
  results = {}
  for index, run in enumerate(runs, start=1):
    result_path = os.path.join(out, run.name, RESULT_FILENAME)
    train_steps = steps[run.name]
    fingerprint = run_fingerprint(run, settings.scale, train_steps)
    if tf.io.gfile.exists(result_path):
      results[run.name] = _read_back(
          run, settings, result_path, fingerprint, train_steps
      )
      print(
          f'[{index}/{len(runs)}] {run.name}: finished earlier, read back.',
          flush=True,
      )
      continue
    tf.io.gfile.makedirs(os.path.dirname(result_path))
    if run.name in released:
      path = released[run.name]
      announce(
          index, runs, run, f'the released encoder {path}, fine-tuned only'
      )
      glue = finetune(
          target, settings, path, os.path.dirname(result_path), released=True
      )
      result = dict(
          _result_head(run, fingerprint, 0, path), glue=glue, curve={}
      )
    else:
      seeds = settings.pretrain_seeds
      announce(
          index,
          runs,
          run,
          f'{train_steps:,} pretraining steps'
          + (f', {seeds} pretraining seeds' if seeds > 1 else ''),
      )
      per_seed = []
      for seed in settings.seeds():
        args = (target, run, settings, runs_dir, records, train_steps, seed)
        per_seed.append(_run_seed(*args))
        done(per_seed[-1]['run_dir'])
      result = _merged_result(run, settings, fingerprint, train_steps, per_seed)
    results[run.name] = result
    json_files.write_json(result_path, result)
  return results


def _read_back(
    run: registry.Run,
    settings: GridSettings,
    result_path: str,
    fingerprint: str,
    steps: int,
) -> Dict:
  """A finished run's result, checked to have been trained as `run` is now."""
  result = json_files.read_json(result_path)
  if result.get('gin_fingerprint') != fingerprint:
    raise ValueError(
        f'{result_path} was trained with other gin bindings than '
        f'{run.name} has now ({", ".join(run.gin_files)} + '
        f'{" + ".join(scale_gin_files(run, settings.scale))}, {steps} '
        'steps); use another --out.'
    )
  return result


def _merged_result(
    run: registry.Run,
    settings: GridSettings,
    fingerprint: str,
    steps: int,
    per_seed: List[Dict],
) -> Dict:
  """A run's result from its seeds' (`_run_seed`): one's, or their means."""
  result = _result_head(run, fingerprint, steps)
  if len(per_seed) == 1:
    result.update(per_seed[0])
    del result['seed']
    return result
  result.update(
      run_dir=[seed['run_dir'] for seed in per_seed],
      glue=mean_over_seeds([seed['glue'] for seed in per_seed]),
      curve={
          step: mean_over_seeds([seed['curve'][step] for seed in per_seed])
          for step in per_seed[0]['curve']
      },
      seeds=per_seed,
  )
  if settings.held_out_steps:
    result['held_out'] = _mean_curve([seed['held_out'] for seed in per_seed])
  return result


def _result_head(
    run: registry.Run, fingerprint: str, steps: int, released: str = ''
) -> Dict:
  """What every result starts with: the run, its row and how it trains."""
  return dict(
      run=run.name,
      row=run.row,
      **(dict(released=released) if released else {}),
      gin_files=list(run.gin_files),
      gin_fingerprint=fingerprint,
      train_steps=steps,
      budget_ratio=run.budget_ratio,
  )


def _step_dir(pretrain_dir: str, target: registry.Target, step: int) -> str:
  """Where `target`'s fine-tuning of the checkpoint at `step` is kept."""
  return os.path.join(
      pretrain_dir, 'glue', target.finetune_paper, f'step_{step}'
  )


def _jobs_left(
    target: registry.Target,
    runs: Sequence[registry.Run],
    settings: GridSettings,
    out: str,
    runs_dir: str,
    steps: Dict[str, int],
) -> set:
  """The store directories of the grid's jobs (run seeds) left to do."""
  to_do = set()
  released = dict(settings.released)
  for run in runs:
    if run.name in released or tf.io.gfile.exists(
        os.path.join(out, run.name, RESULT_FILENAME)
    ):
      continue
    train_steps = steps[run.name]
    fine_tuned_steps = [train_steps]
    if target.figure == 'steps':
      fine_tuned_steps = _checkpoint_steps(train_steps, settings.curve_points)
    for seed in settings.seeds():
      pretrain_dir = run_dir(runs_dir, run, settings, train_steps, seed)
      finetuned = all(
          tf.io.gfile.exists(
              _glue_results_path(
                  _step_dir(pretrain_dir, target, step), task, settings
              )
          )
          for step in fine_tuned_steps
          for task in settings.tasks
      )
      if not (_pretrained(pretrain_dir, train_steps) and finetuned):
        to_do.add(pretrain_dir)
  return to_do


def _run_seed(
    target: registry.Target,
    run: registry.Run,
    settings: GridSettings,
    runs_dir: str,
    records: str,
    steps: int,
    seed: Optional[int],
) -> Dict:
  """Pretrains and fine-tunes one seed: seed, run_dir, glue, curve, held_out."""
  curve = target.figure == 'steps'
  pretrain_dir, checkpoints = pretrain_into_store(
      run, settings, runs_dir, records, steps, curve=curve, seed=seed
  )
  evaluated = {}
  for step in checkpoints:
    checkpoint = pretrain_dir
    if step != steps:
      checkpoint = os.path.join(pretrain_dir, f'ckpt-{step}')
    evaluated[str(step)] = finetune(
        target, settings, checkpoint, _step_dir(pretrain_dir, target, step)
    )
  result = dict(
      seed=seed,
      run_dir=pretrain_dir,
      glue=evaluated[str(steps)],
      curve=evaluated,
  )
  if settings.held_out_steps:
    result['held_out'] = {
        str(step): metrics
        for step, metrics in held_out.read_curve(pretrain_dir).items()
    }
  return result
