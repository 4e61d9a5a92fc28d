"""Test setup: Keras 2 for Model Garden, quiet TensorFlow logs, CPU only."""

import os

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
os.environ.setdefault('CUDA_VISIBLE_DEVICES', '')
# One thread per op: the suite runs two workers (-n 2, README) on two cores,
# and tiny models gain nothing from splitting an op over a second thread
# that the other worker needs. Commands the tests start inherit it.
os.environ.setdefault('TF_NUM_INTRAOP_THREADS', '1')
# Conversions of released models for --init_checkpoint go to a cache; the
# tests' go to a temporary one, never to the home folder.
os.environ.setdefault(
    'OFFICIAL_REPRO_CACHE',
    os.path.join(
        os.environ.get('TMPDIR', '/tmp'), f'official_repro_cache_{os.getpid()}'
    ),
)

# pylint: disable=g-import-not-at-top,wrong-import-position
import random

import pytest
from tensorflow.python.data.ops import dataset_ops
from tensorflow.python.data.ops import options as tf_data_options


def _without_autotuning(apply_debug_options):
  """TensorFlow's last hook before an iterator, turning autotuning off."""

  def apply(dataset):
    options = tf_data_options.Options()
    options.autotune.enabled = False
    return apply_debug_options(dataset).with_options(options)

  return apply


# tf.data without autotuning, in the test processes only. An autotuned
# iterator's destructor waits for its tuning thread, which sleeps up to 60 s
# between rounds (longer the older the iterator). Iterators that a test
# leaves in reference cycles (trainers) are destroyed when the garbage
# collector next runs, in some later test: that test then sat idle for
# 78-83 s with the CPUs free, once in each of three suite runs (2026-11-27;
# stacks taken during the waits showed the collector in
# `RootDataset::Iterator::~Iterator`). Autotuning changes how many threads
# tf.data uses, not what it yields. The hook is the one TensorFlow's own
# debug mode uses to turn autotuning off.
dataset_ops.DatasetV2._apply_debug_options = _without_autotuning(  # pylint: disable=protected-access
    dataset_ops.DatasetV2._apply_debug_options  # pylint: disable=protected-access
)

_WORDS = (
    'the quick brown fox jumps over a lazy dog while birds sing in the '
    'old trees near the river and children play games on green grass '
    'under bright summer skies'
).split()


def write_fixture_corpus(directory, num_documents=30, seed=0):
  """Writes a small blank-line-separated corpus; returns its path."""
  rng = random.Random(seed)
  directory.mkdir(parents=True, exist_ok=True)
  path = directory / 'corpus.txt'
  with open(path, 'w') as f:
    for _ in range(num_documents):
      sentences = []
      for _ in range(rng.randint(4, 9)):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(4, 12))]
        sentences.append(' '.join(words).capitalize() + '.')
      f.write(' '.join(sentences) + '\n\n')
  return path


def write_fixture_files(directory, num_files, num_documents=10, seed=0):
  """Writes `num_files` corpus files (`f000.txt`, ...); returns `directory`."""
  for index in range(num_files):
    path = write_fixture_corpus(directory, num_documents, seed + index)
    path.rename(directory / f'f{index:03d}.txt')
  return directory


def write_fixture_vocab(path):
  """A vocabulary covering the fixture corpora (no [UNK]); returns `path`."""
  tokens = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '.']
  path.write_text('\n'.join(tokens + sorted(set(_WORDS))) + '\n')
  return path


@pytest.fixture
def clean_gin():
  """Gin's config cleared before and after the test."""
  import gin

  gin.clear_config()
  yield
  gin.clear_config()


@pytest.fixture
def ram_dir():
  """A fresh directory on TensorFlow's in-memory `ram://` filesystem.

  Readers given a path there must go through `tf.io.gfile` (`open` and
  `os.path` see no such file), as they must for `gs://` on Cloud TPU. The
  directory is removed after the test.
  """
  import uuid
  import tensorflow as tf

  path = f'ram://test_{uuid.uuid4().hex}'
  tf.io.gfile.makedirs(path)
  yield path
  tf.io.gfile.rmtree(path)


@pytest.fixture
def to_ram(ram_dir):
  """Returns `copy(local_path)`: the path of a copy of it under `ram_dir`.

  `local_path` is a file or a directory (copied with everything below it);
  the copy keeps its base name.
  """
  import tensorflow as tf

  def copy(local_path):
    local_path = os.path.normpath(str(local_path))
    copied = os.path.join(ram_dir, os.path.basename(local_path))
    if not os.path.isdir(local_path):
      tf.io.gfile.copy(local_path, copied, overwrite=True)
      return copied
    for root, _, names in os.walk(local_path):
      relative = os.path.relpath(root, local_path)
      target = copied if relative == '.' else os.path.join(copied, relative)
      tf.io.gfile.makedirs(target)
      for name in names:
        tf.io.gfile.copy(
            os.path.join(root, name), os.path.join(target, name), overwrite=True
        )
    return copied

  return copy


@pytest.fixture
def progress_lines(monkeypatch):
  """The progress lines logged during the test, every one (no throttling)."""
  from official_repro.common import progress

  lines = []
  monkeypatch.setattr(
      progress.logging, 'info', lambda *args: lines.append(args[0] % args[1:])
  )
  monkeypatch.setattr(progress, 'INTERVAL_SECONDS', 0.0)
  return lines


@pytest.fixture(scope='session')
def python_m():
  """Returns `run(args, cwd=<repository>, timeout=600)`: `python -m args`.

  The command runs in a fork of a warm interpreter (`warm_interpreter`),
  which saves the imports of TensorFlow, in the environment of the tests
  without `TF_CPP_MIN_LOG_LEVEL` (as a user's shell has it); `run` returns
  a `subprocess.CompletedProcess` with the text of stdout and stderr.
  """
  from tests import warm_interpreter

  repository = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  environment = dict(os.environ)
  environment.pop('TF_CPP_MIN_LOG_LEVEL', None)  # as a user's shell has it
  interpreter = warm_interpreter.WarmInterpreter(repository, environment)

  def run(args, cwd=repository, timeout=600):
    return interpreter.run(args, cwd, timeout)

  yield run
  interpreter.close()


def write_tiny_records(root, **options):
  """Writes `tiny_records`' records under `root`, `options` changed.

  With no `options` the vocabulary, length and masks are `tiny_records`';
  returns the record directory.
  """
  from official_repro.data import create_pretraining_data

  corpus = write_fixture_corpus(root / 'corpus')
  output_dir = str(root / 'records')
  settings = dict(vocab_size=120, max_seq_length=32, eval_fraction=0.1, seed=3)
  create_pretraining_data.prepare_pretraining_data(
      [str(corpus)], output_dir, **dict(settings, **options)
  )
  return output_dir


@pytest.fixture(scope='session')
def tiny_records(tmp_path_factory):
  """A dynamically masked record directory (max_seq_length 32, ~100 vocab)."""
  return write_tiny_records(tmp_path_factory.mktemp('tiny_records'))


@pytest.fixture(scope='session')
def record_words():
  """Returns `words(record_dir, split)`: its real, non-special token ids.

  Parsed one example at a time, independently of `records.read_split`.
  """
  import tensorflow as tf
  from official_repro.data import records

  def words(record_dir, split):
    metadata = records.load_metadata(record_dir)
    spec = records.feature_spec(metadata)
    special = set(metadata['special_token_ids'].values())
    found = []
    for path in records.split_files(metadata, record_dir, split):
      for record in tf.data.TFRecordDataset(path):
        example = tf.io.parse_single_example(record, spec)
        found += [
            int(token)
            for token, real in zip(
                example['input_ids'].numpy(), example['input_mask'].numpy()
            )
            if real and int(token) not in special
        ]
    return found

  return words


@pytest.fixture(scope='session')
def static_records(tmp_path_factory):
  """Statically masked records with next-sentence labels, 2 copies each."""
  from official_repro.data import create_pretraining_data

  root = tmp_path_factory.mktemp('static_records')
  corpus = write_fixture_corpus(root / 'corpus', seed=1)
  output_dir = str(root / 'records')
  create_pretraining_data.prepare_pretraining_data(
      [str(corpus)],
      output_dir,
      vocab_size=120,
      max_seq_length=32,
      masking='static',
      dupe_factor=2,
      next_sentence_prediction=True,
      eval_fraction=0.1,
      seed=4,
  )
  return output_dir


@pytest.fixture(scope='session')
def exported_encoder(tiny_records, tmp_path_factory):
  """A tiny masked-LM encoder pretrained for 2 steps and exported.

  Returns the run's model directory (the fine-tuning commands' and
  `pretrained.resolve`'s `init_checkpoint`).
  """
  import gin
  import tensorflow as tf
  from official_repro.training import experiment
  from official_repro.training import gin_utils

  model_dir = str(tmp_path_factory.mktemp('pretrain'))
  gin.clear_config()
  try:
    gin_utils.parse_config(
        [
            os.path.join(gin_utils.REPO_ROOT, 'gin/sizes/tiny.gin'),
            os.path.join(gin_utils.REPO_ROOT, 'gin/pretrain/masked_lm.gin'),
        ],
        [
            f'pretrain_data.input_path = {tiny_records!r}',
            'pretrain_data.max_seq_length = 32',
            'pretrain_data.train_batch_size = 8',
            'experiment.train_steps = 2',
            'experiment.steps_per_loop = 1',
            'optimization.learning_rate = 1e-3',
        ],
    )
    params, settings = experiment.experiment_config()
    experiment.run(
        params, settings, tf.distribute.get_strategy(), model_dir, 'train'
    )
  finally:
    gin.clear_config()
  return model_dir


@pytest.fixture(scope='session')
def run_tiny_pretraining(tiny_records):
  """Returns `run(model_dir, gin_files, bindings=(), mode)`: 2 steps, tiny.

  gin/sizes/tiny.gin, then `gin_files` (relative to the repository), on
  `tiny_records` with batch 8; `bindings` (gin strings) are applied last.
  `run` returns the experiment's result dict.

  The runs train with AdamW, not the papers' LAMB: these tests are about
  what a run writes and reads, and LAMB's per-variable update takes a sixth
  of a tiny run's time to trace. LAMB runs in the command-line tests (the
  gin files' own optimizer), tests/training/test_reproducibility.py and
  tests/training/test_trainer.py.
  """
  import gin
  import tensorflow as tf
  from official_repro.training import experiment
  from official_repro.training import gin_utils

  def run(model_dir, gin_files, bindings=(), mode='train_and_eval'):
    gin.clear_config()
    try:
      gin_utils.parse_config(
          [
              os.path.join(gin_utils.REPO_ROOT, f)
              for f in ('gin/sizes/tiny.gin', *gin_files)
          ],
          [
              f'pretrain_data.input_path = {tiny_records!r}',
              'pretrain_data.max_seq_length = 32',
              'pretrain_data.train_batch_size = 8',
              'experiment.train_steps = 2',
              'experiment.steps_per_loop = 1',
              'experiment.checkpoint_interval = 1',
              'optimization.learning_rate = 1e-3',
              "optimization.optimizer = 'adamw'",
              *bindings,
          ],
      )
      params, settings = experiment.experiment_config()
      return experiment.run(
          params, settings, tf.distribute.get_strategy(), str(model_dir), mode
      )
    finally:
      gin.clear_config()

  return run


@pytest.fixture(scope='session')
def run_tiny_electra(run_tiny_pretraining):
  """Returns `run(model_dir, bindings=(), mode)`: 2 ELECTRA steps, tiny sizes.

  The encoder is gin/sizes/tiny.gin with one layer (these tests are about
  the objective and the run, not the order of layers; the export and
  conversion tests keep two) and a half-width generator, on
  `tiny_records`; `bindings` (gin strings) are applied last. `run` returns
  the experiment's result dict.
  """

  def run(model_dir, bindings=(), mode='train_and_eval'):
    return run_tiny_pretraining(
        model_dir,
        ['gin/pretrain/electra.gin'],
        ['encoder.num_layers = 1', 'electra.generator_size = 0.5', *bindings],
        mode,
    )

  return run


@pytest.fixture(scope='session')
def tiny_electra_run(run_tiny_electra, tmp_path_factory):
  """A tiny ELECTRA pretraining run (2 steps); its directory, read only."""
  model_dir = tmp_path_factory.mktemp('electra') / 'run'
  run_tiny_electra(model_dir, mode='train')
  return str(model_dir)


@pytest.fixture(scope='session')
def tiny_script_run(run_tiny_pretraining, tmp_path_factory):
  """A tiny SCRIPT pretraining run (2 steps); its directory, read only."""
  model_dir = tmp_path_factory.mktemp('script') / 'run'
  run_tiny_pretraining(model_dir, ['gin/pretrain/script.gin'], mode='train')
  return model_dir


@pytest.fixture
def tiny_bert_encoder():
  """Returns `build()`: a tiny Model Garden `BertEncoder` with dict outputs.

  Vocabulary 50, hidden size 16, one layer, two heads, sequences up to 8; the
  activation is named ('gelu') so that the encoder serializes.
  """
  from official.nlp.modeling import networks

  def build():
    return networks.BertEncoder(
        vocab_size=50,
        hidden_size=16,
        num_layers=1,
        num_attention_heads=2,
        inner_dim=32,
        max_sequence_length=8,
        inner_activation='gelu',
        dict_outputs=True,
    )

  return build


@pytest.fixture(scope='session')
def export_encoder_with_vocab():
  """Returns `export(model_dir, encoder, config, vocab, step)`.

  It writes `vocab` (a list of pieces) to `<model_dir>/vocab.txt` and
  exports `encoder` with its `config` (an `EncoderConfig`) as a pretraining
  run's `encoder/` folder at `step`, lower-cased; returns `model_dir`.
  """
  import tensorflow as tf
  from official_repro.training import export

  def write(model_dir, encoder, config, vocab, step):
    holder = tf.train.Checkpoint()
    holder.checkpoint_items = {'encoder': encoder}
    vocab_file = os.path.join(model_dir, 'vocab.txt')
    with open(vocab_file, 'w') as f:
      f.write('\n'.join(vocab) + '\n')
    export.export_encoder(
        holder,
        config.as_dict(),
        model_dir,
        step=step,
        vocab_file=vocab_file,
        lower_case=True,
    )
    return model_dir

  return write


# The fixtures of the command-line tests (tests/test_cli_errors.py,
# tests/test_train.py, tests/test_finetune.py). They are session-scoped so
# that the three modules share one of each, as their tests did when they were
# one module: the modules name one xdist group (`cli_support.XDIST_GROUP`),
# so under -n 2 one worker builds each once.


@pytest.fixture(scope='session')
def cli(python_m):
  """A `tests.cli_support.Cli`: Python command lines in the warm interpreter."""
  from tests import cli_support

  return cli_support.Cli(python_m)


@pytest.fixture(scope='session')
def workspace(tmp_path_factory, tiny_records):
  """Inputs that the CLIs must refuse.

  A folder with complete records (an earlier run's output), a tiny
  trained masked-LM run, a vocabulary with a duplicate token and corpora
  that are not UTF-8.
  """
  import shutil

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


@pytest.fixture(scope='session')
def finetuned(cli, workspace, exported_encoder):
  """A finished fine-tuning run on MRPC data A; its (masked-LM) encoder."""
  from tests import cli_support

  encoder = exported_encoder
  data = cli_support.glue(workspace / 'data_a')
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
