"""The long-horizon discriminator run: its stop rule, command and report."""

import json
import os
import signal
import subprocess
import sys

import gin
import pytest

from experiments.investigations import discriminator_horizon
from official_repro.common import cli
from official_repro.training import gin_utils

pytestmark = pytest.mark.slow


def test_the_targets_need_recall_above_and_auc_at_least():
  curve = {
      1000: dict(discriminator_recall=0.5, discriminator_auc=0.79),
      2000: dict(discriminator_recall=0.2, discriminator_auc=0.9),
      3000: dict(discriminator_recall=0.21, discriminator_auc=0.8),
      4000: dict(discriminator_recall=0.9, discriminator_auc=0.95),
  }
  assert discriminator_horizon.first_step_meeting(curve, 0.2, 0.8) == 3000
  assert discriminator_horizon.first_step_meeting(curve, 0.95, 0.8) is None


def test_the_command_trains_the_cpu_scale_on_the_long_schedule():
  command = discriminator_horizon.train_command(
      discriminator_horizon.RUNS['script'],
      '/records',
      '/run',
      max_steps=30000,
      eval_every=1000,
      held_out_steps=20,
      mixed_precision='bfloat16',
  )
  gin_files = [
      a.split('=', 1)[1] for a in command if a.startswith('--gin_file')
  ]
  assert gin_files == [
      'gin/papers/004_script/small.gin',
      'gin/regenerate/cpu.gin',
      'gin/regenerate/cpu_adamw.gin',
      'gin/regenerate/cpu_script.gin',
  ]
  for expected in (
      '--gin_param=experiment.train_steps = 30000',
      '--gin_param=optimization.warmup_steps = 3000',
      '--gin_param=experiment.validation_interval = 1000',
      "--gin_param=pretrain_data.input_path='/records'",
      '--mode=train_and_eval',
      '--mixed_precision=bfloat16',
      '--model_dir=/run',
  ):
    assert expected in command


@pytest.mark.parametrize(
    'run, optimizer, learning_rate, whole_block',
    [
        ('electra', 'adamw', 2e-3, True),
        ('electra_word_tied', 'adamw', 2e-3, False),
        ('electra_lamb', 'lamb', 2e-2, False),
    ],
)
def test_the_electra_runs_train_with_their_optimizer(
    run, optimizer, learning_rate, whole_block
):
  """The gin the command parses ends with the run's optimizer and rate.

  And with its embedding tying: 001's whole block, except for the run that
  ties the word table only, as Model Garden does, and the LAMB run made
  before 001's gin file set it.
  """
  command = discriminator_horizon.train_command(
      discriminator_horizon.RUNS[run],
      '/records',
      '/run',
      max_steps=30000,
      eval_every=1000,
      held_out_steps=20,
      mixed_precision='float32',
  )
  files = [a.split('=', 1)[1] for a in command if a.startswith('--gin_file')]
  params = [a.split('=', 1)[1] for a in command if a.startswith('--gin_param')]
  try:
    gin_utils.parse_config(files, params)
    assert gin.query_parameter('optimization.optimizer') == optimizer
    assert gin.query_parameter('optimization.learning_rate') == learning_rate
    assert gin.query_parameter('electra.temperature') == 0.8
    assert gin.query_parameter('electra.tie_embedding_block') is whole_block
  finally:
    gin.clear_config()


def test_a_run_directory_belongs_to_one_horizon_run(tmp_path):
  runs = discriminator_horizon.RUNS
  claim = discriminator_horizon.claim_model_dir
  claim(str(tmp_path), runs['electra'], 'bfloat16')
  claim(str(tmp_path), runs['electra'], 'bfloat16')
  with pytest.raises(cli.UserError, match="holds the horizon run 'electra'"):
    claim(str(tmp_path), runs['electra_lamb'], 'bfloat16')
  with pytest.raises(cli.UserError, match='in bfloat16, not .* in --mixed'):
    claim(str(tmp_path), runs['electra'], 'float32')
  assert discriminator_horizon.read_claim(str(tmp_path))['mixed_precision'] == (
      'bfloat16'
  )
  # A directory claimed before precisions were kept resumes in any.
  legacy = tmp_path / 'legacy'
  legacy.mkdir()
  (legacy / discriminator_horizon.RUN_FILENAME).write_text(
      json.dumps(dict(run='electra', bindings=list(runs['electra'].bindings)))
  )
  claim(str(legacy), runs['electra'], 'float32')
  with pytest.raises(cli.UserError, match="holds the horizon run 'electra'"):
    claim(str(legacy), runs['electra_lamb'], 'float32')


def test_report_gives_the_curve_the_verdict_and_the_public_points(tmp_path):
  curve = {
      1000: dict(
          discriminator_auc=0.62,
          discriminator_recall=0.0,
          discriminator_accuracy=0.88,
          masked_lm_accuracy=0.2,
      ),
      2000: dict(
          discriminator_auc=0.81,
          discriminator_recall=0.25,
          discriminator_accuracy=0.9,
          masked_lm_accuracy=0.3,
      ),
  }
  path = discriminator_horizon.write_report(
      discriminator_horizon.RUNS['electra'],
      curve,
      ['python', '-m', 'x'],
      str(tmp_path / 'new' / 'reports'),  # written where nothing is yet
      0.2,
      0.8,
      30000,
      'bfloat16',
  )
  text = open(path).read()
  assert 'computed in mixed bfloat16 (float32 variables)' in text
  assert 'first at step 2,000' in text
  assert '| 1,000 | 0.620 | 0.000 | 0.880 | 0.200 |' in text
  assert '| google-research/electra issue #81 |' in text
  tmp_path = tmp_path / 'new' / 'reports'
  assert (tmp_path / 'discriminator_horizon_electra.png').exists()
  data = json.loads(
      (tmp_path / 'discriminator_horizon_electra.json').read_text()
  )
  assert data['first_step_meeting_targets'] == 2000


def test_a_float32_run_reports_beside_the_bfloat16_run(tmp_path):
  """Both precisions of one run keep their own files in one directory."""
  curve = {1000: dict(discriminator_auc=0.6, discriminator_recall=0.0)}
  paths = {
      precision: discriminator_horizon.write_report(
          discriminator_horizon.RUNS['electra'],
          curve,
          ['python'],
          str(tmp_path),
          0.2,
          0.8,
          30000,
          precision,
      )
      for precision in ('bfloat16', 'float32', None)
  }
  assert (
      os.path.basename(paths['bfloat16']) == 'discriminator_horizon_electra.md'
  )
  assert os.path.basename(paths['float32']) == (
      'discriminator_horizon_electra_float32.md'
  )
  assert paths[None] == paths['bfloat16']
  assert 'computed in float32,' in open(paths['float32']).read()
  assert (tmp_path / 'discriminator_horizon_electra_float32.png').exists()
  assert (
      json.loads(
          (tmp_path / 'discriminator_horizon_electra_float32.json').read_text()
      )['mixed_precision']
      == 'float32'
  )


_STAND_IN_JOB = """
import os, signal, sys, time
import tensorflow as tf

model_dir, recalls = sys.argv[1], [float(r) for r in sys.argv[2].split(',')]
long_pause_after = int(sys.argv[3])  # the step the driver should stop at
stopped = os.path.join(model_dir, 'stopped_at')


def on_term(signum, frame):
  with open(stopped, 'w') as f:
    f.write(str(step))
  sys.exit(0)


signal.signal(signal.SIGTERM, on_term)
writer = tf.summary.create_file_writer(os.path.join(model_dir, 'validation'))
for step, recall in zip(range(1000, 1000 * len(recalls) + 1, 1000), recalls):
  # As Orbit: the checkpoint of a step is written before its evaluation.
  with open(os.path.join(model_dir, f'ckpt-{step}.index'), 'w'):
    pass
  with open(os.path.join(model_dir, 'checkpoint'), 'w') as f:
    f.write(f'model_checkpoint_path: "ckpt-{step}"')
  with writer.as_default(step=step):
    tf.summary.scalar('discriminator_recall', recall)
    tf.summary.scalar('discriminator_auc', 0.9)
  writer.flush()
  # A driver that stops in time never sees the next step.
  time.sleep(60.0 if step == long_pause_after else 0.2)
"""


@pytest.mark.parametrize(
    'recalls, stop_at_step, stopped_at, exit_code',
    [
        # The stop step, targets unmet: killed at its last checkpoint.
        ('0,0,0,0,0', 2000, 2000, -signal.SIGKILL),
        # The targets, before the stop step: SIGTERM, handled by the job.
        ('0,0.5,0,0,0', 4000, 2000, 0),
    ],
)
def test_the_job_is_stopped_at_the_targets_or_the_stop_step(
    tmp_path, monkeypatch, recalls, stop_at_step, stopped_at, exit_code
):
  """A stand-in job evaluates a step at a time until the driver stops it."""
  job = tmp_path / 'job.py'
  job.write_text(_STAND_IN_JOB)
  model_dir = tmp_path / 'run'
  model_dir.mkdir()
  popen = subprocess.Popen
  jobs = []

  def recording_popen(*args, **kwargs):
    jobs.append(popen(*args, **kwargs))
    return jobs[-1]

  monkeypatch.setattr(subprocess, 'Popen', recording_popen)

  def run():
    return discriminator_horizon.train_until_targets(
        [sys.executable, str(job), str(model_dir), recalls, str(stopped_at)],
        str(model_dir),
        max_steps=5000,
        recall_target=0.2,
        auc_target=0.8,
        poll_seconds=0.1,
        stop_at_step=stop_at_step,
    )

  curve = run()
  assert max(curve) == stopped_at
  assert jobs[0].returncode == exit_code
  if exit_code == 0:
    assert (model_dir / 'stopped_at').read_text() == str(stopped_at)
  # Rerun: nothing left to do, so no job is started.
  run()
  assert len(jobs) == 1
