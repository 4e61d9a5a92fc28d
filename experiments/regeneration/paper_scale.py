"""--scale=paper: the plan, its launch to the end, its rehearsal, --collect.

`run` writes the plan, refuses a run that cannot fit before anything starts,
and with --launch --confirm runs it and writes the table; --collect prints
each run's state; --rehearse runs the launch here against the fake gcloud.
"""

import os
from typing import Dict, List, Sequence, Tuple

from absl import app
import tensorflow as tf

from experiments.regeneration import fit as fit_lib
from experiments.regeneration import launch as launch_lib
from experiments.regeneration import plan
from experiments.regeneration import registry
from experiments.regeneration import rehearsal
from experiments.regeneration import report
from official_repro.common import cli
from official_repro.common import json_files
from official_repro.data import glue as glue_data
from official_repro.data import records as records_lib
from official_repro.metrics import aggregation

_PLACEHOLDER_TPU = '$TPU_NAME'


def _tasks(request) -> List[str]:
  """The GLUE tasks a rehearsal cuts: --tasks, else those in --glue_dir."""
  if request.tasks:
    return list(request.task_epochs())
  return [
      task
      for task in glue_data.GLUE_TASK_NAMES
      if tf.io.gfile.isdir(request.glue_folder(task))
  ]


def _rehearsal(
    target: registry.Target, request
) -> Tuple[plan.PaperSettings, launch_lib.Cloud]:
  """The rehearsal's settings and cloud: stand-ins made under <out>."""
  request.require('corpus', 'vocab_file', 'glue_dir', 'out')
  request.checked_tasks()
  root = os.path.join(request.out, 'rehearsal')
  bucket = request.bucket or os.path.join(root, 'bucket')
  if '://' in bucket:
    raise app.UsageError(
        f'--bucket {bucket}: a rehearsal runs its VMs on this machine; give '
        'a local folder (or none: <out>/rehearsal/bucket).'
    )
  extra = rehearsal.SIZES[request.rehearse_sizes]
  keys = {
      plan.records_key(plan.config_facts(tuple(run.gin_files) + extra))
      for run in target.runs
  }
  records = rehearsal.build_records(
      request.corpus, request.vocab_file, os.path.join(root, 'data'), keys
  )
  glue_dir = rehearsal.slice_glue(
      request.glue_dir, os.path.join(root, 'data', 'glue'), _tasks(request)
  )
  squad_dir = None
  if request.squad_dir and target.squad:
    squad_dir = rehearsal.slice_squad(
        request.squad_dir, os.path.join(root, 'data', 'squad'), target.squad
    )
  settings = plan.PaperSettings(
      bucket=bucket,
      glue_dir=glue_dir,
      squad_dir=squad_dir,
      records=tuple(f'{key}={path}' for key, path in records.items()),
      accelerator_types=tuple(request.accelerator_type or ('v3-8',)),
      extra_gin_files=extra,
      pretrain_bindings=rehearsal.PRETRAIN_BINDINGS
      + (() if extra else rehearsal.PAPER_SIZE_BINDINGS),
      train_steps_cap=rehearsal.TRAIN_STEPS,
      finetune_flags=rehearsal.FINETUNE_FLAGS
      + (rehearsal.TINY_FINETUNE_FLAGS if extra else ()),
  )
  bin_dir = rehearsal.write_gcloud(
      os.path.join(root, 'bin'), request.rehearse_gcloud
  )
  cloud = launch_lib.Cloud(
      zone='rehearsal-zone' if request.zone.startswith('$') else request.zone,
      tpu_names=tuple(request.tpu_names or ('rehearsal-a',)),
      spot=request.spot,
      supervise_interval=1,
      run_tpu_flags=rehearsal.RUN_TPU_FLAGS,
      pod_runtime_version=request.pod_runtime_version or rehearsal.POD_VERSION,
      env=rehearsal.environment(root, bin_dir, request.rehearse_faults),
      progress_seconds=30.0,
      # At the papers' sizes one job (BERT-Large or TEAMS-Large training, a
      # few GB each) at a time fits this machine's memory.
      concurrent_jobs=None if extra else 1,
  )
  return settings, cloud


def _cloud(target: registry.Target, request):
  """The real launch's settings and cloud, from the flags."""
  request.require('bucket', 'glue_dir', 'out')
  settings = plan.PaperSettings(
      bucket=request.bucket,
      glue_dir=request.glue_dir,
      squad_dir=request.squad_dir if target.squad else None,
      records=tuple(request.records or ()),
      accelerator_types=tuple(request.accelerator_type or ('v3-8',)),
  )
  cloud = launch_lib.Cloud(
      zone=request.zone,
      tpu_names=tuple(request.tpu_names or (_PLACEHOLDER_TPU,)),
      project=request.project,
      spot=request.spot,
      pod_runtime_version=request.pod_runtime_version,
  )
  return settings, cloud


def check_records(planned: Sequence[plan.PlannedRun]) -> None:
  """Stops (UsageError naming the fix) unless every run's records are there."""
  for run in planned:
    length, masking = run.records_key.split('-')
    fix = (
        f'give --records={run.records_key}=<records> made by '
        'official_repro.data.create_pretraining_data '
        f'--max_seq_length={length} --masking={masking}'
    )
    if run.records.startswith('$'):
      raise app.UsageError(
          f'{run.name} reads {run.records_key} records: {fix}.'
      )
    path = os.path.join(run.records, records_lib.METADATA_FILENAME)
    if not tf.io.gfile.exists(path):
      raise app.UsageError(
          f'{run.name}: --records {run.records} has no {path}; {fix}.'
      )
    metadata = records_lib.load_metadata(run.records)
    found = f'{metadata["max_seq_length"]}-{metadata["masking"]}'
    if found != run.records_key:
      raise app.UsageError(
          f'{run.name}: --records {run.records} are {found} records, but the '
          f'run reads {run.records_key}; {fix}.'
      )


def _check_cloud(cloud: launch_lib.Cloud) -> None:
  """Stops when --zone or --tpu_names is still a placeholder."""
  missing = [
      flag
      for flag, values in (
          ('--zone', [cloud.zone]),
          ('--tpu_names', cloud.tpu_names),
      )
      if any(value.startswith('$') for value in values)
  ]
  if missing:
    raise app.UsageError(f'--launch needs {" and ".join(missing)}.')


def cost_lines(
    planned: Sequence[plan.PlannedRun], vms: Dict[str, str]
) -> List[str]:
  """What the launch will pay for: per run, accelerator, hours and VM."""
  lines = ['What this launch runs and creates:']
  for run in planned:
    lines.append(
        f'  {run.name}: {run.accelerator_type} VM {vms[run.name]} (created '
        f'if missing), about {run.hours:.1f} h for '
        f'{", ".join(stage.name for stage in run.stages)}'
    )
  total = sum(run.hours for run in planned)
  lines.append(
      f'  total about {total:.1f} accelerator-hours on '
      f'{len(set(vms.values()))} VM(s); the VMs are billed until deleted '
      '(./run_tpu.sh --tpu_name=NAME --zone=ZONE --delete).'
  )
  return lines


def run(target: registry.Target, request) -> None:
  """Writes the plan; with --launch runs it; with --collect reads it."""
  if not target.runs:
    print(
        f'{target.key} has no pretraining runs to plan: '
        f'{target.why_plan_only}.'
    )
    return
  if request.rehearse and not request.launch and not request.collect:
    raise app.UsageError('--rehearse goes with --launch (or --collect).')
  make = _rehearsal if request.rehearse else _cloud
  settings, cloud = make(target, request)
  try:
    planned = plan.plan(target, settings)
  except ValueError as error:
    raise app.UsageError(str(error)) from error
  vms = launch_lib.vm_names(planned, cloud)
  text = plan.format_plan(target, planned, vms, cloud.zone)
  if target.why_plan_only:
    text += f'\nNot run below paper scale: {target.why_plan_only}.\n'
  tf.io.gfile.makedirs(request.out)
  json_files.write_text(
      os.path.join(request.out, f'{target.key}.plan.md'), text
  )
  json_files.write_json(
      os.path.join(request.out, f'{target.key}.plan.json'),
      plan.as_json(planned),
      sort_keys=False,
  )
  print(text)
  state_path = os.path.join(request.out, f'{target.key}.launch.json')
  if request.launch:
    _launch(target, request, planned, cloud, vms, state_path, settings.bucket)
  elif request.collect:
    print('\n'.join(launch_lib.status_lines(planned, state_path)))
    collect(target, planned, request.out, settings.bucket, request.rehearse)


def _launch(target, request, planned, cloud, vms, state_path, bucket):
  """Refuses what cannot run, states the cost, runs, writes the table."""
  refusals = [run.refusal for run in planned if run.refusal]
  if refusals:
    more = f' ({len(refusals) - 1} more runs do not fit.)'
    raise app.UsageError(refusals[0] + (more if refusals[1:] else ''))
  check_records(planned)
  _check_cloud(cloud)
  pods = [
      run.name
      for run in planned
      if fit_lib.accelerator(run.accelerator_type).hosts > 1
  ]
  if pods and not cloud.pod_runtime_version:
    raise app.UsageError(
        f'{", ".join(pods)} run on multi-host slices: give '
        '--pod_runtime_version=tpu-vm-tf-<version>-pod-pjrt, a TensorFlow pod '
        'version (see ./run_tpu.sh --help, "Pod slices").'
    )
  print('\n'.join(cost_lines(planned, vms)))
  if not (request.confirm or request.rehearse):
    print(
        'Nothing started: add --confirm to create the VMs and run the plan '
        '(or rehearse it here first with --rehearse).'
    )
    return
  outcome = launch_lib.launch(
      planned, cloud, state_path, os.path.join(request.out, 'logs')
  )
  print('\n'.join(launch_lib.status_lines(planned, state_path)))
  collect(target, planned, request.out, bucket, request.rehearse)
  failed = sorted(name for name, done in outcome.items() if done != 'finished')
  if failed:
    raise cli.UserError(
        f'{len(failed)} run(s) failed ({", ".join(failed)}); see the lines '
        'above, fix the cause and run the same command again: finished jobs '
        'are kept.'
    )


# The SQuAD columns of the papers' tables, per our metric name.
_SQUAD_COLUMNS = dict(squad11='SQuAD 1.1', squad20='SQuAD 2.0')
_SQUAD_METRICS = dict(exact_match='EM', f1='F1')


def _squad_scores(run: plan.PlannedRun) -> Dict[str, float]:
  """{'SQuAD 1.1 EM': percent, ...} of finished SQuAD jobs, over seeds."""
  scores = {}
  for stage in run.stages:
    if stage.name not in _SQUAD_COLUMNS or not tf.io.gfile.exists(
        stage.done_file
    ):
      continue
    results = json_files.read_json(stage.done_file)
    for metric, label in _SQUAD_METRICS.items():
      values = [seed['selected'][metric] for seed in results['runs']]
      scores[f'{_SQUAD_COLUMNS[stage.name]} {label}'] = aggregation.aggregate(
          values, results['protocol']['aggregation']
      )
  return scores


def run_results(glue_results: Dict, train_steps, squad) -> Dict:
  """A finished run's results as `report.rows` reads them.

  Its GLUE scores are also its curve's one point: at paper scale only the
  final checkpoint is fine-tuned.
  """
  glue = {
      task: dict(score=score, summary=glue_results['summaries'].get(task, {}))
      for task, score in glue_results['scores'].items()
  }
  return dict(
      train_steps=train_steps,
      glue=glue,
      curve={} if train_steps is None else {str(train_steps): glue},
      squad=squad,
  )


def collect(
    target: registry.Target,
    planned: Sequence[plan.PlannedRun],
    out: str,
    bucket: str,
    rehearsed: bool = False,
) -> None:
  """Writes the table of the planned runs' finished results."""
  results = {}
  for run in planned:
    path = f'{run.glue_dir}/glue_results.json'
    if not tf.io.gfile.exists(path):
      continue
    results[run.name] = run_results(
        json_files.read_json(path),
        launch_lib.trained_steps(run),
        _squad_scores(run),
    )
  header = (
      f'Scale: paper (collected from {bucket}); {len(results)} of '
      f'{len(planned)} runs finished.'
  )
  if rehearsed:
    header += (
        ' A rehearsal on this machine against a fake gcloud (steps, batches '
        'and GLUE rows capped): its numbers compare nothing.'
    )
  print(report.write(target, report.rows(target, results), header, out))
