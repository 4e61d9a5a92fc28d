"""A re-run fine-tuning command reuses or resumes a seed of equal settings."""

import json
import os
import random
import re

import gin
import pytest
import tensorflow as tf

from official_repro.modeling.networks import pretrained
from official_repro.tasks import finetuning_schedule
from official_repro.training import finetuning
from tests.training import test_finetuning as finetuning_fixtures

# The tiny exported encoder (pretrained for 2 steps on `tiny_records`).


def _finetune(
    encoder,
    data_dir,
    model_dir,
    learning_rate=1e-3,
    num_epochs=1,
    num_runs=1,
    aggregation='median',
    seeds=None,
):
  gin.clear_config()
  try:
    schedule = finetuning_schedule.FinetuningSchedule(
        task='mrpc',
        learning_rate=learning_rate,
        train_batch_size=4,
        num_epochs=num_epochs,
        warmup_fraction=0.1,
        max_seq_length=32,
    )
    protocol = finetuning_schedule.RunProtocol(
        num_runs=num_runs, aggregation=aggregation, selection='best'
    )
    return finetuning.run(
        schedule,
        protocol,
        encoder,
        data_dir,
        model_dir,
        tf.distribute.get_strategy(),
        seeds=seeds,
    )
  finally:
    gin.clear_config()


@pytest.mark.slow
def test_rerun_checks_the_saved_settings(
    exported_encoder, tmp_path, monkeypatch
):
  data_dir = finetuning_fixtures._write_glue(  # pylint: disable=protected-access
      tmp_path / 'glue', random.Random(4)
  )
  encoder = pretrained.resolve(exported_encoder)
  model_dir = str(tmp_path / 'ft')
  first = _finetune(encoder, data_dir, model_dir)
  run_dir = os.path.join(model_dir, 'seed_0')
  with open(os.path.join(run_dir, finetuning.SETTINGS_FILENAME)) as f:
    saved = json.load(f)
  assert saved['finetuning.learning_rate'] == 1e-3
  assert saved['finetuning.task'] == 'mrpc'
  assert saved['run_protocol.selection'] == 'best'
  assert saved['init_checkpoint'] == encoder.checkpoint_path
  assert saved['seed'] == 0
  assert saved['encoder.hidden_size'] == encoder.config.hidden_size
  assert 'task_config.head_dropout_rate' in saved

  # Another learning rate: the finished seed is not reused.
  with pytest.raises(
      ValueError,
      match=re.escape(
          f'{run_dir} was run with finetuning.learning_rate=0.001, '
          'this command has 0.0003; use another --model_dir or restore the '
          'settings'
      ),
  ):
    _finetune(encoder, data_dir, model_dir, learning_rate=3e-4)
  # Every differing setting is named with both values.
  with pytest.raises(ValueError) as error:
    _finetune(encoder, data_dir, model_dir, learning_rate=3e-4, num_epochs=2)
  assert (
      'finetuning.learning_rate=0.001, this command has 0.0003; '
      'finetuning.num_epochs=1, this command has 2;'
  ) in str(error.value)
  # Nor is an interrupted one resumed from its checkpoint.
  result_path = os.path.join(run_dir, finetuning.RESULT_FILENAME)
  os.rename(result_path, result_path + '.aside')
  with pytest.raises(ValueError, match='finetuning.learning_rate=0.001'):
    _finetune(encoder, data_dir, model_dir, learning_rate=3e-4)
  os.rename(result_path + '.aside', result_path)

  # The same settings (more seeds requested, aggregated otherwise, which do
  # not change a seed's run): reused without building a trainer.
  def no_training(*unused_args, **unused_kwargs):
    raise AssertionError('a finished seed was trained again')

  monkeypatch.setattr(finetuning.train_utils, 'create_trainer', no_training)
  again = _finetune(
      encoder, data_dir, model_dir, num_runs=5, aggregation='max', seeds=[0]
  )
  assert again['runs'] == first['runs']
  with open(os.path.join(run_dir, finetuning.SETTINGS_FILENAME)) as f:
    assert json.load(f) == saved


def test_check_settings_without_training(tmp_path, caplog):
  run_dir = str(tmp_path / 'seed_3')
  settings = {
      'seed': 3,
      'finetuning.learning_rate': 1e-4,
      'task_config.doc_stride': 128,
  }
  # A new run records its settings.
  finetuning.check_settings(run_dir, settings)
  path = os.path.join(run_dir, finetuning.SETTINGS_FILENAME)
  with open(path) as f:
    assert json.load(f) == settings
  # Killed before its first checkpoint: nothing to reuse, so other settings
  # replace the saved ones.
  other = dict(settings, **{'finetuning.learning_rate': 2e-4})
  finetuning.check_settings(run_dir, other)
  with open(path) as f:
    assert json.load(f) == other
  # Started (an evaluation in its history): settings must match.
  with open(os.path.join(run_dir, finetuning.HISTORY_FILENAME), 'w') as f:
    json.dump([{'step': 1}], f)
  finetuning.check_settings(run_dir, other)
  changed = {
      'seed': 3,
      'finetuning.learning_rate': 1e-4,
      'task_config.n_best_size': 20,
  }
  with pytest.raises(finetuning.SettingsMismatchError) as error:
    finetuning.check_settings(run_dir, changed)
  assert str(error.value) == (
      f'{run_dir} was run with finetuning.learning_rate=0.0002, this command '
      'has 0.0001; task_config.doc_stride=128, this command has <not set>; '
      'task_config.n_best_size=<not set>, this command has 20; use another '
      f'--model_dir or restore the settings (saved in {path}).'
  )
  # A finished run from before settings were saved is reused with a warning
  # (and no settings are made up for it).
  legacy_dir = str(tmp_path / 'seed_4')
  os.makedirs(legacy_dir)
  with open(os.path.join(legacy_dir, finetuning.RESULT_FILENAME), 'w') as f:
    json.dump({'seed': 4}, f)
  caplog.set_level('WARNING', logger='absl')
  finetuning.check_settings(legacy_dir, settings)
  assert 'its settings cannot be checked; reusing it' in caplog.text
  assert os.listdir(legacy_dir) == [finetuning.RESULT_FILENAME]


@pytest.mark.parametrize(
    'name, value',
    [
        ('finetuning.adam_bias_correction', True),
        ('finetuning.warmup_times_decay', False),
        ('finetuning.summed_loss', False),
        ('run_protocol.deterministic', False),
        ('task_config.double_unordered', False),
        ('task_config.scale_stsb_targets', False),
    ],
)
def test_a_run_saved_before_an_option_existed_had_its_default(
    tmp_path, name, value
):
  """Resumed with the default: accepted; with the other value: refused."""
  run_dir = str(tmp_path / 'seed_0')
  os.makedirs(run_dir)
  saved = {'seed': 0, 'finetuning.learning_rate': 1e-4}
  with open(os.path.join(run_dir, finetuning.SETTINGS_FILENAME), 'w') as f:
    json.dump(saved, f)
  with open(os.path.join(run_dir, finetuning.HISTORY_FILENAME), 'w') as f:
    json.dump([{'step': 1}], f)
  finetuning.check_settings(run_dir, {**saved, name: value})
  with pytest.raises(finetuning.SettingsMismatchError, match=name):
    finetuning.check_settings(run_dir, {**saved, name: not value})
