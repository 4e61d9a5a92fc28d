"""Seeds, bit-identical runs, exact resume and corrupt-checkpoint fallback."""

import logging
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from official_repro.common import cli
from official_repro.data import pretrain_dataloader
from official_repro.training import gin_utils
from official_repro.training import reproducibility
from official_repro.training import preemption
from official_repro.training import trainer as trainer_lib

# The tests share module fixtures: one xdist worker runs them all
# (--dist loadgroup, pytest.ini), so the fixtures are built once.
pytestmark = pytest.mark.xdist_group('test_reproducibility')


def test_run_seed_is_kept_in_model_dir(tmp_path):
  drawn = reproducibility.run_seed(str(tmp_path), None)
  assert reproducibility.run_seed(str(tmp_path), None) == drawn
  assert reproducibility.run_seed(str(tmp_path), drawn) == drawn
  with pytest.raises(ValueError, match=f'started with seed {drawn}'):
    reproducibility.run_seed(str(tmp_path), drawn + 1)
  assert reproducibility.run_seed(str(tmp_path / 'other'), 7) == 7


def _write_checkpoints(model_dir, steps):
  step = tf.Variable(0, dtype=tf.int64)
  weight = tf.Variable(tf.zeros([64]))
  checkpoint = tf.train.Checkpoint(global_step=step, weight=weight)
  manager = tf.train.CheckpointManager(
      checkpoint, str(model_dir), max_to_keep=5
  )
  paths = []
  for value in steps:
    step.assign(value)
    weight.assign(tf.fill([64], float(value)))
    paths.append(manager.save(checkpoint_number=value))
  return paths


def test_a_corrupt_latest_checkpoint_falls_back_to_the_previous(
    tmp_path, caplog
):
  paths = _write_checkpoints(tmp_path, [1, 2, 3])
  data_file = tf.io.gfile.glob(paths[-1] + '.data-*')[0]
  with tf.io.gfile.GFile(data_file, 'rb') as f:
    content = f.read()
  with tf.io.gfile.GFile(data_file, 'wb') as f:
    f.write(content[: len(content) // 2])  # a half-written copy
  with caplog.at_level(logging.WARNING):
    path, step = reproducibility.latest_readable_checkpoint(str(tmp_path))
  assert (path, step) == (paths[1], 2)
  assert paths[-1] in caplog.text and 'Resuming from' in caplog.text
  # Orbit restores the directory's latest checkpoint: now the readable one.
  assert tf.train.latest_checkpoint(str(tmp_path)) == paths[1]


def test_a_relative_model_dir_resumes(tmp_path, monkeypatch):
  # The quickstart's default model_dir is relative: a second run must find
  # 'runs/model/ckpt-2', not 'runs/model/runs/model/ckpt-2'.
  monkeypatch.chdir(tmp_path)
  _write_checkpoints('runs/model', [1, 2])
  path, step = reproducibility.latest_readable_checkpoint('runs/model')
  assert step == 2
  assert os.path.normpath(path) == os.path.join('runs', 'model', 'ckpt-2')


def test_no_checkpoint_and_no_readable_checkpoint(tmp_path):
  assert reproducibility.latest_readable_checkpoint(str(tmp_path)) == (None, 0)
  (path,) = _write_checkpoints(tmp_path / 'run', [5])
  for data_file in tf.io.gfile.glob(path + '.data-*'):
    tf.io.gfile.remove(data_file)
  # A UserError: the command prints it as one line, not a traceback.
  with pytest.raises(cli.UserError, match='No checkpoint in .* reads back'):
    reproducibility.latest_readable_checkpoint(str(tmp_path / 'run'))


def _batches(records, start_step, count, input_context=None):
  train, _ = pretrain_dataloader.pretraining_data_configs.__wrapped__(
      input_path=records, max_seq_length=32, train_batch_size=4, seed=11
  )
  config = train.replace(start_step=start_step)
  dataset = pretrain_dataloader.PretrainDataLoader(config).load(input_context)
  return [
      {name: value.numpy() for name, value in batch.items()}
      for batch in dataset.take(count)
  ]


@pytest.mark.parametrize('replicas', [1, 2])
def test_a_resumed_stream_continues_where_the_steps_before_stopped(
    tiny_records, replicas
):
  """A resumed data stream equals the uninterrupted one.

  Records and dynamic masks from step k on equal the uninterrupted
  stream's; each step consumes one batch per replica of the pipeline.
  """
  context = (
      tf.distribute.InputContext(
          num_input_pipelines=1,
          input_pipeline_id=0,
          num_replicas_in_sync=replicas,
      )
      if replicas > 1
      else None
  )
  uninterrupted = _batches(tiny_records, 0, 8, context)
  resumed = _batches(tiny_records, 3, 8 - 3 * replicas, context)
  for expected, batch in zip(uninterrupted[3 * replicas :], resumed):
    assert expected.keys() == batch.keys()
    for name in expected:
      np.testing.assert_array_equal(batch[name], expected[name], name)
  # The masks come from the skipped seed stream, not a restarted one.
  assert not np.array_equal(
      resumed[0]['masked_lm_positions'], uninterrupted[0]['masked_lm_positions']
  )


def _final_weights(model_dir):
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir))
  return {
      name: reader.get_tensor(name)
      for name in reader.get_variable_to_shape_map()
      # The object graph holds Keras' per-process layer names.
      if not name.startswith(('save_counter', '_CHECKPOINTABLE'))
  }


_DETERMINISTIC = [
    'experiment.seed = 5',
    'experiment.deterministic = True',
    'experiment.train_steps = 4',
    'experiment.steps_per_loop = 2',
    'experiment.checkpoint_interval = 2',
    # The papers' optimizer, whose slots a resumed run must restore (the
    # run has one layer of each encoder: every kind of variable).
    "optimization.optimizer = 'lamb'",
]


@pytest.fixture(scope='module')
def whole_run(run_tiny_electra, tmp_path_factory):
  """The final weights of a deterministic 4-step run that evaluates at 2 and 4.

  Module-scoped: run once for the tests below, which compare with it.
  """
  model_dir = tmp_path_factory.mktemp('whole')
  run_tiny_electra(model_dir, _DETERMINISTIC)
  return _final_weights(str(model_dir))


@pytest.mark.slow
def test_same_seed_runs_end_bit_identical(
    run_tiny_electra, whole_run, tmp_path
):
  """A run repeated with its seed ends bit-identical; another seed does not.

  The repeat only trains (no evaluation), so this also fails if evaluating
  moves a training stream (records, masks, dropout, sampling).
  """
  run_tiny_electra(tmp_path / 'again', _DETERMINISTIC, mode='train')
  again = _final_weights(str(tmp_path / 'again'))
  assert whole_run.keys() == again.keys()
  assert any('random_generators' in name for name in again)
  for name in again:
    np.testing.assert_array_equal(again[name], whole_run[name], name)
  run_tiny_electra(
      tmp_path / 'other',
      _DETERMINISTIC[2:]
      + ['experiment.seed = 6', 'experiment.deterministic = True'],
      mode='train',
  )
  other = _final_weights(str(tmp_path / 'other'))
  embeddings = [
      name
      for name in again
      if name.startswith('encoder/') and 'embeddings/.' in name
  ]
  assert embeddings and all(
      not np.array_equal(again[name], other[name]) for name in embeddings
  )


@pytest.mark.slow
def test_a_stopped_and_resumed_run_equals_an_uninterrupted_one(
    run_tiny_electra, whole_run, tmp_path, monkeypatch
):
  """A resumed run continues where the interrupted one stopped.

  Fails if the resumed run restarts from step 0, re-reads the records or
  masks the first steps consumed, or restarts dropout or sampling; both
  evaluate after the checkpoint at step 2 (train_and_eval), which must not
  move the training streams. The signal arrives as the second loop begins,
  which then skips its steps.
  """
  loop_begin = trainer_lib.Trainer.train_loop_begin

  def signal_at_step_2(trainer):
    loop_begin(trainer)
    if int(trainer.global_step.numpy()) == 2:
      os.kill(os.getpid(), signal.SIGTERM)

  monkeypatch.setattr(trainer_lib.Trainer, 'train_loop_begin', signal_at_step_2)
  with preemption.stop_on_signal():
    with pytest.raises(preemption.TrainingStopped) as stopped:
      run_tiny_electra(tmp_path / 'resumed', _DETERMINISTIC)
  assert stopped.value.step == 2
  monkeypatch.undo()
  result = run_tiny_electra(tmp_path / 'resumed', _DETERMINISTIC)
  assert result['global_step'] == 4
  resumed = _final_weights(str(tmp_path / 'resumed'))
  assert whole_run.keys() == resumed.keys()
  for name in whole_run:
    np.testing.assert_array_equal(resumed[name], whole_run[name], name)


def _train_command(records, model_dir):
  bindings = [
      f'pretrain_data.input_path = {records!r}',
      'pretrain_data.max_seq_length = 32',
      'pretrain_data.train_batch_size = 8',
      'electra.generator_size = 0.5',
      'optimization.learning_rate = 1e-3',
      'experiment.seed = 5',
      'experiment.deterministic = True',
      'experiment.train_steps = 8',
      'experiment.steps_per_loop = 1',
      'experiment.checkpoint_interval = 1',
  ]
  gin_files = [
      os.path.join(gin_utils.REPO_ROOT, 'gin', name)
      for name in ('sizes/tiny.gin', 'pretrain/electra.gin')
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


@pytest.mark.slow
def test_a_run_killed_with_sigkill_resumes_to_the_same_weights(
    tiny_records, tmp_path
):
  """A run killed with -9 resumes to an uninterrupted run's weights.

  kill -9 once the third checkpoint exists (wherever the run is then),
  rerun: the final weights equal an uninterrupted run's.
  """
  whole, killed = tmp_path / 'whole', tmp_path / 'killed'
  subprocess.run(
      _train_command(tiny_records, whole),
      cwd=gin_utils.REPO_ROOT,
      check=True,
      capture_output=True,
      timeout=600,
  )
  process = subprocess.Popen(
      _train_command(tiny_records, killed),
      cwd=gin_utils.REPO_ROOT,
      stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL,
  )
  try:
    deadline = time.time() + 300
    while not tf.io.gfile.glob(str(killed / 'ckpt-3.index')):
      assert process.poll() is None and time.time() < deadline
      time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
  finally:
    if process.poll() is None:
      process.kill()
  stopped_at = reproducibility.checkpoint_step(
      tf.train.latest_checkpoint(str(killed))
  )
  assert 3 <= stopped_at < 8, stopped_at
  subprocess.run(
      _train_command(tiny_records, killed),
      cwd=gin_utils.REPO_ROOT,
      check=True,
      capture_output=True,
      timeout=600,
  )
  expected, resumed = _final_weights(str(whole)), _final_weights(str(killed))
  assert expected.keys() == resumed.keys()
  for name in expected:
    np.testing.assert_allclose(
        resumed[name], expected[name], rtol=0, atol=1e-6, err_msg=name
    )
