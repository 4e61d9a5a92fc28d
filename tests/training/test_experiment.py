"""End-to-end training tests on tiny configs: strategies, resume, failures."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import gin
import numpy as np
import pytest
import tensorflow as tf

from official_repro.data import pretrain_dataloader
from official_repro.data import records
from official_repro.training import experiment
from official_repro.training import gin_utils
from official_repro.training import nonfinite_loss

# The tests share module fixtures: one xdist worker runs them all
# (--dist loadgroup, pytest.ini), so the fixtures are built once.
pytestmark = pytest.mark.xdist_group('test_experiment')

REPO_ROOT = gin_utils.REPO_ROOT


def _gin_params(records, **overrides):
  params = {
      'pretrain_data.input_path': repr(records),
      'pretrain_data.max_seq_length': 32,
      'pretrain_data.train_batch_size': 8,
      'pretrain_data.eval_batch_size': 8,
      'experiment.train_steps': 2,
      'experiment.steps_per_loop': 1,
      'experiment.checkpoint_interval': 1,
      'optimization.learning_rate': 1e-3,
  }
  params.update(overrides)
  return [f'{name} = {value}' for name, value in params.items()]


def _gin_files():
  return [
      os.path.join(REPO_ROOT, 'gin/sizes/tiny.gin'),
      os.path.join(REPO_ROOT, 'gin/pretrain/masked_lm.gin'),
  ]


def _run_in_process(records, model_dir, mode='train', **overrides):
  gin.clear_config()
  try:
    gin_utils.parse_config(_gin_files(), _gin_params(records, **overrides))
    params, settings = experiment.experiment_config()
    return experiment.run(
        params, settings, tf.distribute.get_strategy(), str(model_dir), mode
    )
  finally:
    gin.clear_config()


def _train_command(records, model_dir, *extra_flags, **overrides):
  command = [
      sys.executable,
      '-m',
      'official_repro.train',
      f'--model_dir={model_dir}',
  ]
  command += [f'--gin_file={path}' for path in _gin_files()]
  command += [f'--gin_param={p}' for p in _gin_params(records, **overrides)]
  return command + list(extra_flags)


@pytest.fixture(scope='module')
def finished_run(tiny_records, tmp_path_factory):
  """A finished 2-step train_and_eval run: `(model_dir, result)`.

  Tests that write into the run's directory work on a copy (`_copy_of`).
  """
  model_dir = tmp_path_factory.mktemp('finished_run')
  return model_dir, _run_in_process(
      tiny_records, model_dir, mode='train_and_eval'
  )


def _copy_of(finished_run, tmp_path):
  copy = tmp_path / 'run'
  shutil.copytree(finished_run[0], copy)
  return copy


@pytest.mark.slow
def test_train_and_eval_writes_configs_and_metrics(finished_run):
  tmp_path, result = finished_run
  assert result['global_step'] == 2
  assert result['checkpoint'].endswith('ckpt-2')
  assert 0.0 <= result['eval']['masked_lm_accuracy'] <= 1.0
  assert result['eval']['lm_example_loss'] > 0.0
  for name in (
      'config.gin',
      'operative_config.gin',
      'params.yaml',
      'model_config.json',
  ):
    assert (tmp_path / name).exists(), name
  operative = (tmp_path / 'operative_config.gin').read_text()
  assert 'encoder.hidden_size = 32' in operative
  assert 'optimization.learning_rate = 0.001' in operative


@pytest.mark.slow
def test_mirrored_strategy_on_two_logical_cpus(tiny_records, tmp_path):
  command = _train_command(
      tiny_records,
      tmp_path,
      '--strategy=mirrored',
      '--num_cpu_devices=2',
      '--mode=train',
  )
  completed = subprocess.run(
      command,
      cwd=REPO_ROOT,
      capture_output=True,
      text=True,
      timeout=600,
      check=False,
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  assert '"num_replicas": 2' in completed.stdout
  assert '"global_step": 2' in completed.stdout
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith('ckpt-2')


@pytest.mark.slow
def test_killed_run_resumes_from_last_checkpoint(tiny_records, tmp_path):
  command = _train_command(
      tiny_records,
      tmp_path,
      '--strategy=cpu',
      '--mode=train',
      **{'experiment.train_steps': 100000},
  )
  process = subprocess.Popen(
      command,
      cwd=REPO_ROOT,
      stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL,
  )
  try:
    deadline = time.time() + 300
    while time.time() < deadline:
      latest = tf.train.latest_checkpoint(str(tmp_path))
      if latest and int(latest.rsplit('-', 1)[1]) >= 3:
        break
      assert process.poll() is None, 'training exited before the kill'
      time.sleep(0.5)
    else:
      pytest.fail('no checkpoint within 300 s')
  finally:
    process.send_signal(signal.SIGKILL)
    process.wait()
  killed_at = int(tf.train.latest_checkpoint(str(tmp_path)).rsplit('-', 1)[1])
  result = _run_in_process(
      tiny_records, tmp_path, **{'experiment.train_steps': killed_at + 2}
  )
  assert result['global_step'] == killed_at + 2


@pytest.mark.slow
def test_non_finite_loss_stops_and_keeps_last_good_checkpoint(
    tiny_records, finished_run, tmp_path
):
  tmp_path = _copy_of(finished_run, tmp_path)
  with pytest.raises(nonfinite_loss.NonFiniteLossError) as raised:
    _run_in_process(
        tiny_records,
        tmp_path,
        **{
            'experiment.train_steps': 12,
            'optimization.learning_rate': 1e30,
            'optimization.warmup_steps': 0,
        },
    )
  message = str(raised.value)
  match = re.search(r'at steps? (\d+)', message)
  assert match, message
  nan_step = int(match.group(1))
  latest = tf.train.latest_checkpoint(str(tmp_path))
  assert latest in message
  assert int(latest.rsplit('-', 1)[1]) < nan_step
  reader = tf.train.load_checkpoint(latest)
  for name in reader.get_variable_to_shape_map():
    value = reader.get_tensor(name)
    if hasattr(value, 'dtype') and value.dtype.kind == 'f':
      assert np.isfinite(value).all(), name


def test_vocab_size_mismatch_names_vocab_file(tiny_records, tmp_path):
  with pytest.raises(ValueError, match=r'encoder.vocab_size=999.*vocab.txt'):
    _run_in_process(tiny_records, tmp_path, **{'encoder.vocab_size': 999})


def test_records_with_other_seq_length(tiny_records, tmp_path):
  with pytest.raises(
      pretrain_dataloader.RecordMismatchError,
      match=r'max_seq_length=32.*expects max_seq_length=64',
  ):
    _run_in_process(
        tiny_records, tmp_path, **{'pretrain_data.max_seq_length': 64}
    )


def test_unknown_gin_binding_names_binding(tiny_records, tmp_path):
  with pytest.raises(gin_utils.GinConfigError, match=r'encoder.hiden_size'):
    _run_in_process(tiny_records, tmp_path, **{'encoder.hiden_size': 3})


def test_missing_gin_file():
  with pytest.raises(gin_utils.GinConfigError, match='no_such.gin'):
    gin_utils.parse_config(['/nonexistent/no_such.gin'], [])


@pytest.mark.parametrize(
    'bindings, message',
    [
        (
            ['optimizaton.learning_rate = 1e-3'],
            "No configurable matching 'optimizaton'. "
            "Did you mean 'optimization'?",
        ),
        (
            ['optimization.learning_rat = 1e-3'],
            'Did you mean optimization.learning_rate?',
        ),
        (
            ["optimization.learning_rate = '1e-3'"],
            r"optimization.learning_rate = '1e-3' is a str; expected float "
            r'\(write the number without quotes\)',
        ),
        (
            ['encoder.hidden_size = 12.5'],
            'encoder.hidden_size = 12.5 is a float; expected int',
        ),
        (
            ['electra.generator_size = True'],
            'electra.generator_size = True is a bool; expected float',
        ),
        (
            ['encoder.options = {}'],
            r"denylisted kwarg 'options'\. It is set by the code, not by gin; "
            r'encoder takes: backbone, hidden_size, ',
        ),
    ],
)
def test_gin_mistakes_name_the_binding_and_the_fix(bindings, message):
  gin.clear_config()
  try:
    with pytest.raises(gin_utils.GinConfigError, match=message):
      gin_utils.parse_config([], bindings)
  finally:
    gin.clear_config()


def test_every_gin_file_of_the_repository_passes_the_type_check():
  for folder, _, names in os.walk(os.path.join(gin_utils.REPO_ROOT, 'gin')):
    for name in names:
      if name.endswith('.gin'):
        gin.clear_config()
        gin_utils.parse_config([os.path.join(folder, name)], [])
  gin.clear_config()


def test_eval_without_a_checkpoint_is_refused(tiny_records, tmp_path):
  with pytest.raises(ValueError, match='--mode=eval.*holds no checkpoint'):
    _run_in_process(tiny_records, tmp_path / 'empty', mode='eval')
  assert not (tmp_path / 'empty').exists()


def test_incompatible_checkpoint_in_model_dir(
    tiny_records, finished_run, tmp_path
):
  tmp_path = _copy_of(finished_run, tmp_path)
  with pytest.raises(
      experiment.IncompatibleModelDirError,
      match=r'hidden_size: checkpoint has 32, config has 64',
  ):
    _run_in_process(
        tiny_records,
        tmp_path,
        **{'encoder.hidden_size': 64, 'experiment.train_steps': 4},
    )


@pytest.mark.slow
def test_a_run_resumed_on_other_records_is_refused_unless_asked(
    tiny_records, finished_run, tmp_path
):
  """Other text of the same vocabulary and length: refused, config kept."""
  from official_repro.data import create_pretraining_data  # pylint: disable=g-import-not-at-top
  from tests import conftest  # pylint: disable=g-import-not-at-top

  other = str(tmp_path / 'other_records')
  create_pretraining_data.prepare_pretraining_data(
      [str(conftest.write_fixture_corpus(tmp_path / 'corpus', seed=9))],
      other,
      vocab_file=os.path.join(tiny_records, 'vocab.txt'),
      max_seq_length=32,
      eval_fraction=0.1,
      seed=3,
  )
  run = _copy_of(finished_run, tmp_path)
  config = (run / 'config.gin').read_bytes()
  with pytest.raises(
      experiment.IncompatibleModelDirError, match=r'other records.*examples'
  ):
    _run_in_process(other, run, **{'experiment.train_steps': 3})
  assert (run / 'config.gin').read_bytes() == config
  result = _run_in_process(
      other,
      run,
      **{'experiment.train_steps': 3, 'experiment.other_records': True},
  )
  assert result['global_step'] == 3
  # Records moved elsewhere are the same records.
  moved = shutil.copytree(tiny_records, tmp_path / 'moved')
  experiment.check_records(
      str(_copy_of(finished_run, tmp_path / 'again')),
      experiment.pretrain_dataloader.PretrainDataConfig(input_path=str(moved)),
      other_records=False,
  )


def test_exported_encoder_loads_into_model_garden_bert(finished_run):
  # pylint: disable=g-import-not-at-top
  import json
  from official.nlp.configs import encoders as mg_encoders
  from official_repro.modeling.networks import encoders
  # pylint: enable=g-import-not-at-top
  tmp_path, result = finished_run
  path = result['exported_encoder']
  with open(tmp_path / 'encoder' / 'encoder_config.json') as f:
    config = encoders.EncoderConfig.from_args(**json.load(f))
  stock = mg_encoders.build_encoder(encoders.to_model_garden_config(config))
  status = tf.train.Checkpoint(encoder=stock).read(path)
  status.assert_existing_objects_matched()
  ours = encoders.build_encoder(config)
  tf.train.Checkpoint(encoder=ours).read(path).assert_existing_objects_matched()
  ids = tf.constant([[2, 5, 6, 3]])
  inputs = dict(
      input_word_ids=ids,
      input_mask=tf.ones_like(ids),
      input_type_ids=tf.zeros_like(ids),
  )
  np.testing.assert_allclose(
      stock(inputs)['sequence_output'].numpy(),
      ours(inputs)['sequence_output'].numpy(),
      atol=1e-5,
  )


def _model_dir_with_checkpoint(tmp_path, saved_config):
  tf.train.Checkpoint(step=tf.Variable(1)).save(str(tmp_path / 'ckpt'))
  with open(tmp_path / experiment.MODEL_CONFIG_FILENAME, 'w') as f:
    json.dump(saved_config, f)
  return str(tmp_path)


def test_model_dir_from_before_a_new_field_still_resumes(tmp_path):
  # model_config.json written before a `head_ratio` field existed.
  model_dir = _model_dir_with_checkpoint(
      tmp_path, {'encoder': {'hidden_size': 32}}
  )
  experiment.check_model_dir(
      model_dir,
      {'encoder': {'hidden_size': 32, 'head_ratio': 2}},
      defaults={'encoder': {'hidden_size': 0, 'head_ratio': 2}},
  )


def test_missing_field_counts_as_its_default(tmp_path):
  model_dir = _model_dir_with_checkpoint(
      tmp_path, {'encoder': {'hidden_size': 32}}
  )
  with pytest.raises(
      experiment.IncompatibleModelDirError,
      match=r'head_ratio: checkpoint has 2, config has 4',
  ):
    experiment.check_model_dir(
        model_dir,
        {'encoder': {'hidden_size': 32, 'head_ratio': 4}},
        defaults={'encoder': {'hidden_size': 0, 'head_ratio': 2}},
    )


def _truncate(path):
  """Keeps the first half of a file, as a copy cut short would."""
  with open(path, 'rb') as f:
    content = f.read()
  with open(path, 'wb') as f:
    f.write(content[: len(content) // 2])


@pytest.mark.slow
def test_a_corrupt_record_shard_is_named_with_step_and_checkpoint(
    run_tiny_pretraining, tiny_records, tmp_path
):
  """A truncated eval shard is met by the first evaluation.

  Training reads the intact train shard and checkpoints; the evaluation
  after step 1 meets the truncated eval shard.
  """
  records_dir = tmp_path / 'records'
  shutil.copytree(tiny_records, records_dir)
  metadata = records.load_metadata(str(records_dir))
  (train_shard,) = records.split_files(metadata, str(records_dir), 'train')
  (eval_shard,) = records.split_files(metadata, str(records_dir), 'eval')
  assert records.find_corrupt_file([train_shard, eval_shard]) is None
  _truncate(eval_shard)
  path, reason = records.find_corrupt_file([train_shard, eval_shard])
  assert path == eval_shard and 'truncated' in reason
  with pytest.raises(experiment.CorruptRecordsError) as error:
    run_tiny_pretraining(
        tmp_path / 'run',
        ['gin/pretrain/masked_lm.gin'],
        [f'pretrain_data.input_path = {str(records_dir)!r}'],
    )
  message = str(error.value)
  assert f'record file {eval_shard} is corrupt' in message
  assert 'Stopped at step 1' in message
  assert f'checkpoint is {tmp_path / "run" / "ckpt-1"}' in message
