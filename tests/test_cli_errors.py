"""A user's mistakes, through the real command lines: one line, nothing lost.

Every entry point gets mistakes a new user makes. Each runs in a process of
its own, as typed in a shell (`python -m ...` in a fork of a warm
interpreter, `tests/warm_interpreter.py`, which saves the imports of
TensorFlow), and must end with a non-zero status, print exactly one line of
its own on stderr (TensorFlow's and absl's log lines aside) that names what
the user typed, print no traceback, and leave the files of an earlier run
byte-identical.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess

import pytest

from official_repro.training import gin_utils

# The tests share module fixtures: one xdist worker runs them all
# (--dist loadgroup, pytest.ini), so the fixtures are built once.
pytestmark = pytest.mark.xdist_group('test_cli_errors')

REPO_ROOT = gin_utils.REPO_ROOT
# Lines of TensorFlow's C++ logging and of absl's Python logging.
_LOG_LINE = re.compile(
    r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] |[IWEF]\d{4} |'
    r'WARNING: All log messages before absl::InitializeLog|'
    r'(INFO|WARNING):tensorflow:|'
    r'I0000 |W0000 |E0000 )'
)


def _snapshot(*paths):
  """{path: sha256} of every file under `paths`."""
  digests = {}
  for root in paths:
    for folder, _, names in os.walk(root):
      for name in names:
        path = os.path.join(folder, name)
        with open(path, 'rb') as f:
          digests[path] = hashlib.sha256(f.read()).hexdigest()
  return digests


class _Cli:
  """Runs command lines as a user types them and checks their refusals."""

  def __init__(self, python_m):
    self._python_m = python_m

  def run(self, args, cwd=REPO_ROOT, timeout=300):
    """Runs `python -m args...` (a script if `args[0]` ends with .sh)."""
    if not args[0].endswith('.sh'):
      return self._python_m(args, cwd, timeout)
    return subprocess.run(
        args,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_user_environment(),
        check=False,
    )

  def refused(self, args, *named, keep=(), cwd=REPO_ROOT):
    """Runs `args` and checks its one-line refusal.

    Asserts the one-line refusal naming each of `named`, and that the files
    under `keep` did not change; returns the line.
    """
    before = _snapshot(*keep)
    completed = self.run(args, cwd=cwd)
    own = [
        line
        for line in completed.stderr.splitlines()
        if line.strip() and not _LOG_LINE.match(line)
    ]
    assert completed.returncode != 0, completed.stdout[-2000:]
    assert 'Traceback' not in completed.stderr, completed.stderr[-3000:]
    assert len(own) == 1, own
    assert ': error: ' in own[0], own
    for text in named:
      assert text in own[0], (text, own[0])
    assert _snapshot(*keep) == before
    return own[0]


def _user_environment():
  """The tests' environment as a user's shell has it (as `python_m` runs)."""
  env = dict(os.environ)
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)
  return env


@pytest.fixture(scope='module')
def cli(python_m):
  """Runs the module's command lines, Python ones in the warm interpreter."""
  return _Cli(python_m)


@pytest.fixture(scope='module')
def workspace(tmp_path_factory, tiny_records):
  """Inputs that the CLIs must refuse.

  A folder with complete records (an earlier run's output), a tiny
  trained masked-LM run, a vocabulary with a duplicate token and corpora
  that are not UTF-8.
  """
  root = tmp_path_factory.mktemp('workspace')
  records = root / 'records'
  shutil.copytree(tiny_records, records)
  (root / 'corpus').mkdir()
  (root / 'corpus' / 'a.txt').write_text(
      'The cat sat on the mat. The dog ran in the park.\n\n' * 20
  )
  (root / 'latin1').mkdir()
  (root / 'latin1' / 'book.txt').write_bytes(
      'Un caf\u00e9 tr\u00e8s cr\u00e8me.\n'.encode('latin-1')
  )
  (root / 'binary').mkdir()
  (root / 'binary' / 'noise.txt').write_bytes(bytes(range(256)) * 4)
  (root / 'spaced').mkdir()
  (root / 'spaced' / 'book.txt').write_text(
      ' '.join('The cat sat on the mat and the dog ran in the park.') * 40
      + '\n'
  )
  for name, encoding in (('utf16', 'utf-16-le'), ('utf16_bom', 'utf-16')):
    (root / name).mkdir()
    (root / name / 'book.txt').write_bytes(
        ('The cat sat on the mat.\n' * 20).encode(encoding)
    )
  tokens = (records / 'vocab.txt').read_text().split('\n')
  (root / 'duplicate_vocab.txt').write_text(
      '\n'.join(tokens[:12] + [tokens[8]] + tokens[12:])
  )
  return root


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


# --- official_repro.train


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


# --- official_repro.finetune


def _glue(root, label_shift=0):
  folder = root / 'MRPC'
  folder.mkdir(parents=True)
  for split, rows in (('train', 8), ('dev', 4)):
    lines = ['Quality\t#1 ID\t#2 ID\t#1 String\t#2 String']
    lines += [
        f'{(i + label_shift) % 2}\t{i}\t{i + 100}\tthe cat sat\tthe ' f'dog ran'
        for i in range(rows)
    ]
    (folder / f'{split}.tsv').write_text('\n'.join(lines) + '\n')
  return str(root)


@pytest.fixture(scope='module')
def finetuned(cli, workspace, exported_encoder):
  """A finished fine-tuning run on MRPC data A; its (masked-LM) encoder."""
  encoder = exported_encoder
  data = _glue(workspace / 'data_a')
  model_dir = workspace / 'ft'
  completed = cli.run(
      [
          'official_repro.finetune',
          '--gin_file=gin/finetune/001_ale/mrpc.gin',
          f'--init_checkpoint={encoder}',
          f'--data_dir={data}',
          f'--model_dir={model_dir}',
          '--seeds=0',
          '--gin_param=finetuning.num_epochs=1',
          '--gin_param=finetuning.train_batch_size=4',
          '--gin_param=finetuning.max_seq_length=32',
      ]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  return encoder, model_dir


@pytest.mark.slow
def test_finetune_rerun_on_other_data_is_refused(cli, workspace, finetuned):
  encoder, model_dir = finetuned
  other = _glue(workspace / 'data_b', label_shift=1)
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
          f'--data_dir={_glue(workspace / "data_nan")}',
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
          f'--data_dir={_glue(workspace / "data_positions")}',
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
          f'--data_dir={_glue(workspace / "data_vocab")}',
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
          f'--data_dir={_glue(workspace / "data_casing")}',
          f'--model_dir={tmp_path}/ft',
          '--gin_param=finetuning.max_seq_length=32',
      ],
      str(copy),
      'uncased',
      'lower_case=False',
  )
  assert not (tmp_path / 'ft').exists()


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
