"""End-to-end tests for official_repro.data.create_pretraining_data."""

import collections
import json
import os
import random
import re

import numpy as np
import pytest
import sentencepiece
import tensorflow as tf

from official_repro.common import cli
from official_repro.data import create_pretraining_data as cpd
from official_repro.data import records
from official_repro.data import streaming
from official_repro.data import vocab
from tests.conftest import write_fixture_corpus
from tests.data.tokenizer_texts import detokenize

_SUBJECTS = [
    'The old man',
    'A young girl',
    'The farmer',
    'My teacher',
    'The small dog',
    'Her brother',
    'The sailor',
    'A tall woman',
]
_VERBS = [
    'saw',
    'found',
    'carried',
    'painted',
    'watched',
    'followed',
    'bought',
    'cleaned',
]
_OBJECTS = [
    'a red boat',
    'the quiet river',
    'an empty house',
    'the long road',
    'a heavy basket',
    'the green field',
    'some fresh bread',
    'the broken gate',
]
_ENDINGS = [
    'near the village',
    'after the storm',
    'before dinner',
    'in the morning',
    'with great care',
    'at the market',
]
_MAX_SEQ_LENGTH = 32


def _sentence(rng):
  return (
      f'{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} '
      f'{rng.choice(_OBJECTS)} {rng.choice(_ENDINGS)}'
      f'{rng.choice([".", ".", "!", "?"])}'
  )


def _write_corpus(directory, num_documents=36, seed=0):
  """A blank_line corpus: documents of 3-8 sentences, wrapped over lines."""
  rng = random.Random(seed)
  documents = []
  for _ in range(num_documents):
    sentences = [_sentence(rng) for _ in range(rng.randint(3, 8))]
    documents.append(sentences)
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, 'corpus.txt'), 'w') as f:
    for sentences in documents:
      text = ' '.join(sentences)
      words = text.split()
      f.write(' '.join(words[:7]) + '\n' + ' '.join(words[7:]) + '\n\n')
  return documents


def _words(text):
  """What the uncased BERT tokenizer splits a text into, as words."""
  return re.findall(r'\w+|[^\w\s]', text.lower())


def _parse_split(output_dir, metadata, split):
  spec = records.feature_spec(metadata)
  files = records.split_files(metadata, output_dir, split)
  return [
      {k: v.numpy() for k, v in tf.io.parse_single_example(raw, spec).items()}
      for raw in tf.data.TFRecordDataset(files)
  ]


def _feature_names(output_dir, metadata, split):
  raw = next(
      iter(
          tf.data.TFRecordDataset(
              records.split_files(metadata, output_dir, split)
          )
      )
  )
  return set(tf.train.Example.FromString(raw.numpy()).features.feature)


def _restore(example):
  """Input ids with the masked positions restored to the original ids."""
  ids = example['input_ids'].copy()
  real = example['masked_lm_weights'] > 0
  ids[example['masked_lm_positions'][real]] = example['masked_lm_ids'][real]
  return ids


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp('corpus'))
  documents = _write_corpus(directory)
  return directory, documents


@pytest.fixture(scope='module')
def static_run(corpus, tmp_path_factory):
  output_dir = str(tmp_path_factory.mktemp('static'))
  metadata = cpd.prepare_pretraining_data(
      [corpus[0]],
      output_dir,
      vocab_size=200,
      max_seq_length=_MAX_SEQ_LENGTH,
      short_seq_prob=0.0,
      next_sentence_prediction=True,
      masking='static',
      dupe_factor=3,
      eval_fraction=0.1,
      num_shards=2,
      seed=3,
  )
  return output_dir, metadata


@pytest.fixture(scope='module')
def dynamic_run(corpus, static_run, tmp_path_factory):
  output_dir = str(tmp_path_factory.mktemp('dynamic'))
  metadata = cpd.prepare_pretraining_data(
      [corpus[0]],
      output_dir,
      vocab_file=os.path.join(static_run[0], 'vocab.txt'),
      max_seq_length=_MAX_SEQ_LENGTH,
      masking='dynamic',
      eval_fraction=0.1,
      seed=3,
  )
  return output_dir, metadata


class TestStaticRecords:

  def test_metadata(self, static_run):
    output_dir, metadata = static_run
    assert records.load_metadata(output_dir) == metadata
    # The same directory on a non-local filesystem (gs:// in production).
    remote = 'ram://static_run_copy'
    tf.io.gfile.makedirs(remote)
    for name in tf.io.gfile.listdir(output_dir):
      tf.io.gfile.copy(
          os.path.join(output_dir, name),
          os.path.join(remote, name),
          overwrite=True,
      )
    assert records.load_metadata(remote) == metadata
    tokens = vocab.load_vocab(os.path.join(output_dir, 'vocab.txt'))
    assert metadata['format_version'] == 1
    assert metadata['tokenizer'] == metadata['source']['tokenizer']
    assert metadata['tokenizer'] == 'wordpiece-bert'
    assert metadata['max_seq_length'] == _MAX_SEQ_LENGTH
    assert metadata['vocab_file'] == 'vocab.txt'
    assert metadata['vocab_size'] == len(tokens) <= 200
    assert metadata['special_token_ids'] == {
        'pad': 0,
        'unk': 1,
        'cls': 2,
        'sep': 3,
        'mask': 4,
    }
    assert metadata['next_sentence_labels'] is True
    assert metadata['masking'] == 'static'
    assert metadata['static_masking'] == {
        'mask_rate': 0.15,
        'max_predictions_per_seq': 4,
        'mask_token_fraction': 0.8,
        'random_token_fraction': 0.1,
        'dupe_factor': 3,
        'seed': 3,
    }
    assert metadata['splits']['train']['files'] == [
        'train-00000-of-00002.tfrecord',
        'train-00001-of-00002.tfrecord',
    ]
    assert metadata['splits']['eval']['files'] == [
        'eval-00000-of-00001.tfrecord'
    ]
    assert metadata['source']['document_mode'] == 'blank_line'
    assert metadata['stats']['corpus']['documents'] == 36

  def test_dupe_factor_triples_examples(self, static_run):
    output_dir, metadata = static_run
    for split in records.SPLITS:
      instances = metadata['stats']['splits'][split]['instances']['instances']
      examples = _parse_split(output_dir, metadata, split)
      assert len(examples) == metadata['splits'][split]['num_examples']
      assert len(examples) == 3 * instances > 0

  def test_copies_are_masked_differently(self, static_run):
    output_dir, metadata = static_run
    groups = collections.defaultdict(list)
    for example in _parse_split(output_dir, metadata, 'train'):
      groups[_restore(example).tobytes()].append(example)
    assert all(len(group) % 3 == 0 for group in groups.values())
    for group in groups.values():
      masks = {
          (e['input_ids'].tobytes(), e['masked_lm_positions'].tobytes())
          for e in group
      }
      assert len(masks) == len(group)

  def test_masked_features_consistent(self, static_run):
    output_dir, metadata = static_run
    special = set(metadata['special_token_ids'].values())
    for example in _parse_split(output_dir, metadata, 'train'):
      original = _restore(example)
      real = example['masked_lm_weights'] > 0
      assert 1 <= real.sum() <= 4
      assert not special & set(example['masked_lm_ids'][real].tolist())
      assert original[0] == 2 and (original == 3).sum() == 2
      length = example['input_mask'].sum()
      assert (example['input_mask'][:length] == 1).all()
      assert (original[length:] == 0).all()
      assert example['next_sentence_labels'].shape == (1,)

  def test_nsp_labels_present(self, static_run):
    output_dir, metadata = static_run
    labels = {
        int(e['next_sentence_labels'][0])
        for e in _parse_split(output_dir, metadata, 'train')
    }
    assert labels == {0, 1}


class TestDynamicRecords:

  def test_no_masked_lm_features(self, dynamic_run):
    output_dir, metadata = dynamic_run
    assert metadata['masking'] == 'dynamic'
    assert metadata['static_masking'] is None
    assert metadata['next_sentence_labels'] is False
    assert _feature_names(output_dir, metadata, 'train') == {
        'input_ids',
        'input_mask',
        'segment_ids',
    }
    assert set(records.feature_spec(metadata)) == {
        'input_ids',
        'input_mask',
        'segment_ids',
    }

  def test_tokenization_round_trip(self, corpus, dynamic_run):
    output_dir, metadata = dynamic_run
    tokens = vocab.load_vocab(os.path.join(output_dir, 'vocab.txt'))
    corpus_text = ' '.join(
        ' '.join(_words(' '.join(sentences))) for sentences in corpus[1]
    )
    examples = _parse_split(output_dir, metadata, 'train')
    assert len(examples) == metadata['splits']['train']['num_examples'] > 0
    for example in examples:
      ids = example['input_ids'][: example['input_mask'].sum()].tolist()
      assert 1 not in ids
      sep = ids.index(3)
      for segment in (ids[1:sep], ids[sep + 1 : -1]):
        # Truncation may cut a word into pieces at either end.
        words = detokenize(segment, tokens)[1:-1]
        assert ' '.join(words) in corpus_text
      segments = example['segment_ids'][: len(ids)].tolist()
      assert segments == [0] * (sep + 1) + [1] * (len(ids) - sep - 1)

  def test_eval_documents_held_out(self, corpus, dynamic_run):
    _, metadata = dynamic_run
    splits = metadata['stats']['splits']
    # Each document's split is a seeded hash of (file name, index in file).
    files = streaming.list_input_files([corpus[0]])
    eval_split = streaming.EvalSplit(files, 'blank_line', 0.1, seed=3)
    held_out = [
        i
        for i, document in enumerate(corpus[1])
        if eval_split.assign('corpus.txt', i, document)[0][0] == 'eval'
    ]
    assert splits['eval']['documents'] == len(held_out) > 0
    assert splits['train']['documents'] == 36 - len(held_out)
    assert metadata['splits']['eval']['num_examples'] > 0

  def test_ram_filesystem_run_matches_local(
      self, corpus, dynamic_run, to_ram, ram_dir
  ):
    local_dir, expected = dynamic_run
    remote_corpus = to_ram(corpus[0])
    remote_vocab = to_ram(os.path.join(local_dir, 'vocab.txt'))
    output_dir = os.path.join(ram_dir, 'records')
    metadata = cpd.prepare_pretraining_data(
        [remote_corpus],
        output_dir,
        vocab_file=remote_vocab,
        max_seq_length=_MAX_SEQ_LENGTH,
        masking='dynamic',
        eval_fraction=0.1,
        seed=3,
    )
    assert metadata['source']['inputs'] == [remote_corpus]
    assert metadata['source']['vocab_file'] == remote_vocab
    assert metadata['splits'] == expected['splits']
    assert records.load_metadata(output_dir) == metadata
    with tf.io.gfile.GFile(os.path.join(output_dir, 'vocab.txt')) as f:
      copied_vocab = f.read()
    with open(os.path.join(local_dir, 'vocab.txt')) as f:
      assert copied_vocab == f.read()
    for split in records.SPLITS:
      remote_examples = _parse_split(output_dir, metadata, split)
      local_examples = _parse_split(local_dir, expected, split)
      assert len(remote_examples) == len(local_examples) > 0
      for remote_example, local_example in zip(remote_examples, local_examples):
        for name, value in local_example.items():
          np.testing.assert_array_equal(remote_example[name], value)


class TestErrors:

  def test_dupe_factor_with_dynamic_masking(self, corpus, tmp_path):
    with pytest.raises(
        ValueError, match='--dupe_factor=2 only applies to ' '--masking=static'
    ):
      cpd.prepare_pretraining_data(
          [corpus[0]],
          str(tmp_path),
          vocab_size=100,
          masking='dynamic',
          dupe_factor=2,
      )

  def test_group_mb_must_be_positive(self):
    with pytest.raises(ValueError, match='--group_mb must be positive'):
      cpd.PretrainingDataConfig(vocab_size=100, group_mb=0.0)

  @pytest.mark.parametrize(
      'name, value, message',
      [
          ('dupe_factor', 0, r'--dupe_factor must be >= 1, got 0'),
          ('num_eval_shards', 0, r'--num_eval_shards must be >= 1'),
          ('num_workers', -1, r'--num_workers must be >= 0'),
          ('max_unk_rate', 1.5, r'--max_unk_rate must be in \[0, 1\]'),
          ('max_decode_error_rate', float('nan'), 'must be in .*got nan'),
          ('max_unk_rate', float('nan'), r'--max_unk_rate must be in'),
      ],
  )
  def test_numeric_options_out_of_range(self, name, value, message):
    options = dict(vocab_size=100, masking='static', **{name: value})
    with pytest.raises(ValueError, match=message):
      cpd.PretrainingDataConfig(**options)

  def test_vocab_file_xor_vocab_size(self, corpus, tmp_path):
    with pytest.raises(ValueError, match='exactly one of --vocab_file'):
      cpd.prepare_pretraining_data([corpus[0]], str(tmp_path))

  def test_missing_corpus(self, tmp_path):
    with pytest.raises(FileNotFoundError, match='no_such_dir'):
      cpd.prepare_pretraining_data(
          [str(tmp_path / 'no_such_dir')], str(tmp_path / 'out'), vocab_size=100
      )

  def test_empty_corpus(self, tmp_path):
    (tmp_path / 'empty.txt').write_text('\n\n\n')
    with pytest.raises(ValueError, match='no text'):
      cpd.prepare_pretraining_data(
          [str(tmp_path / 'empty.txt')], str(tmp_path / 'out'), vocab_size=100
      )

  def test_missing_vocab_file(self, corpus, tmp_path):
    with pytest.raises(FileNotFoundError, match='--vocab_file=.*nope.txt'):
      cpd.prepare_pretraining_data(
          [corpus[0]], str(tmp_path), vocab_file=str(tmp_path / 'nope.txt')
      )

  def test_vocab_file_without_mask(self, corpus, tmp_path):
    path = tmp_path / 'vocab.txt'
    path.write_text('[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n')
    with pytest.raises(ValueError, match=r'--vocab_file=.*\[MASK\]'):
      cpd.prepare_pretraining_data(
          [corpus[0]], str(tmp_path / 'out'), vocab_file=str(path)
      )


class TestMetadataLoading:

  def test_missing_metadata_names_path(self, tmp_path):
    with pytest.raises(
        FileNotFoundError, match=re.escape(str(tmp_path / 'metadata.json'))
    ):
      records.load_metadata(str(tmp_path))

  def test_unknown_format_version(self, static_run, tmp_path):
    metadata = dict(static_run[1], format_version=99)
    (tmp_path / 'metadata.json').write_text(json.dumps(metadata))
    with pytest.raises(ValueError, match='unknown format_version 99'):
      records.load_metadata(str(tmp_path))

  def test_missing_record_file(self, static_run, tmp_path):
    (tmp_path / 'metadata.json').write_text(json.dumps(static_run[1]))
    with pytest.raises(FileNotFoundError, match='vocab.txt'):
      records.load_metadata(str(tmp_path / 'metadata.json'))


def test_feature_spec_static_shapes(static_run):
  spec = records.feature_spec(static_run[1])
  assert spec['input_ids'].shape == [_MAX_SEQ_LENGTH]
  assert spec['next_sentence_labels'].shape == [1]
  assert spec['masked_lm_positions'].shape == [4]
  assert spec['masked_lm_weights'].dtype == tf.float32
  assert all(
      v.dtype == tf.int64 for k, v in spec.items() if k != 'masked_lm_weights'
  )


def test_cli_prints_report(corpus, static_run, tmp_path, capsys):
  cpd.define_flags()
  output_dir = str(tmp_path / 'cli')
  try:
    cpd.FLAGS(
        [
            'create_pretraining_data',
            f'--input={corpus[0]}',
            f'--output_dir={output_dir}',
            f'--vocab_file={os.path.join(static_run[0], "vocab.txt")}',
            f'--max_seq_length={_MAX_SEQ_LENGTH}',
            '--masking=static',
            '--dupe_factor=2',
            '--eval_fraction=0',
        ]
    )
    cpd.main(['create_pretraining_data'])
  finally:
    cpd.FLAGS.unparse_flags()
  report = capsys.readouterr().out
  assert 'sentences' in report and '[UNK]' in report
  metadata = records.load_metadata(output_dir)
  assert metadata['splits']['eval'] == {'files': [], 'num_examples': 0}
  assert metadata['static_masking']['dupe_factor'] == 2
  np.testing.assert_equal(
      metadata['splits']['train']['num_examples'],
      2 * metadata['stats']['splits']['train']['instances']['instances'],
  )


def test_each_step_logs_its_progress(
    corpus, static_run, tmp_path, progress_lines
):
  lines = progress_lines
  metadata = cpd.prepare_pretraining_data(
      [corpus[0]],
      str(tmp_path / 'out'),
      vocab_file=os.path.join(static_run[0], 'vocab.txt'),
      max_seq_length=_MAX_SEQ_LENGTH,
      masking='static',
      dupe_factor=2,
      eval_fraction=0.1,
      seed=3,
  )
  stats = metadata['stats']
  megabytes = stats['corpus']['bytes_read'] / 1e6
  train = stats['splits']['train']
  examples = metadata['splits']['train']['num_examples']
  assert train['examples'] == examples
  for done in (
      f'process corpus: {megabytes:.1f}/{megabytes:.1f} MB, done in',
      f'write train: {examples}/{examples} examples, done in',
      'write eval: ',
  ):
    assert any(line.startswith(done) for line in lines), (done, lines)
  assert f'write train: 1/{examples} examples ({100 / examples:.1f}%), ' in (
      '\n'.join(lines)
  )


class _KilledWriter:
  """A `tf.io.TFRecordWriter` whose process "dies" (raises) while writing.

  It raises after `after` records of a file whose name contains `shard`; the
  records already written stay in the (temporary) file, as after a kill.
  """

  real = tf.io.TFRecordWriter

  def __init__(self, shard, after):
    self._shard, self._after = shard, after

  def __call__(self, path):
    writer = self.real(path)
    count = [0]
    shard, after = self._shard, self._after

    class Writer:

      def __enter__(self):
        return self

      def __exit__(self, *unused):
        writer.close()

      def write(self, record):
        if shard in os.path.basename(path) and count[0] >= after:
          raise RuntimeError('simulated kill')
        writer.write(record)
        count[0] += 1

    return Writer()


def _temporary_files(directory):
  return sorted(
      name for name in tf.io.gfile.listdir(directory) if '.tmp-' in name
  )


@pytest.mark.slow
def test_killed_run_leaves_no_complete_looking_directory(
    corpus, static_run, dynamic_run, tmp_path, monkeypatch, caplog
):
  """A killed build leaves nothing a rerun cannot clean up.

  A kill mid-shard leaves only temporaries and no metadata.json; a failure
  while rewriting a complete directory leaves it as it was; a rerun removes
  the leftovers (and says how many) and writes the same records as an
  uninterrupted run.
  """
  output_dir = str(tmp_path / 'records')

  def prepare():
    return cpd.prepare_pretraining_data(
        [corpus[0]],
        output_dir,
        vocab_file=os.path.join(static_run[0], 'vocab.txt'),
        max_seq_length=_MAX_SEQ_LENGTH,
        masking='dynamic',
        eval_fraction=0.1,
        seed=3,
        num_shards=2,
    )

  def check_complete(metadata):
    assert records.load_metadata(output_dir) == metadata
    assert metadata['splits']['train']['files'] == [
        'train-00000-of-00002.tfrecord',
        'train-00001-of-00002.tfrecord',
    ]
    for split in records.SPLITS:
      # The uninterrupted run's examples (its one shard holds what these
      # two shards hold).
      expected = _parse_split(dynamic_run[0], dynamic_run[1], split)
      written = _parse_split(output_dir, metadata, split)
      assert len(written) == len(expected) > 0
      assert sorted(e['input_ids'].tobytes() for e in written) == sorted(
          e['input_ids'].tobytes() for e in expected
      )
    assert _temporary_files(output_dir) == []

  # Killed after 3 records of the first train shard.
  with monkeypatch.context() as patch:
    patch.setattr(tf.io, 'TFRecordWriter', _KilledWriter('train-00000', 3))
    with pytest.raises(RuntimeError, match='simulated kill'):
      prepare()
  names = tf.io.gfile.listdir(output_dir)
  assert not [n for n in names if n.endswith('.tfrecord')]
  assert records.METADATA_FILENAME not in names
  (leftover,) = _temporary_files(output_dir)
  assert leftover.startswith('train-00000-of-00002.tfrecord.tmp-')
  assert (
      sum(
          1 for _ in tf.data.TFRecordDataset(os.path.join(output_dir, leftover))
      )
      == 3
  )
  with pytest.raises(FileNotFoundError, match='metadata.json'):
    records.load_metadata(output_dir)

  # The rerun finds the leftover, removes it and completes.
  caplog.set_level('INFO', logger='absl')
  caplog.clear()
  metadata = prepare()
  assert 'found 1 leftover temporary file(s)' in caplog.text
  check_complete(metadata)

  # A failure while rewriting that complete directory: the new records go
  # to a staging directory beside it, removed on the failure, and the
  # complete records stay as they were, byte for byte.
  def snapshot():
    return {
        name: (tmp_path / 'records' / name).read_bytes()
        for name in sorted(os.listdir(output_dir))
    }

  before = snapshot()
  with monkeypatch.context() as patch:
    patch.setattr(tf.io, 'TFRecordWriter', _KilledWriter('train-00001', 1))
    with pytest.raises(RuntimeError, match='simulated kill'):
      prepare()
  assert snapshot() == before
  assert sorted(os.listdir(tmp_path)) == ['records']  # no staging, no lock
  # What a process killed outright leaves beside the records (its staging
  # directory) is removed by the rerun, which completes.
  os.makedirs(output_dir + '.tmp-host-1-abc/scratch')
  caplog.clear()
  check_complete(prepare())
  assert 'found 1 leftover temporary file(s)' in caplog.text
  assert sorted(os.listdir(tmp_path)) == ['records']


def test_shards_and_metadata_are_renamed_into_place(ram_dir):
  """On a non-local filesystem (gs:// in production) too."""
  features = {'input_ids': np.arange(12).reshape(6, 2)}
  stale = os.path.join(ram_dir, 'eval-00000-of-00001.tfrecord.tmp-x-1-2')
  with tf.io.gfile.GFile(stale, 'w') as f:
    f.write('partial')
  with tf.io.gfile.GFile(os.path.join(ram_dir, 'metadata.json'), 'w') as f:
    f.write('{}')
  assert records.remove_leftovers(ram_dir) == 1
  records.remove_metadata(ram_dir)
  assert tf.io.gfile.listdir(ram_dir) == []
  names = records.write_split(ram_dir, 'train', features, 3)
  assert sorted(tf.io.gfile.listdir(ram_dir)) == names
  rows = [
      tf.train.Example.FromString(r.numpy())
      .features.feature['input_ids']
      .int64_list.value
      for r in tf.data.TFRecordDataset(
          [os.path.join(ram_dir, n) for n in names]
      )
  ]
  assert [list(r) for r in rows] == features['input_ids'].tolist()


def test_a_second_writer_of_one_directory_is_refused(tmp_path):
  """One record creation per directory: the second stops, naming the first."""
  output_dir = str(tmp_path / 'records')
  with records.writer_lock(output_dir):
    with pytest.raises(cli.UserError, match=f'process {os.getpid()} on'):
      with records.writer_lock(output_dir):
        pass
  assert not os.path.exists(output_dir + records.LOCK_SUFFIX)


def test_the_lock_of_a_writer_that_is_gone_is_taken_over(tmp_path):
  import json  # pylint: disable=g-import-not-at-top
  import socket  # pylint: disable=g-import-not-at-top

  output_dir = str(tmp_path / 'records')
  dead_pid = 2**22 - 1  # above the kernel's default pid_max of live ones
  with open(output_dir + records.LOCK_SUFFIX, 'w') as f:
    json.dump(dict(host=socket.gethostname(), pid=dead_pid), f)
  with records.writer_lock(output_dir):
    pass
  assert not os.path.exists(output_dir + records.LOCK_SUFFIX)


def test_records_written_inside_their_corpus_are_not_read_back(tmp_path):
  corpus = tmp_path / 'corpus'
  write_fixture_corpus(corpus)
  output_dir = str(corpus / 'records')
  settings = dict(vocab_size=120, max_seq_length=32, seed=3)
  first = cpd.prepare_pretraining_data([str(corpus)], output_dir, **settings)
  again = cpd.prepare_pretraining_data([str(corpus)], output_dir, **settings)
  assert again['splits'] == first['splits']
  for metadata in (first, again):
    assert metadata['stats']['execution']['input_files'] == 1


def test_a_learned_sentencepiece_vocabulary_makes_the_records(corpus, tmp_path):
  output_dir = str(tmp_path / 'records')
  metadata = cpd.prepare_pretraining_data(
      [corpus[0]],
      output_dir,
      vocab_size=90,
      vocab_type='sentencepiece',
      max_seq_length=_MAX_SEQ_LENGTH,
      eval_fraction=0.1,
      seed=3,
  )
  assert metadata['vocab_file'] == 'spiece.model'
  assert metadata['tokenizer'] == 'sentencepiece-albert'
  assert metadata['source']['tokenizer'] == 'sentencepiece-albert'
  assert metadata['special_token_ids'] == dict(
      pad=0, unk=1, cls=2, sep=3, mask=4
  )
  assert not os.path.exists(os.path.join(output_dir, 'vocab.txt'))
  # The model in the records, read by the sentencepiece library itself.
  processor = sentencepiece.SentencePieceProcessor(
      model_file=os.path.join(output_dir, 'spiece.model')
  )
  assert processor.GetPieceSize() == metadata['vocab_size'] == 90
  corpus_words = set(' '.join(' '.join(s) for s in corpus[1]).lower().split())
  examples = _parse_split(output_dir, metadata, 'train')
  assert examples
  for example in examples:
    ids = example['input_ids'][: example['input_mask'].sum()].tolist()
    assert ids[0] == 2 and ids[-1] == 3 and 1 not in ids
    sep = ids.index(3)
    for segment in (ids[1:sep], ids[sep + 1 : -1]):
      # Truncation may cut a word at either end; the words between are the
      # corpus's, as the library decodes the pieces.
      words = processor.DecodeIds(segment).split()[1:-1]
      assert set(words) <= corpus_words, words
  # The model given back as --vocab_file makes the same records.
  again = cpd.prepare_pretraining_data(
      [corpus[0]],
      str(tmp_path / 'again'),
      vocab_file=os.path.join(output_dir, 'spiece.model'),
      max_seq_length=_MAX_SEQ_LENGTH,
      eval_fraction=0.1,
      seed=3,
  )
  assert again['splits'] == metadata['splits']
  assert _parse_split(str(tmp_path / 'again'), again, 'train')[0].keys()


def test_a_sentencepiece_size_the_text_cannot_fill_is_named(corpus, tmp_path):
  with pytest.raises(cli.UserError) as error:
    cpd.prepare_pretraining_data(
        [corpus[0]],
        str(tmp_path / 'records'),
        vocab_size=5000,
        vocab_type='sentencepiece',
    )
  assert re.fullmatch(
      r'--vocab_size=5000 is more pieces than SentencePiece can learn from '
      r'this text: ask for at most \d+\.',
      str(error.value),
  )
  assert not (tmp_path / 'records' / 'metadata.json').exists()


def test_vocab_type_with_a_vocab_file_is_refused(tmp_path):
  with pytest.raises(cli.UserError, match='drop --vocab_type'):
    cpd.PretrainingDataConfig(
        vocab_file=str(tmp_path / 'vocab.txt'), vocab_type='sentencepiece'
    )
