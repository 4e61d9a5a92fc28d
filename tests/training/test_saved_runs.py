"""Rebuilding a finished pretraining run's task on other records."""

import json
import os

import pytest

from official_repro.common import cli
from official_repro.data import create_pretraining_data
from official_repro.training import experiment
from official_repro.training import saved_runs
from tests import conftest


@pytest.fixture(scope='module')
def electra_run(run_tiny_electra, tmp_path_factory):
  model_dir = tmp_path_factory.mktemp('saved_electra') / 'run'
  run_tiny_electra(model_dir, mode='train')
  return str(model_dir)


def _records(root, **options):
  """Records of the `tiny_records` corpus with `options` changed."""
  corpus = conftest.write_fixture_corpus(root / 'corpus')
  settings = dict(vocab_size=120, max_seq_length=32, eval_fraction=0.1, seed=3)
  settings.update(options)
  create_pretraining_data.prepare_pretraining_data(
      [str(corpus)], str(root / 'records'), **settings
  )
  return str(root / 'records')


def test_records_with_the_runs_vocabulary_and_length_are_read(
    electra_run, tiny_records, tmp_path
):
  remasked = _records(tmp_path, masking='static', dupe_factor=2)
  for record_dir in (tiny_records, remasked):
    params, _ = saved_runs.pretraining_task(electra_run, record_dir)
    assert params.task.validation_data.input_path == record_dir


@pytest.mark.parametrize(
    'options, differing',
    [
        (dict(max_seq_length=16), 'max_seq_length differ'),
        (dict(vocab_size=None, vocab_file='VOCAB'), 'vocab_sha256 differ'),
    ],
)
def test_records_that_mean_other_tokens_are_refused_in_one_line(
    electra_run, tmp_path, options, differing
):
  if options.get('vocab_file'):
    vocab = conftest.write_fixture_vocab(tmp_path / 'vocab.txt')
    options = dict(options, vocab_file=str(vocab))
  record_dir = _records(tmp_path, **options)
  with pytest.raises(cli.UserError, match=differing) as error:
    saved_runs.pretraining_task(electra_run, record_dir)
  message = str(error.value)
  assert '\n' not in message
  assert message.startswith(f'--records {record_dir}: {differing} from ')


def test_runs_from_before_the_records_identity_are_not_checked(
    electra_run, tmp_path
):
  old_run = tmp_path / 'old_run'
  os.makedirs(old_run)
  for name in ('config.gin', 'model_config.json'):
    with open(os.path.join(electra_run, name)) as f:
      (old_run / name).write_text(f.read())
  record_dir = _records(tmp_path, max_seq_length=16)
  params, _ = saved_runs.pretraining_task(str(old_run), record_dir)
  assert params.task.validation_data.input_path == record_dir
  with open(os.path.join(electra_run, experiment.RECORDS_FILENAME)) as f:
    assert json.load(f)['max_seq_length'] == 32
