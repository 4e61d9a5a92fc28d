"""`official_repro.train`'s refusals, through the real command line.

Each command runs as a user types it (tests/cli_support.py): a non-zero
status, one line of its own on stderr naming what the user typed, no
traceback, and the files of an earlier run left as they were.
"""

import json
import shutil

import pytest

from tests import cli_support

pytestmark = pytest.mark.xdist_group(cli_support.XDIST_GROUP)


def _train(workspace, *flags):
  return [
      'official_repro.train',
      '--gin_file=gin/sizes/tiny.gin',
      '--gin_file=gin/pretrain/masked_lm.gin',
      f"--gin_param=pretrain_data.input_path='{workspace}/records'",
      '--gin_param=pretrain_data.max_seq_length=32',
      '--gin_param=pretrain_data.train_batch_size=4',
      '--gin_param=optimization.learning_rate=1e-3',
      '--gin_param=experiment.train_steps=2',
      *flags,
  ]


def test_train_refuses_a_second_gin_file_without_its_flag(cli, workspace):
  cli.refused(
      _train(
          workspace,
          f'--model_dir={workspace}/m',
          'gin/papers/001_ale/electra_small.gin',
      ),
      'gin/papers/001_ale/electra_small.gin',
      '--gin_file',
  )
  assert not (workspace / 'm').exists()


def test_train_names_a_missing_gin_binding(cli, workspace):
  command = [
      flag
      for flag in _train(workspace, f'--model_dir={workspace}/m')
      if 'train_batch_size' not in flag
  ]
  cli.refused(command, 'pretrain_data.train_batch_size')
  assert not (workspace / 'm').exists()


@pytest.mark.parametrize(
    'flags, named',
    [
        (['--strategy=mirrored', '--num_gpus=4'], '--num_gpus=4'),
        (['--strategy=tpu'], '--strategy=tpu'),
        (['--gin_param=pretrain_data.train_batch_size=0'], 'train_batch_size'),
    ],
)
def test_train_refuses_devices_that_are_not_there_and_empty_batches(
    cli, workspace, flags, named
):
  cli.refused(_train(workspace, f'--model_dir={workspace}/m', *flags), named)
  assert not (workspace / 'm').exists()


@pytest.mark.slow
def test_train_refuses_to_resume_on_other_records(cli, workspace, tmp_path):
  run = tmp_path / 'run'
  completed = cli.run(_train(workspace, f'--model_dir={run}', '--mode=train'))
  assert completed.returncode == 0, completed.stderr[-2000:]
  other = tmp_path / 'other'
  shutil.copytree(workspace / 'records', other)
  metadata = json.loads((other / 'metadata.json').read_text())
  metadata['splits']['train']['num_examples'] += 1
  (other / 'metadata.json').write_text(json.dumps(metadata))
  command = [
      flag.replace(f'{workspace}/records', str(other))
      for flag in _train(workspace, f'--model_dir={run}', '--mode=train')
  ]
  cli.refused(command, str(run), 'other records', keep=[run])


def test_train_eval_without_a_checkpoint_is_refused(cli, workspace):
  cli.refused(
      _train(workspace, f'--model_dir={workspace}/mistyped', '--mode=eval'),
      '--mode=eval',
      'mistyped',
  )
  assert not (workspace / 'mistyped').exists()


@pytest.mark.parametrize(
    'binding, named',
    [
        ("optimization.learning_rate='1e-3'", 'without quotes'),
        ('encoder.backbone=convbert', "write a string in quotes: 'convbert'"),
        ('encoder.hiden_size=64', 'encoder.hidden_size'),
        ("experiment.objective='electra_small'", 'experiment.objective'),
        (
            'encoder.max_position_embeddings=16',
            'encoder.max_position_embeddings=32',
        ),
    ],
)
def test_train_gin_mistakes_are_named(cli, workspace, binding, named):
  cli.refused(
      _train(workspace, f'--model_dir={workspace}/m', f'--gin_param={binding}'),
      named,
  )
  assert not (workspace / 'm').exists()


def test_train_refuses_layer_sharing_a_narrow_generator(cli, workspace):
  """'partial' sharing needs a full-width generator: one line, nothing made."""
  cli.refused(
      _train(
          workspace,
          f'--model_dir={workspace}/m',
          '--gin_file=gin/pretrain/electra.gin',
          '--gin_param=electra.generator_size=0.5',
          "--gin_param=electra.layer_sharing='partial'",
      ),
      "electra.layer_sharing='partial'",
      'electra.generator_size = 1.0',
  )
  assert not (workspace / 'm').exists()
