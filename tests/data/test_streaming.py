"""Tests for official_repro.data.streaming (the shared per-file transforms)."""

import dataclasses
import os

import pytest
import tensorflow as tf

from tests.conftest import write_fixture_files
from tests.conftest import write_fixture_vocab
from official_repro.data import create_pretraining_data as cpd
from official_repro.data import records
from official_repro.data import streaming
from official_repro.data import vocab


def _files(names):
  return [streaming.InputFile(f'/c/{n}', n, 10) for n in names]


def test_stable_hash_is_fixed():
  # Keys, shards and splits derive from it: a change reorders every record
  # directory, so it must be deliberate.
  assert streaming.stable_hash('a', 1) == 0x8181C16B4AD83CC1
  assert streaming.stable_hash('a', 1) != streaming.stable_hash('a', 2)
  assert 0 <= streaming.stable_hash('x') < 2**64


class TestEvalSplit:

  def test_files_mode_holds_out_whole_files_whatever_their_order(self):
    files = _files([f'book{i}.txt' for i in range(40)])
    split = streaming.EvalSplit(files, 'file', 0.1, seed=5)
    assert len(split.eval_files) == 4
    reordered = streaming.EvalSplit(files[::-1], 'file', 0.1, seed=5)
    assert reordered.eval_files == split.eval_files
    assert streaming.EvalSplit(files, 'file', 0.1, 6).eval_files != (
        split.eval_files
    )
    # At least one file, never all.
    assert len(streaming.EvalSplit(files[:3], 'file', 0.01, 5).eval_files) == 1
    assert len(streaming.EvalSplit(files[:2], 'file', 0.9, 5).eval_files) == 1
    name = sorted(split.eval_files)[0]
    assert split.assign(name, 0, ['A.', 'B.']) == [('eval', ['A.', 'B.'])]

  def test_documents_mode_draws_each_document(self):
    split = streaming.EvalSplit(_files(['a.txt']), 'blank_line', 0.2, seed=1)
    draws = [split.assign('a.txt', i, ['S.'])[0][0] for i in range(2000)]
    assert 300 < draws.count('eval') < 500
    assert draws == [
        split.assign('a.txt', i, ['S.'])[0][0] for i in range(2000)
    ]

  def test_single_document_holds_out_its_last_sentences(self):
    split = streaming.EvalSplit(_files(['book.txt']), 'file', 0.2, seed=1)
    sentences = [f'Sentence {i}.' for i in range(10)]
    assert split.assign('book.txt', 0, sentences) == [
        ('train', sentences[:8]),
        ('eval', sentences[8:]),
    ]
    assert 'single document' in split.describe({'train': 1, 'eval': 1})

  def test_no_eval(self):
    split = streaming.EvalSplit(_files(['a.txt']), 'blank_line', 0.0, seed=1)
    assert split.assign('a.txt', 3, ['S.']) == [('train', ['S.'])]


def test_vocabulary_sample_reads_a_bounded_seeded_choice_of_files():
  files = [
      streaming.InputFile(f'/c/{i}.txt', f'{i}.txt', 100) for i in range(50)
  ]
  chosen = streaming.files_to_sample(files, seed=3, budget_bytes=950)
  assert len(chosen) == 10
  assert chosen == [f for f in files if f in chosen]  # Corpus order.
  assert streaming.files_to_sample(files[::-1], 3, 950) == chosen[::-1]
  assert streaming.files_to_sample(files, 4, 950) != chosen
  assert streaming.files_to_sample(files, 3, 10**9) == files


def test_input_names_are_relative_to_the_input(tmp_path, to_ram):
  corpus = tmp_path / 'corpus'
  (corpus / 'sub').mkdir(parents=True)
  (corpus / 'sub' / 'b.txt').write_text('B.')
  (corpus / 'a.txt').write_text('A.')
  (tmp_path / 'a.txt').write_text('Other A.')
  files = streaming.list_input_files([str(corpus), str(tmp_path / 'a.txt')])
  assert [f.name for f in files] == ['a.txt', 'sub/b.txt', 'a.txt@1']
  assert [f.size for f in files] == [2, 2, 8]
  # The same corpus elsewhere (gs:// in production) has the same names.
  remote = streaming.list_input_files([to_ram(str(corpus))])
  assert [f.name for f in remote] == ['a.txt', 'sub/b.txt']


@pytest.fixture(scope='module')
def processor_inputs(tmp_path_factory):
  root = tmp_path_factory.mktemp('streaming')
  corpus = write_fixture_files(root / 'corpus', num_files=2, num_documents=6)
  tokens = vocab.load_vocab(str(write_fixture_vocab(root / 'vocab.txt')))
  files = streaming.list_input_files([str(corpus)])
  return files, tokens


def _process(processor, input_file):
  """A file's records (all groups) and counters."""
  stats = streaming.RecordStats()
  output = [r for group in processor.process(input_file, stats) for r in group]
  return output, stats


def _static_masking_config(**options):
  """Static masking, 2 copies, 20% eval, seed 7; `options` override."""
  return cpd.PretrainingDataConfig(
      **{
          'vocab_size': 100,
          'max_seq_length': 32,
          'masking': 'static',
          'dupe_factor': 2,
          'eval_fraction': 0.2,
          'seed': 7,
          **options,
      }
  )


def test_file_processor_is_a_function_of_the_file(processor_inputs):
  files, tokens = processor_inputs
  config = _static_masking_config(num_shards=3)
  eval_split = streaming.EvalSplit(files, 'blank_line', 0.2, seed=7)
  processor = streaming.FileProcessor(
      config.streaming_settings(), tokens, eval_split
  )
  first, stats = _process(processor, files[0])
  _process(processor, files[1])
  again, _ = _process(processor, files[0])
  assert first == again
  assert len({r[2] for r in first}) == len(first)  # Unique keys.
  assert all(r[1] == r[2] % (3 if r[0] == 'train' else 1) for r in first)
  examples = sum(s.examples for s in stats.splits.values())
  assert (
      examples
      == len(first)
      == 2 * sum(s.instances.instances for s in stats.splits.values())
  )
  assert stats.corpus.documents == 6
  assert sum(s.documents for s in stats.splits.values()) == 6


@pytest.mark.slow
@pytest.mark.parametrize('group_chars', [400, 700])
def test_a_file_is_processed_in_groups_of_its_own_text(
    processor_inputs, group_chars
):
  """Groups end where the file's text reaches the budget; keys stay global.

  At 700 characters the files' text ends inside a group, so a processor
  that carried a file's last group over to the next file would differ.
  """
  files, tokens = processor_inputs
  config = _static_masking_config(
      next_sentence_prediction=True, group_mb=group_chars / 2**20
  )
  eval_split = streaming.EvalSplit(files, 'blank_line', 0.2, seed=7)

  def groups(processor, input_file):
    stats = streaming.RecordStats()
    return list(processor.process(input_file, stats)), stats

  def processor():
    return streaming.FileProcessor(
        config.streaming_settings(), tokens, eval_split
    )

  for this, other in (files, files[::-1]):
    alone, stats = groups(processor(), this)
    assert stats.groups == len(alone) >= 2
    assert all(alone)
    after_another = processor()
    groups(after_another, other)
    assert groups(after_another, this)[0] == alone
  first, stats = groups(processor(), files[0])
  records_ = [r for group in first for r in group]
  assert len({r[2] for r in records_}) == len(records_)  # Unique keys.
  documents = {streaming.stable_hash('f000.txt', i) for i in range(6)}
  assert {r[3] for r in records_} == documents  # Indices in the file.
  assert stats.corpus.documents == 6
  # A budget larger than the file: one group.
  whole = dataclasses.replace(config, group_mb=1.0)
  one_group = streaming.FileProcessor(
      whole.streaming_settings(), tokens, eval_split
  )
  (one,), one_stats = groups(one_group, files[0])
  assert one_stats.groups == 1
  assert {r[3] for r in one} == documents


def test_record_stats_add_up():
  one, two = streaming.RecordStats(), streaming.RecordStats()
  one.corpus.skip_lines('heading', 2)
  two.corpus.skip_lines('heading', 3)
  two.corpus.skip_unreadable_file('x.txt', 'permission denied')
  one.splits['train'].tokenization.tokens = 10
  two.splits['train'].tokenization.tokens = 30
  two.splits['train'].tokenization.unk_tokens = 4
  two.splits['eval'].instances.instances = 5
  total = streaming.merge_stats([one, two])
  assert total.corpus.lines_skipped_by_reason == {'heading': 5}
  assert total.corpus.unreadable_files == ['x.txt: permission denied']
  assert total.splits['train'].tokenization.unk_rate == 0.1
  assert total.splits['eval'].instances.instances == 5
  assert total.total_tokenization().tokens == 40


@pytest.mark.parametrize(
    'sentence, counts',
    [
        ('T h e  q u i c k', (8, 8)),
        ('I saw a cat.', (4, 2)),
        ('w00 w01 B2B covid19 x_1', (0, 0)),
        ('caf\u00e9 au lait', (2, 0)),
        ("don't", (2, 1)),
        ('', (0, 0)),
    ],
)
def test_letter_words_are_whole_words_of_letters(sentence, counts):
  assert streaming.letter_words(sentence) == counts


def test_write_shard_counts_mixing(ram_dir):
  keyed = [(key, key % 7, b'x%d' % key) for key in range(1500)]
  path = os.path.join(ram_dir, 'train-00000-of-00001.tfrecord')
  summary = streaming.write_shard(keyed, path)
  assert (summary.examples, summary.window) == (1500, 1000)
  assert summary.distinct_documents == 7
  assert tf.io.gfile.listdir(ram_dir) == [os.path.basename(path)]
  written = [r.numpy() for r in tf.data.TFRecordDataset(path)]
  assert written == [data for _, _, data in keyed]
  mixing = streaming.mixing_stats([summary, streaming.ShardSummary('e')])
  assert mixing['distinct_documents_min'] == 7
  assert mixing['shards_measured'] == 1
  assert records.SPLITS == ('train', 'eval')


def test_folders_this_repository_wrote_are_not_read_as_books(tmp_path):
  corpus = tmp_path / 'corpus'
  for folder, names in (
      ('records', ['metadata.json', 'vocab.txt']),
      ('runs/electra', ['model_config.json', 'config.gin', 'notes.txt']),
      ('export', ['encoder_config.json', 'vocab.txt']),
      ('out', ['vocab.txt']),  # the output folder, before its metadata
      ('out.tmp-host-1-ab', ['vocab.txt']),  # its staging sibling
      ('books', ['metadata.json', 'a.txt']),  # a user's, kept
  ):
    (corpus / folder).mkdir(parents=True)
    for name in names:
      (corpus / folder / name).write_text('x')
  (corpus / 'b.txt').write_text('B.')
  files = streaming.list_input_files(
      [str(corpus)], output_dir=str(corpus / 'out')
  )
  assert [f.name for f in files] == ['b.txt', 'books/a.txt']
  with pytest.raises(ValueError, match='leaving out folders written by'):
    streaming.list_input_files([str(corpus / 'records')])
