"""Rebuilding a finished pretraining run's task on other records."""

import os
import shutil

import pytest
import tensorflow as tf

from official_repro.common import cli
from official_repro.training import experiment
from official_repro.training import saved_runs
from official_repro.training import word_order
from tests import conftest


@pytest.mark.slow
def test_a_moved_or_shuffled_copy_of_its_records_is_read(
    tiny_electra_run, tiny_records, tmp_path
):
  moved = str(tmp_path / 'moved')
  shutil.copytree(tiny_records, moved)
  shuffled = word_order.shuffled_copy(tiny_records, str(tmp_path / 'shuffled'))
  for record_dir in (moved, shuffled):
    params, task = saved_runs.pretraining_task(tiny_electra_run, record_dir)
    assert params.task.validation_data.input_path == record_dir
    batch = next(iter(task.build_inputs(params.task.validation_data)))
    assert batch['input_word_ids'].shape[1] == 32


@pytest.mark.parametrize(
    'options, difference',
    [
        (dict(max_seq_length=16), 'max_seq_length 16 where the run had 32'),
        (dict(vocab_size=None, vocab_file='VOCAB'), 'another vocabulary'),
    ],
)
def test_records_that_mean_other_tokens_are_refused_in_one_line(
    tiny_electra_run, tmp_path, options, difference
):
  if options.get('vocab_file'):
    vocab = conftest.write_fixture_vocab(tmp_path / 'vocab.txt')
    options = dict(options, vocab_file=str(vocab))
  record_dir = conftest.write_tiny_records(tmp_path, **options)
  with pytest.raises(cli.UserError) as error:
    saved_runs.pretraining_task(tiny_electra_run, record_dir)
  message = str(error.value)
  assert '\n' not in message
  assert message.startswith(
      f'--records {record_dir}: {difference}: not the records --model_dir '
  )


@pytest.mark.slow
def test_a_damaged_records_json_is_named_in_one_line(
    tiny_electra_run, tiny_records, tmp_path
):
  run = tmp_path / 'run'
  shutil.copytree(tiny_electra_run, run)
  (run / experiment.RECORDS_FILENAME).write_text('{"vocab_sha')
  with pytest.raises(cli.UserError, match='records.json is not JSON') as error:
    saved_runs.pretraining_task(str(run), tiny_records)
  assert '\n' not in str(error.value)


def test_runs_from_before_the_records_identity_are_not_checked(
    tiny_electra_run, tmp_path
):
  old_run = tmp_path / 'old_run'
  os.makedirs(old_run)
  for name in ('config.gin', 'model_config.json'):
    shutil.copy(os.path.join(tiny_electra_run, name), old_run / name)
  record_dir = conftest.write_tiny_records(tmp_path, max_seq_length=16)
  params, _ = saved_runs.pretraining_task(str(old_run), record_dir)
  assert params.task.validation_data.input_path == record_dir
  assert os.path.exists(
      os.path.join(tiny_electra_run, experiment.RECORDS_FILENAME)
  )


def test_a_checkpoint_is_found_by_its_name_and_a_missing_one_is_named(
    exported_encoder,
):
  latest = tf.train.latest_checkpoint(exported_encoder)
  name = os.path.basename(latest)
  run = saved_runs.load(exported_encoder, name)
  assert run.checkpoint == latest
  with pytest.raises(
      cli.UserError,
      match=f'--checkpoint ckpt-99: no such checkpoint in .* it has .*{name}',
  ):
    saved_runs.load(exported_encoder, 'ckpt-99')
