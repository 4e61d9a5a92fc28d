"""Runs a table's paper-scale plan on TPU VMs to the end, resumably.

Each planned run always gets the same VM (`vm_names`), one thread per VM
running its stages in order with `run_tpu.sh --wait`, whose supervisor
recreates a preempted VM. Done stages are skipped, running ones supervised;
a failure skips that run's later stages only. States go to
`<out>/<key>.launch.json`, which `status_lines` reads for --collect.
`run_tpu.sh` is started by `subprocess.Popen`, not `commands.run_module`:
that runs only `python -m`, takes no `env`, keeps the output in memory until
the job ends and cannot act while it waits, whereas a stage runs for days
with `cloud.env`, appending to a log file and printing progress lines.
"""

import dataclasses
import datetime
import functools
import os
import re
import subprocess
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from experiments.regeneration import fit
from experiments.regeneration import plan
from official_repro.common import json_files
from official_repro.training import gin_utils

_RUN_TPU = os.path.join(gin_utils.REPO_ROOT, 'run_tpu.sh')
_POLL_SECONDS = 1.0
# An error line: a command's 'name: error: ...', Python's 'Fatal Python
# error', an exception; not a module name such as h5py._errors.
_ERROR = re.compile(r'\berror\b|Error:', re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class Cloud:
  """Where the jobs run and how `run_tpu.sh` is called.

  Attributes:
    tpu_names: the VMs, one job at a time each.
    project: Cloud project (None: gcloud's configured one).
    supervise_interval: seconds between the supervisor's checks.
    run_tpu_flags: more `run_tpu.sh` flags for every job (a rehearsal's).
    env: environment of `run_tpu.sh` (None: this process's).
    progress_seconds: seconds between progress lines.
    pod_runtime_version: `--runtime_version` of jobs on multi-host slices.
    concurrent_jobs: most stages running at once (None: one per VM).
  """

  zone: str
  tpu_names: Tuple[str, ...]
  project: Optional[str] = None
  spot: bool = False
  supervise_interval: int = 300
  run_tpu_flags: Tuple[str, ...] = ()
  env: Optional[Dict[str, str]] = None
  progress_seconds: float = 600.0
  pod_runtime_version: Optional[str] = None
  concurrent_jobs: Optional[int] = None


def vm_names(
    planned: Sequence[plan.PlannedRun], cloud: Cloud
) -> Dict[str, str]:
  """{run name: VM}: model directories dealt out in sorted order, in turn.

  A VM name gets the accelerator type as suffix when a plan has several.
  """
  types = {run.accelerator_type for run in planned}
  directories = sorted({run.model_dir for run in planned})
  names = {}
  for run in planned:
    name = cloud.tpu_names[
        directories.index(run.model_dir) % len(cloud.tpu_names)
    ]
    if len(types) > 1:
      name = f'{name}-{run.accelerator_type}'
    names[run.name] = name
  return names


def run_tpu_words(
    run: plan.PlannedRun, stage: plan.Stage, vm: str, cloud: Cloud
) -> List[str]:
  """The `run_tpu.sh` command that runs `stage` on `vm` and waits for it."""
  words = [
      'bash',
      _RUN_TPU,
      f'--tpu_name={vm}',
      f'--zone={cloud.zone}',
      f'--accelerator_type={run.accelerator_type}',
      '--wait',
      f'--supervise_interval={cloud.supervise_interval}',
  ]
  if cloud.project:
    words.append(f'--project={cloud.project}')
  if cloud.spot:
    words.append('--spot')
  if fit.accelerator(run.accelerator_type).hosts > 1:
    words.append(f'--runtime_version={cloud.pod_runtime_version}')
  return words + list(cloud.run_tpu_flags) + list(stage.flags)


class LaunchState:
  """The launch's per-stage states, kept in `<out>/<key>.launch.json`."""

  def __init__(self, path: str):
    self.path = path
    self._lock = threading.Lock()
    stored = json_files.read_json(path, dict(stages={}))
    self.stages: Dict[str, Dict] = stored['stages']

  def set(self, run: str, stage: str, **fields) -> None:
    with self._lock:
      entry = self.stages.setdefault(f'{run}/{stage}', {})
      entry.update(
          fields,
          updated=datetime.datetime.now(datetime.timezone.utc).isoformat(
              timespec='seconds'
          ),
      )
      json_files.write_json(self.path, dict(stages=self.stages))

  def get(self, run: str, stage: str) -> Dict:
    return self.stages.get(f'{run}/{stage}', {})


def _last_error(log_path: str) -> str:
  """A failed stage's most telling line: the job's last error, else any."""
  with tf.io.gfile.GFile(log_path) as f:
    lines = [line.rstrip() for line in f if line.strip()]
  job = [line[4:] for line in lines if line.startswith('  | ')]
  for candidates in (job, lines):
    errors = [line for line in candidates if _ERROR.search(line)]
    if errors:
      return errors[-1].strip()
  return (lines or ['(empty log)'])[-1].strip()


def _latest_step(model_dir: str) -> Optional[int]:
  latest = tf.train.latest_checkpoint(model_dir)
  match = re.search(r'ckpt-(\d+)$', latest or '')
  return int(match.group(1)) if match else None


class _Progress:
  """Progress lines of one waiting stage: step, checkpoint, time left."""

  def __init__(self, run, stage, vm, total_steps, clock):
    self.run, self.stage, self.vm = run, stage, vm
    self.total_steps = total_steps
    self.clock = clock
    self.started = clock()
    self.first: Optional[Tuple[float, int]] = None

  def line(self) -> str:
    elapsed = self.clock() - self.started
    head = f'{self.run.name}: {self.stage.name} on {self.vm}'
    if self.stage.name != 'pretrain':
      done = len(tf.io.gfile.glob(f'{self.stage.model_dir}/*/results.json'))
      return f'{head}, {done} task(s) done, {elapsed / 60:.0f} min so far'
    step = _latest_step(self.stage.model_dir)
    if step is None:
      return f'{head}, no checkpoint yet, {elapsed / 60:.0f} min so far'
    if self.first is None or step < self.first[1]:
      self.first = (self.clock(), step)
    left = ''
    seconds, done = self.clock() - self.first[0], step - self.first[1]
    if done > 0 and seconds > 0:
      hours = (self.total_steps - step) / (done / seconds) / 3600.0
      left = f', about {hours:.1f} h left'
    return f'{head}, step {step:,} of {self.total_steps:,} (ckpt-{step}){left}'


def _run_stage(
    run: plan.PlannedRun,
    stage: plan.Stage,
    vm: str,
    cloud: Cloud,
    state: LaunchState,
    log_dir: str,
    say: Callable[[str], None],
    clock: Callable[[], float],
) -> bool:
  """Runs one stage through `run_tpu.sh --wait`; whether it finished."""
  log_path = os.path.join(log_dir, f'{run.name}.{stage.name}.log')
  mark = functools.partial(state.set, run.name, stage.name, vm=vm, log=log_path)
  mark(state='running')
  say(f'{run.name}: {stage.name} on {vm} (log {log_path})')
  progress = _Progress(run, stage, vm, trained_steps(run), clock)
  last_line = clock()
  # run_tpu.sh's output goes to an operating-system file (a local path).
  with open(log_path, 'a') as log:
    process = subprocess.Popen(
        run_tpu_words(run, stage, vm, cloud),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=gin_utils.REPO_ROOT,
        env=cloud.env,
    )
    while process.poll() is None:
      time.sleep(_POLL_SECONDS)
      if clock() - last_line >= cloud.progress_seconds:
        say(progress.line())
        last_line = clock()
  if process.returncode == 0 and tf.io.gfile.exists(stage.done_file):
    mark(state='finished')
    say(f'{run.name}: {stage.name} finished on {vm}')
    return True
  error = _last_error(log_path)
  if process.returncode == 0:
    error = f'it ended without writing {stage.done_file}'
  mark(state='failed', error=error)
  say(f'FAILED {run.name}: {stage.name} on VM {vm}: {error} (log {log_path})')
  return False


def trained_steps(run: plan.PlannedRun) -> int:
  """The steps its pretraining trains (its done file names them)."""
  match = re.search(r'encoder-(\d+)\.index$', run.stages[0].done_file)
  return int(match.group(1)) if match else run.train_steps


def launch(
    planned: Sequence[plan.PlannedRun],
    cloud: Cloud,
    state_path: str,
    log_dir: str,
    say: Callable[[str], None] = lambda line: print(line, flush=True),
    clock: Callable[[], float] = time.monotonic,
) -> Dict[str, str]:
  """Runs every planned run's stages; {run name: 'finished' or 'failed'}."""
  tf.io.gfile.makedirs(log_dir)
  state = LaunchState(state_path)
  vms = vm_names(planned, cloud)
  outcome: Dict[str, str] = {}
  slots = threading.BoundedSemaphore(
      cloud.concurrent_jobs or len(set(vms.values())) or 1
  )
  started = clock()

  def run_stage(run: plan.PlannedRun, stage: plan.Stage, vm: str) -> bool:
    with slots:
      return _run_stage(run, stage, vm, cloud, state, log_dir, say, clock)

  def work(vm: str) -> None:
    for run in planned:
      if vms[run.name] != vm:
        continue
      outcome[run.name] = _run_stages(run, vm, state, run_stage)
      failed = sum(value == 'failed' for value in outcome.values())
      say(
          f'{len(outcome)} of {len(planned)} runs done ({failed} failed), '
          f'{(clock() - started) / 3600:.1f} h since this launch started'
      )

  threads = [
      threading.Thread(target=work, args=(vm,), daemon=True)
      for vm in sorted(set(vms.values()))
  ]
  for thread in threads:
    thread.start()
  for thread in threads:
    thread.join()
  return outcome


def _run_stages(run, vm: str, state: LaunchState, run_stage) -> str:
  """A run's stages not done yet, in order: 'finished' or 'failed'."""
  for stage in run.stages:
    if tf.io.gfile.exists(stage.done_file):
      if state.get(run.name, stage.name).get('state') != 'finished':
        state.set(run.name, stage.name, state='finished', vm=vm)
      continue
    if not run_stage(run, stage, vm):
      return 'failed'
  return 'finished'


def status_lines(
    planned: Sequence[plan.PlannedRun], state_path: str
) -> List[str]:
  """One line per run: finished, running, failed or not started, and why."""
  state = LaunchState(state_path)
  lines = []
  for run in planned:
    done = [s for s in run.stages if tf.io.gfile.exists(s.done_file)]
    if len(done) == len(run.stages):
      lines.append(f'{run.name}: finished')
      continue
    stage = run.stages[len(done)]
    entry = state.get(run.name, stage.name)
    where = f' on {entry["vm"]}' if entry.get('vm') else ''
    if entry.get('state') == 'failed':
      lines.append(
          f'{run.name}: {stage.name} failed{where}: {entry["error"]} '
          f'(log {entry["log"]})'
      )
    elif entry.get('state') == 'running':
      step = _latest_step(stage.model_dir) if stage.name == 'pretrain' else None
      lines.append(
          f'{run.name}: {stage.name} running{where} since '
          f'{entry["updated"]}'
          + (f', step {step:,}' if step is not None else '')
          + ' (or stopped with the client: --launch picks it up)'
      )
    else:
      lines.append(f'{run.name}: {stage.name} not started')
  return lines
