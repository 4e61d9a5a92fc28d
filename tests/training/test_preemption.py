"""SIGTERM during training: a checkpoint at the current step, then resume."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import tensorflow as tf

from official_repro.common import cli
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


def test_a_signal_sets_the_step_gate_while_tensorflow_runs():
  """The gate is set during a `tf.function` call, not after it returns.

  The loop below runs until the gate is set, or for about 10 s (`limit`
  steps); Python's own handler would run only after it returned.
  """
  limit = 400_000
  with pytest.raises(cli.Interrupted), preemption.stop_on_signal():
    gate = preemption.step_gate()
    matrix = tf.Variable(tf.eye(64))

    @tf.function
    def steps_until_stopped(limit):
      steps = tf.constant(0)
      while steps < limit and not gate:
        matrix.assign(tf.tanh(matrix @ matrix))
        steps += 1
      return steps

    steps_until_stopped(tf.constant(1))
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
    started = time.perf_counter()
    timer.start()
    steps = int(steps_until_stopped(tf.constant(limit)))
    seconds = time.perf_counter() - started
    timer.join()
    assert bool(gate.numpy())
  assert steps < limit // 2, (seconds, steps)  # Stopped early.
  assert not bool(gate.numpy())  # Cleared for the next context.


@pytest.mark.slow
def test_a_signal_before_training_stops_before_the_first_step(
    run_tiny_electra, tmp_path
):
  before = signal.getsignal(signal.SIGINT)
  loop = ['experiment.steps_per_loop = 200', 'experiment.train_steps = 200']
  with preemption.stop_on_signal():
    os.kill(os.getpid(), signal.SIGINT)
    with pytest.raises(preemption.TrainingStopped) as stopped:
      run_tiny_electra(
          tmp_path, [*loop, 'experiment.checkpoint_interval = 200'], 'train'
      )
  assert signal.getsignal(signal.SIGINT) is before
  assert stopped.value.signal_name == 'SIGINT'
  assert stopped.value.signal_number == signal.SIGINT
  # Not at the loop's end (step 200): the loop skipped all its steps.
  assert stopped.value.step == 0
  assert stopped.value.checkpoint == tf.train.latest_checkpoint(str(tmp_path))
  assert stopped.value.checkpoint.endswith('ckpt-0')
  assert 'Run the same command again' in str(stopped.value)


def test_second_signal_runs_the_previous_handler():
  received = []
  previous = signal.signal(
      signal.SIGTERM, lambda number, frame: received.append(number)
  )
  try:
    with pytest.raises(cli.Interrupted), preemption.stop_on_signal():
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
    stdout = process.stdout.read()  # stderr is the reader thread's.
    process.wait(timeout=120)
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
  with pytest.raises(cli.Interrupted), preemption.stop_on_signal():
    assert check.signal_name() is None
    os.kill(os.getpid(), signal.SIGTERM)
    assert check.signal_name() == 'SIGTERM'
  assert check.signal_name() is None


def test_a_signal_after_the_last_step_ends_the_command_as_the_block_returns():
  """In evaluation or export no step comes to stop at: the block finishes."""
  finished = []
  with pytest.raises(KeyboardInterrupt):
    with preemption.stop_on_signal():
      os.kill(os.getpid(), signal.SIGINT)
      finished.append(True)
  assert finished == [True]
  with preemption.stop_on_signal():  # The next context starts clear.
    pass


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


def _start_and_wait(command, wait_for, seconds_after):
  """Starts `command`, waits for `wait_for` in its log, then `seconds_after`.

  Returns the process and its stderr lines so far, which a thread keeps
  reading.
  """
  process = subprocess.Popen(
      command,
      cwd=REPO_ROOT,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
  )
  lines, seen = [], threading.Event()

  def read_log():
    for line in process.stderr:
      lines.append(line)
      if wait_for in line:
        seen.set()

  reader = threading.Thread(target=read_log, daemon=True)
  reader.start()
  process.reader = reader
  if not seen.wait(timeout=300):
    process.kill()
    raise AssertionError(''.join(lines)[-3000:])
  time.sleep(seconds_after)
  return process, lines


@pytest.mark.slow
def test_ctrl_c_inside_a_loop_saves_within_seconds_and_the_rerun_resumes(
    tiny_records, tmp_path
):
  """One loop of 100,000 steps: Ctrl-C stops it after its current step."""
  command = _command(tiny_records, tmp_path, train_steps=100_000) + [
      '--gin_param=experiment.steps_per_loop = 100000',
      '--gin_param=experiment.checkpoint_interval = 100000',
  ]
  process, lines = _start_and_wait(command, 'training until step', 10)
  try:
    process.send_signal(signal.SIGINT)
    stdout = process.stdout.read()  # stderr is the reader thread's.
    process.wait(timeout=120)
  finally:
    if process.poll() is None:
      process.kill()
  process.reader.join(timeout=30)
  log = ''.join(lines)
  assert process.returncode == 128 + signal.SIGINT, log[-3000:]
  assert 'Traceback' not in log
  resume_lines = [line for line in lines if 'Run the same command' in line]
  assert len(resume_lines) == 1, resume_lines
  stopped = json.loads(stdout[stdout.rindex('{\n  "stopped_by"') :])
  step = stopped['global_step']
  # Stopped inside the loop (not after its 100,000 steps, which would take
  # far longer than wait()'s 120 s); no wall-clock bound of its own, which
  # would depend on the machine's load.
  assert stopped['stopped_by'] == 'SIGINT' and 0 < step < 100_000, stopped
  latest = tf.train.latest_checkpoint(str(tmp_path))
  assert latest == stopped['checkpoint'] and latest.endswith(f'ckpt-{step}')

  rerun = subprocess.run(
      _command(tiny_records, tmp_path, train_steps=step + 2),
      cwd=REPO_ROOT,
      capture_output=True,
      text=True,
      timeout=600,
      check=False,
  )
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert _loops(rerun.stderr)[0] == (step + 1, step + 1)


_LONG_CALL = """
import os, signal, sys, threading
import tensorflow as tf
from official_repro.training import preemption
matrix = tf.Variable(tf.eye(64))
def step(i):
  with tf.control_dependencies([matrix.assign(tf.tanh(matrix @ matrix))]):
    return i + 1
@tf.function(autograph=False)  # No source to convert in `python -c`.
def forever():
  tf.while_loop(lambda i: i < 10**9, step, [tf.constant(0)])
with preemption.stop_on_signal():
  print('running', flush=True)
  forever()
"""


@pytest.mark.slow
def test_a_second_ctrl_c_inside_tensorflow_ends_the_process_at_once():
  process = subprocess.Popen(
      [sys.executable, '-c', _LONG_CALL],
      cwd=REPO_ROOT,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
  )
  assert process.stdout.readline() == 'running\n', process.stderr.read()
  time.sleep(2)  # Inside forever().
  process.send_signal(signal.SIGINT)
  time.sleep(1)
  assert process.poll() is None  # The first one waits for the step.
  process.send_signal(signal.SIGINT)
  _, stderr = process.communicate(timeout=30)
  assert process.returncode == 128 + signal.SIGINT
  assert 'stopped at once by a second signal' in stderr
  assert 'Traceback' not in stderr
