"""SIGTERM during training: a checkpoint at the current step, then resume."""

import json
import os
import re
import signal
import subprocess
import sys
import threading

import pytest
import tensorflow as tf

from official_repro.training import gin_utils
from official_repro.training import preemption

REPO_ROOT = gin_utils.REPO_ROOT
# The trainer logs 'steps A-B: {...}' at the end of every Orbit loop
# (step_logging.LoopLog).
_LOOP_LOG = re.compile(r'steps (\d+)-(\d+): ')


def _command(records, model_dir, train_steps):
  bindings = [
      f'pretrain_data.input_path = {records!r}',
      'pretrain_data.max_seq_length = 32',
      'pretrain_data.train_batch_size = 8',
      f'experiment.train_steps = {train_steps}',
      'experiment.steps_per_loop = 1',
      # Far beyond the steps run: Orbit saves only after the first step, so a
      # later checkpoint is the one the signal asked for.
      'experiment.checkpoint_interval = 1000',
      'optimization.learning_rate = 1e-3',
  ]
  gin_files = [
      os.path.join(REPO_ROOT, 'gin', name)
      for name in ('sizes/tiny.gin', 'pretrain/masked_lm.gin')
  ]
  return (
      [
          sys.executable,
          '-m',
          'official_repro.train',
          f'--model_dir={model_dir}',
          '--strategy=cpu',
          '--mode=train',
      ]
      + [f'--gin_file={f}' for f in gin_files]
      + [f'--gin_param={b}' for b in bindings]
  )


def _loops(log):
  return [(int(a), int(b)) for a, b in _LOOP_LOG.findall(log)]


@pytest.mark.slow
def test_signal_stops_at_the_loop_end_with_a_checkpoint(
    run_tiny_electra, tmp_path
):
  before = signal.getsignal(signal.SIGTERM)
  with preemption.stop_on_signal():
    os.kill(os.getpid(), signal.SIGTERM)
    with pytest.raises(preemption.TrainingStopped) as stopped:
      run_tiny_electra(tmp_path, mode='train')
  assert signal.getsignal(signal.SIGTERM) is before
  assert stopped.value.signal_name == 'SIGTERM'
  assert stopped.value.step == 1  # of 2: the first loop's end
  assert stopped.value.checkpoint == tf.train.latest_checkpoint(str(tmp_path))
  assert stopped.value.checkpoint.endswith('ckpt-1')
  assert 'Run the same command again' in str(stopped.value)


def test_second_signal_runs_the_previous_handler():
  received = []
  previous = signal.signal(
      signal.SIGTERM, lambda number, frame: received.append(number)
  )
  try:
    with preemption.stop_on_signal():
      os.kill(os.getpid(), signal.SIGTERM)
      assert not received
      os.kill(os.getpid(), signal.SIGTERM)
      assert received == [signal.SIGTERM]
  finally:
    signal.signal(signal.SIGTERM, previous)


@pytest.mark.slow
def test_sigterm_saves_checkpoint_and_rerun_resumes(tiny_records, tmp_path):
  process = subprocess.Popen(
      _command(tiny_records, tmp_path, train_steps=1000),
      cwd=REPO_ROOT,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
  )
  lines = []
  third_step_done = threading.Event()

  def read_log():
    for line in process.stderr:
      lines.append(line)
      if any(end >= 3 for _, end in _loops(line)):
        third_step_done.set()

  reader = threading.Thread(target=read_log, daemon=True)
  reader.start()
  try:
    assert third_step_done.wait(timeout=300), ''.join(lines)[-3000:]
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith('ckpt-1')
    process.send_signal(signal.SIGTERM)
    stdout, _ = process.communicate(timeout=120)
  finally:
    if process.poll() is None:
      process.kill()
      process.wait()
  reader.join(timeout=10)
  log = ''.join(lines)
  assert process.returncode == preemption.EXIT_STOPPED, log[-3000:]
  last_step = _loops(log)[-1][1]
  assert last_step >= 3
  latest = tf.train.latest_checkpoint(str(tmp_path))
  assert latest is not None and latest.endswith(f'ckpt-{last_step}'), latest
  checkpoint = tf.train.load_checkpoint(latest)
  assert checkpoint.get_tensor('global_step/.ATTRIBUTES/VARIABLE_VALUE') == (
      last_step
  )
  stopped = json.loads(stdout[stdout.rindex('{\n  "stopped_by"') :])
  assert stopped == dict(
      stopped_by='SIGTERM', global_step=last_step, checkpoint=latest
  )

  rerun = subprocess.run(
      _command(tiny_records, tmp_path, train_steps=last_step + 2),
      cwd=REPO_ROOT,
      capture_output=True,
      text=True,
      timeout=600,
      check=False,
  )
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  loops = _loops(rerun.stderr)
  assert loops[0] == (last_step + 1, last_step + 1), loops
  assert loops[-1][1] == last_step + 2
  assert '"global_step": %d' % (last_step + 2) in rerun.stdout


def test_the_stop_check_reports_a_signal_received_in_the_context():
  check = preemption.StopCheck(tf.distribute.get_strategy())
  with preemption.stop_on_signal():
    assert check.signal_name() is None
    os.kill(os.getpid(), signal.SIGTERM)
    assert check.signal_name() == 'SIGTERM'
  assert check.signal_name() is None


def test_the_stop_checkpoint_is_saved_in_model_dir_at_the_step(tmp_path):
  step = tf.Variable(7, dtype=tf.int64)
  checkpoint = tf.train.Checkpoint(global_step=step)
  strategy = tf.distribute.get_strategy()
  path = preemption.save_checkpoint_now(
      checkpoint, step, strategy, str(tmp_path), max_to_keep=2
  )
  assert path == tf.train.latest_checkpoint(str(tmp_path))
  assert path.endswith('ckpt-7')
  with pytest.raises(ValueError, match='model_dir'):
    preemption.save_checkpoint_now(checkpoint, step, strategy, None, 2)
