"""A user's mistakes, through the real command lines: one line, nothing lost.

Every entry point gets mistakes a new user makes. Each runs in a process of
its own, as typed in a shell (`python -m ...` in a fork of a warm
interpreter, `tests/warm_interpreter.py`, which saves the imports of
TensorFlow), and must end with a non-zero status, print exactly one line of
its own on stderr (TensorFlow's and absl's log lines aside) that names what
the user typed, print no traceback, and leave the files of an earlier run
byte-identical.

The refusals of `official_repro.train` and `official_repro.finetune` are in
tests/test_train.py and tests/test_finetune.py; the runner and the checks
(`cli`) are tests/cli_support.py's, the fixtures tests/conftest.py's.
"""

import os
import shutil
import subprocess

import pytest

from tests import cli_support

# The tests share module fixtures and, with test_train.py and
# test_finetune.py, session ones: one xdist worker runs them all
# (--dist loadgroup, pytest.ini), so the fixtures are built once.
pytestmark = pytest.mark.xdist_group(cli_support.XDIST_GROUP)


# --- official_repro.quickstart


@pytest.mark.slow
def test_quickstart_refuses_a_positional_path(cli, workspace):
  cli.refused(
      [
          'official_repro.quickstart',
          f'--work_dir={workspace}/qs',
          '/tmp/elsewhere',
      ],
      '/tmp/elsewhere',
  )
  assert not (workspace / 'qs').exists()


@pytest.mark.parametrize(
    'flag, named',
    [
        ('--gin_param=encoder.hiden_size=64', 'encoder.hidden_size'),
        ('--strategy=gpu', '--strategy'),
        ('--vocab_size=3', '--vocab_size'),
    ],
)
def test_quickstart_flag_mistakes(cli, workspace, flag, named):
  cli.refused(
      ['official_repro.quickstart', f'--work_dir={workspace}/qs', flag], named
  )
  assert not (workspace / 'qs').exists()


def test_a_work_dir_that_is_a_file_is_named(cli, workspace):
  taken = workspace / 'a_file'
  taken.write_text('a file of the user\n')
  cli.refused(
      ['official_repro.quickstart', f'--work_dir={taken}'],
      f'{taken} (or a folder above it) is a file where a folder is expected',
      keep=[taken],
  )


# --- official_repro.data.create_pretraining_data


def _records_command(workspace, *flags):
  return [
      'official_repro.data.create_pretraining_data',
      f'--input={workspace}/corpus',
      f'--output_dir={workspace}/records',
      f'--vocab_file={workspace}/records/vocab.txt',
      '--max_seq_length=32',
      *flags,
  ]


def test_records_bad_length_keeps_the_complete_records(cli, workspace):
  cli.refused(
      _records_command(workspace, '--max_seq_length=3'),
      '--max_seq_length',
      keep=[workspace / 'records'],
  )


def test_records_duplicate_vocabulary_keeps_the_complete_records(
    cli, workspace
):
  command = _records_command(workspace)
  command[3] = f'--vocab_file={workspace}/duplicate_vocab.txt'
  cli.refused(
      command,
      'duplicate_vocab.txt',
      'duplicate token',
      keep=[workspace / 'records'],
  )


@pytest.mark.parametrize(
    'corpus, named',
    [
        ('latin1', 'book.txt is not UTF-8: byte 6'),
        ('binary', 'noise.txt is not UTF-8: byte 128'),
        ('utf16', 'book.txt is UTF-16LE, not UTF-8'),
        ('utf16_bom', 'book.txt is UTF-16LE, not UTF-8'),
        ('spaced', 'of its words are single letters'),
    ],
)
def test_records_refuse_a_file_that_is_not_utf8(cli, workspace, corpus, named):
  command = _records_command(workspace)
  command[1] = f'--input={workspace}/{corpus}'
  cli.refused(command, named, keep=[workspace / 'records'])


@pytest.mark.parametrize(
    'flags, named',
    [
        (['--max_seq_length=100000'], '--allow_long_sequences'),
        (['--vocab_size=10'], '--vocab_size=10 cannot hold'),
    ],
)
def test_records_refuse_a_size_no_user_means(
    cli, workspace, tmp_path, flags, named
):
  command = [
      flag
      for flag in _records_command(workspace)
      if not flag.startswith(('--vocab_file', '--output_dir', '--max_seq'))
  ]
  command += [f'--output_dir={tmp_path}/out', *flags]
  if not any(flag.startswith('--vocab_size') for flag in flags):
    command.append(f'--vocab_file={workspace}/records/vocab.txt')
  else:
    command.append('--max_seq_length=32')
  cli.refused(command, named)
  assert not (tmp_path / 'out' / 'metadata.json').exists()


@pytest.fixture
def full_disk(tmp_path):
  """A small tmpfs (the tests run as root), unmounted after the test."""
  disk = tmp_path / 'disk'
  disk.mkdir()
  mounted = subprocess.run(
      ['mount', '-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', str(disk)],
      capture_output=True,
      check=False,
  )
  if mounted.returncode:
    pytest.skip(f'cannot mount a tmpfs here: {mounted.stderr!r}')
  try:
    yield disk
  finally:
    subprocess.run(['umount', '-l', str(disk)], check=False)


def test_records_rerun_on_a_full_disk_keeps_the_complete_records(
    cli, workspace, full_disk
):
  """A real full disk: the rerun's staging fills it; the old records stay."""
  records = full_disk / 'records'
  shutil.copytree(workspace / 'records', records)
  free = shutil.disk_usage(full_disk).free
  (full_disk / 'ballast').write_bytes(b'x' * max(0, free - 8192))
  command = _records_command(workspace)
  command[2] = f'--output_dir={records}'
  command[3] = f'--vocab_file={records}/vocab.txt'
  cli.refused(command, 'No space left on device', keep=[records])
  leftovers = sorted(os.listdir(full_disk))
  assert leftovers == ['ballast', 'records'], leftovers


def test_records_missing_input_is_named(cli, workspace):
  command = _records_command(workspace)
  command[1] = f'--input={workspace}/no_such_corpus'
  cli.refused(command, 'no_such_corpus', keep=[workspace / 'records'])


# --- official_repro.count_flops


@pytest.mark.parametrize(
    'flags, named',
    [
        (
            [
                '--gin_file=gin/papers/001_ale/electra_small.gin',
                '--flops_budget=-1e18',
            ],
            '--flops_budget',
        ),
        ([], '--gin_file'),
        (
            [
                '--gin_file=gin/papers/001_ale/electra_small.gin',
                '--gin_param=encoder.hidden_size=12.5',
            ],
            'encoder.hidden_size',
        ),
        (['--gin_file=gin/finetune/001_ale/mrpc.gin'], 'not a fine-tuning one'),
    ],
)
def test_count_flops_mistakes(cli, flags, named):
  cli.refused(['official_repro.count_flops', *flags], named)


# --- official_repro.score


@pytest.mark.parametrize(
    'flags, named',
    [
        (['--method=bogus'], '--method'),
        (['--batch_size=0'], '--batch_size'),
        (['--input=/no/such/sentences.txt'], '/no/such/sentences.txt'),
        (['--input={workspace}'], '{workspace} is a folder where a file'),
    ],
)
def test_score_mistakes(cli, workspace, finetuned, flags, named):
  encoder, _ = finetuned
  sentences = workspace / 'sentences.txt'
  sentences.write_text('the cat sat on the mat\n')
  cli.refused(
      [
          'official_repro.score',
          f'--init_checkpoint={encoder}',
          f'--input={sentences}',
          *[flag.format(workspace=workspace) for flag in flags],
      ],
      named.format(workspace=workspace),
  )


def test_score_refuses_latin1_and_an_unwritable_output_before_scoring(
    cli, workspace, finetuned, tmp_path
):
  encoder, _ = finetuned
  latin1 = tmp_path / 'latin1.txt'
  latin1.write_bytes('un caf\u00e9\n'.encode('latin-1'))
  cli.refused(
      [
          'official_repro.score',
          f'--init_checkpoint={encoder}',
          f'--input={latin1}',
      ],
      'latin1.txt line 1: not valid UTF-8',
      'at byte 6',
  )
  sentences = tmp_path / 'sentences.txt'
  sentences.write_text('the cat sat\n')
  # A folder that cannot be made (a file is in the way; the tests run as
  # root, who writes into read-only folders).
  (tmp_path / 'taken').write_text('a file')
  cli.refused(
      [
          'official_repro.score',
          f'--init_checkpoint={encoder}',
          f'--input={sentences}',
          f'--output={tmp_path}/taken/scores.tsv',
      ],
      '--output',
      'cannot be written',
  )


def test_score_refuses_a_run_that_is_not_scripts(cli, workspace, finetuned):
  encoder, _ = finetuned
  sentences = workspace / 'sentences.txt'
  sentences.write_text('the cat sat on the mat\n')
  cli.refused(
      [
          'official_repro.score',
          f'--init_checkpoint={encoder}',
          f'--input={sentences}',
      ],
      'SCRIPT',
      keep=[encoder],
  )


# --- official_repro.rescore


@pytest.mark.parametrize(
    'line, named',
    [
        ('u1\t-1\t-2.0\tTHE HAT', "rank '-1'"),
        ('u1\t2\tnan\tTHE HAT', "first_pass_score 'nan'"),
    ],
)
def test_rescore_refuses_out_of_domain_values(cli, workspace, line, named):
  nbest = workspace / f'nbest_{abs(hash(line))}.tsv'
  nbest.write_text(f'u1\t1\t-1.0\tTHE CAT\n{line}\n')
  references = workspace / 'references.txt'
  references.write_text('u1 THE CAT\n')
  scores = workspace / 'lm.tsv'
  scores.write_text('u1\t1\t-1.0\nu1\t2\t-2.0\n')
  cli.refused(
      [
          'official_repro.rescore',
          f'--nbest={nbest}',
          f'--references={references}',
          f'--lm_scores={scores}',
          '--weights=1',
      ],
      named,
      nbest.name,
  )


def test_rescore_bad_grid_is_named(cli, workspace):
  cli.refused(
      [
          'official_repro.rescore',
          f'--nbest={workspace}/x.tsv',
          '--weights=a:b',
          '--lm_scores=s.tsv',
      ],
      '--weights',
  )


# --- experiments.regenerate


@pytest.mark.parametrize(
    'flags, named',
    [
        (['--table=001.IV', '--scale=cpu', '--tasks=sst3:0.25'], 'sst2'),
        (['--table=999'], '999'),
        (['--table=001.IV', '--scale=huge'], '--scale'),
        (['--table=001.IV', 'now'], 'now'),
        (['--table=001.IV', '--scale=cpu', '--num_runs=0'], '--num_runs'),
        (
            ['--table=001.IV', '--released=ELECTRA_small={workspace}/records'],
            'ELECTRA_small={workspace}/records',
        ),
    ],
)
def test_regenerate_mistakes_before_any_job(cli, workspace, flags, named):
  out = workspace / 'regen'
  cli.refused(
      [
          'experiments.regenerate',
          f'--out={out}',
          f'--corpus={workspace}/corpus',
          f'--glue_dir={workspace}',
          f'--vocab_file={workspace}/records/vocab.txt',
          *[flag.format(workspace=workspace) for flag in flags],
      ],
      named.format(workspace=workspace),
  )
  assert not out.exists()


# --- official_repro.convert and official_repro.export


@pytest.fixture(scope='module')
def releases(tmp_path_factory):
  """A Hugging Face ELECTRA discriminator folder and copies gone wrong."""
  import json  # pylint: disable=g-import-not-at-top

  import numpy as np  # pylint: disable=g-import-not-at-top
  import safetensors.numpy  # pylint: disable=g-import-not-at-top

  from tests.modeling.interchange import hf_reference  # pylint: disable=g-import-not-at-top

  root = tmp_path_factory.mktemp('releases')
  model, state = hf_reference.build('electra', 'rtd')
  good = hf_reference.write_folder(str(root / 'good'), model.config, state)

  def variant(name, edit_state=None, edit_config=None, files=None):
    folder = root / name
    shutil.copytree(good, folder)
    if edit_state:
      changed = dict(state)
      edit_state(changed)
      safetensors.numpy.save_file(changed, str(folder / 'model.safetensors'))
    if edit_config:
      config = json.loads((folder / 'config.json').read_text())
      edit_config(config)
      (folder / 'config.json').write_text(json.dumps(config))
    for file_name, text in (files or {}).items():
      (folder / file_name).write_text(text)
    return folder

  extra_name = 'electra.encoder.layer.0.attention.self.rotary.weight'
  missing_name = 'electra.encoder.layer.1.output.dense.bias'
  return dict(
      good=root / 'good',
      roberta=variant(
          'roberta', edit_config=lambda c: c.update(model_type='roberta')
      ),
      extra=variant(
          'extra', lambda s: s.update({extra_name: np.zeros(3, np.float32)})
      ),
      missing=variant('missing', lambda s: s.pop(missing_name)),
      shape=variant(
          'shape', edit_config=lambda c: c.update(intermediate_size=48)
      ),
      vocab=variant('vocab', files={'vocab.txt': 'a\nb\n'}),
      cased=variant(
          'cased', files={'tokenizer_config.json': '{"do_lower_case": false}'}
      ),
      epsilon=variant(
          'epsilon', edit_config=lambda c: c.update(layer_norm_eps=1e-5)
      ),
  )


@pytest.mark.slow
@pytest.mark.parametrize(
    'release, flags, named',
    [
        ('roberta', [], "model_type 'roberta'"),
        ('extra', [], 'attention.self.rotary.weight'),
        ('missing', [], 'electra.encoder.layer.1.output.dense.bias'),
        ('shape', [], 'intermediate.dense.weight has shape'),
        ('vocab', [], 'the vocabulary has 2 tokens'),
        ('cased', ['--lower_case'], 'drop the flag'),
        ('epsilon', [], 'layer_norm_eps 1e-05'),
    ],
)
def test_convert_refuses_a_release_that_is_not_what_it_says(
    cli, releases, tmp_path, release, flags, named
):
  out = tmp_path / 'out'
  line = cli.refused(
      [
          'official_repro.convert',
          f'--input={releases[release]}',
          f'--output_dir={out}',
          *flags,
      ],
      named,
      keep=[releases[release]],
  )
  assert str(releases[release]) in line
  assert not out.exists()


def test_convert_and_export_refuse_a_folder_that_holds_files(
    cli, releases, tmp_path
):
  (tmp_path / 'taken').mkdir()
  (tmp_path / 'taken' / 'notes.txt').write_text('mine')
  for command in (
      [
          'official_repro.convert',
          f'--input={releases["good"]}',
          f'--output_dir={tmp_path / "taken"}',
      ],
      [
          'official_repro.export',
          f'--model_dir={releases["good"]}',
          '--format=huggingface',
          f'--output_dir={tmp_path / "taken"}',
      ],
  ):
    cli.refused(command, '--output_dir', 'not empty', keep=[tmp_path / 'taken'])


def test_export_refuses_what_is_not_a_model(cli, tmp_path):
  (tmp_path / 'empty').mkdir()
  cli.refused(
      [
          'official_repro.export',
          f'--model_dir={tmp_path / "empty"}',
          '--format=saved_model',
          f'--output_dir={tmp_path / "out"}',
      ],
      str(tmp_path / 'empty'),
  )
  assert not (tmp_path / 'out').exists()


def test_export_names_a_checkpoint_the_run_does_not_have(
    cli, exported_encoder, tmp_path
):
  cli.refused(
      [
          'official_repro.export',
          f'--model_dir={exported_encoder}',
          '--checkpoint=ckpt-99',
          '--format=saved_model',
          f'--output_dir={tmp_path / "out"}',
      ],
      '--checkpoint ckpt-99: no such checkpoint',
      keep=[exported_encoder],
  )
  assert not (tmp_path / 'out').exists()


# --- Cloud Storage that cannot be reached (every command)

# The test machines reach no Cloud Storage (no route, no credentials): each
# command meets TensorFlow's GCS transport error on its first gs:// path.
_BUCKET = 'gs://official-repro-unreachable'


@pytest.fixture(scope='module')
def unreachable_storage():
  """Skips where Cloud Storage answers (the failure cannot be staged)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  from official_repro.common import cli as cli_lib  # pylint: disable=g-import-not-at-top

  try:
    tf.io.gfile.exists(f'{_BUCKET}/probe')
  except tf.errors.OpError as error:
    if cli_lib.storage_failure(error):
      return
  pytest.skip('Cloud Storage answers on this machine.')


@pytest.mark.parametrize(
    'command',
    [
        [
            'official_repro.data.create_pretraining_data',
            f'--input={_BUCKET}/corpus',
            '--output_dir={tmp}/records',
            '--vocab_size=100',
        ],
        [
            'official_repro.data.create_pretraining_data',
            '--input={workspace}/corpus',
            f'--output_dir={_BUCKET}/records',
            '--vocab_size=100',
        ],
        ['official_repro.quickstart', f'--work_dir={_BUCKET}/qs'],
        [
            'official_repro.score',
            f'--init_checkpoint={_BUCKET}/run',
            '--input={workspace}/corpus/a.txt',
        ],
        [
            'official_repro.finetune',
            '--gin_file=gin/finetune/001_ale/mrpc.gin',
            f'--init_checkpoint={_BUCKET}/run',
            '--data_dir={tmp}',
            '--model_dir={tmp}/ft',
        ],
        [
            'official_repro.export',
            f'--model_dir={_BUCKET}/run',
            '--format=saved_model',
            '--output_dir={tmp}/out',
        ],
    ],
    ids=[
        'records_in',
        'records_out',
        'quickstart',
        'score',
        'finetune',
        'export',
    ],
)
def test_unreachable_cloud_storage_is_one_line(
    cli, workspace, tmp_path, command, unreachable_storage
):
  command = [arg.format(workspace=workspace, tmp=tmp_path) for arg in command]
  cli.refused(command, _BUCKET, 'check the network and the credentials')
  assert len(os.listdir(tmp_path)) == 0, os.listdir(tmp_path)


# --- run_tpu.sh --dry_run

_TPU = [
    './run_tpu.sh',
    '--dry_run',
    '--tpu_name=t',
    '--zone=europe-west4-a',
    '--gin_file=gin/papers/001_ale/bert_small.gin',
    '--model_dir=gs://bucket/run',
]


@pytest.mark.slow
@pytest.mark.parametrize(
    'flags, named',
    [
        (['--accelerator_type=v3-7'], 'v3-7'),
        (['--gin_param=encoder.hiden_size=64'], 'encoder.hidden_size'),
        (['--mixed_precision=int8'], '--mixed_precision'),
    ],
)
def test_run_tpu_refuses_before_creating_anything(cli, flags, named):
  cli.refused([*_TPU, *flags], named)
