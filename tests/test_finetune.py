"""`official_repro.finetune`'s refusals, through the real command line.

Each command runs as a user types it (tests/cli_support.py): a non-zero
status, one line of its own on stderr naming what the user typed, no
traceback, and the files of an earlier run left as they were.
"""

import json
import shutil

import pytest

from tests import cli_support

pytestmark = pytest.mark.xdist_group(cli_support.XDIST_GROUP)


@pytest.mark.slow
def test_finetune_rerun_on_other_data_is_refused(cli, workspace, finetuned):
  encoder, model_dir = finetuned
  other = cli_support.glue(workspace / 'data_b', label_shift=1)
  cli.refused(
      [
          'official_repro.finetune',
          '--gin_file=gin/finetune/001_ale/mrpc.gin',
          f'--init_checkpoint={encoder}',
          f'--data_dir={other}',
          f'--model_dir={model_dir}',
          '--seeds=0',
          '--gin_param=finetuning.num_epochs=1',
          '--gin_param=finetuning.train_batch_size=4',
          '--gin_param=finetuning.max_seq_length=32',
      ],
      'data_digest',
      '--data_dir',
      keep=[model_dir],
  )


@pytest.mark.parametrize(
    'flags, named',
    [
        (['--gin_file=gin/finetune/001_ale/mrpcc.gin'], 'mrpcc.gin'),
        (
            [
                '--gin_file=gin/finetune/001_ale/mrpc.gin',
                '--init_checkpoint=/no/such/run',
            ],
            '/no/such/run',
        ),
        (['--gin_file=gin/finetune/001_ale/mrpc.gin', 'extra'], 'extra'),
        (
            ['--gin_file=gin/finetune/001_ale/mrpc.gin', '--seeds=a'],
            '--seeds',
        ),
    ],
)
def test_finetune_mistakes(cli, workspace, flags, named):
  cli.refused(
      [
          'official_repro.finetune',
          f'--data_dir={workspace}',
          f'--model_dir={workspace}/ft_new',
          *flags,
      ],
      named,
  )
  assert not (workspace / 'ft_new').exists()


def test_finetune_a_checkpoint_without_its_architecture_asks_gin_for_it(
    cli, workspace, tmp_path
):
  """A foreign checkpoint and no `encoder` bindings: the gin to add."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  prefix = tf.train.Checkpoint(step=tf.Variable(1)).write(
      str(tmp_path / 'foreign')
  )
  cli.refused(
      [
          'official_repro.finetune',
          '--gin_file=gin/finetune/001_ale/mrpc.gin',
          f'--init_checkpoint={prefix}',
          f'--data_dir={workspace}',
          f'--model_dir={workspace}/ft_new',
      ],
      f'--init_checkpoint {prefix} has no encoder_config.json',
      'include a gin/sizes/*.gin file and set encoder.backbone',
  )
  assert not (workspace / 'ft_new').exists()


@pytest.mark.slow
def test_finetune_diverging_is_one_line_naming_the_last_checkpoint(
    cli, workspace, exported_encoder
):
  cli.refused(
      [
          'official_repro.finetune',
          '--gin_file=gin/finetune/001_ale/mrpc.gin',
          f'--init_checkpoint={exported_encoder}',
          f'--data_dir={cli_support.glue(workspace / "data_nan")}',
          f'--model_dir={workspace}/ft_nan',
          '--seeds=0',
          '--gin_param=finetuning.num_epochs=3',
          '--gin_param=finetuning.train_batch_size=4',
          '--gin_param=finetuning.max_seq_length=32',
          '--gin_param=finetuning.learning_rate=1e12',
      ],
      'Training loss became',
      'finetuning.learning_rate',
  )


def test_finetune_refuses_a_length_beyond_the_encoders_positions(
    cli, workspace, exported_encoder
):
  """The README's flow: a 128-position config on a shorter encoder."""
  cli.refused(
      [
          'official_repro.finetune',
          '--gin_file=gin/finetune/001_ale/mrpc.gin',
          f'--init_checkpoint={exported_encoder}',
          f'--data_dir={cli_support.glue(workspace / "data_positions")}',
          f'--model_dir={workspace}/ft_positions',
          '--gin_param=finetuning.max_seq_length=256',
      ],
      'finetuning.max_seq_length = 256',
      '128 position embeddings',
      '--gin_param=finetuning.max_seq_length=128',
  )
  assert not (workspace / 'ft_positions').exists()


def test_finetune_refuses_a_vocabulary_other_than_the_encoders(
    cli, workspace, exported_encoder, tmp_path
):
  tokens = (workspace / 'records' / 'vocab.txt').read_text().split()
  other = tmp_path / 'other_vocab.txt'
  other.write_text('\n'.join(tokens[:5] + tokens[6:] + [tokens[5]]))
  cli.refused(
      [
          'official_repro.finetune',
          '--gin_file=gin/finetune/001_ale/mrpc.gin',
          f'--init_checkpoint={exported_encoder}',
          f'--vocab_file={other}',
          f'--data_dir={cli_support.glue(workspace / "data_vocab")}',
          f'--model_dir={workspace}/ft_vocab',
          '--gin_param=finetuning.max_seq_length=32',
      ],
      str(other),
      'not the vocabulary the encoder was trained with',
  )
  assert not (workspace / 'ft_vocab').exists()


def test_finetune_refuses_a_casing_the_vocabulary_does_not_have(
    cli, workspace, exported_encoder, tmp_path
):
  # The tiny encoder's vocabulary is uncased (learned lower-cased); an
  # export that says its tokenizer keeps case is a wrong conversion.
  copy = tmp_path / 'encoder'
  shutil.copytree(exported_encoder, copy)
  (tokenizer,) = copy.glob('**/tokenizer.json')
  settings = json.loads(tokenizer.read_text())
  assert settings['lower_case'] is True
  tokenizer.write_text(json.dumps(dict(settings, lower_case=False)))
  cli.refused(
      [
          'official_repro.finetune',
          '--gin_file=gin/finetune/001_ale/mrpc.gin',
          f'--init_checkpoint={copy}',
          f'--data_dir={cli_support.glue(workspace / "data_casing")}',
          f'--model_dir={tmp_path}/ft',
          '--gin_param=finetuning.max_seq_length=32',
      ],
      str(copy),
      'uncased',
      'lower_case=False',
  )
  assert not (tmp_path / 'ft').exists()
