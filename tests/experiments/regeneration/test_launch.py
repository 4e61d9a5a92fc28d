"""The launch's scheduling of stages onto VMs, with a stand-in run_tpu.sh."""

import os
import stat
import types

import pytest

from experiments.regeneration import launch
from experiments.regeneration import plan

# Logs its start and end, takes half a second, then writes its done file.
_FAKE_RUN_TPU = """#!/usr/bin/env bash
for word in "$@"; do
  case "$word" in
    --tpu_name=*) vm="${word#*=}" ;;
    --done=*) done_file="${word#*=}" ;;
  esac
done
echo "start $vm $(date +%s.%N)" >> "$EVENTS"
sleep 0.5
echo "end $vm $(date +%s.%N)" >> "$EVENTS"
touch "$done_file"
"""


def _planned(root, count):
  runs = []
  for index in range(count):
    done = os.path.join(root, f'run{index}.done')
    stage = plan.Stage(
        name='glue',
        model_dir=os.path.join(root, f'run{index}'),
        done_file=done,
        flags=(f'--done={done}',),
    )
    runs.append(
        types.SimpleNamespace(
            name=f'run{index}',
            model_dir=stage.model_dir,
            accelerator_type='v3-8',
            train_steps=1,
            stages=(stage,),
        )
    )
  return runs


def _intervals(events_path):
  """[(start, end)] of every job, from the fake's log."""
  starts, intervals = {}, []
  with open(events_path) as f:
    for line in f:
      kind, vm, time = line.split()
      if kind == 'start':
        starts[vm] = float(time)
      else:
        intervals.append((starts.pop(vm), float(time)))
  return sorted(intervals)


def _overlaps(intervals):
  return any(b[0] < a[1] for a, b in zip(intervals, intervals[1:]))


@pytest.mark.parametrize(
    'concurrent_jobs, overlapping', [(1, False), (None, True)]
)
def test_concurrent_jobs_bounds_the_stages_running_at_once(
    tmp_path, monkeypatch, concurrent_jobs, overlapping
):
  fake = tmp_path / 'run_tpu.sh'
  fake.write_text(_FAKE_RUN_TPU)
  fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
  monkeypatch.setattr(launch, '_RUN_TPU', str(fake))
  monkeypatch.setattr(launch, '_POLL_SECONDS', 0.05)
  events = tmp_path / 'events'
  cloud = launch.Cloud(
      zone='z',
      tpu_names=('a', 'b', 'c'),
      env=dict(os.environ, EVENTS=str(events)),
      concurrent_jobs=concurrent_jobs,
  )
  outcome = launch.launch(
      _planned(str(tmp_path), 3),
      cloud,
      str(tmp_path / 'state.json'),
      str(tmp_path / 'logs'),
      say=lambda line: None,
  )
  assert outcome == {f'run{index}': 'finished' for index in range(3)}
  intervals = _intervals(events)
  assert len(intervals) == 3
  assert _overlaps(intervals) == overlapping
