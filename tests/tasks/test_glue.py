"""GLUE task plumbing that needs no model: dev files, metrics, eval points."""

import gin
import numpy as np
import pytest

from official_repro.tasks import finetuning_registry
from official_repro.tasks import glue
from official_repro.training import finetuning

_VOCAB = [
    '[PAD]',
    '[UNK]',
    '[CLS]',
    '[SEP]',
    '[MASK]',
    'a',
    'cat',
    'sat',
    'dog',
    'ran',
]
_MNLI_HEADER = (
    'index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\t'
    'sentence2_binary_parse\tsentence1_parse\tsentence2_parse\t'
    'sentence1\tsentence2\tlabel1\tgold_label'
)


def _mnli_dir(tmp_path):
  folder = tmp_path / 'MNLI'
  folder.mkdir()
  labels = ('entailment', 'neutral', 'contradiction')
  for split, rows in (('train', 3), ('dev_matched', 3), ('dev_mismatched', 2)):
    lines = [_MNLI_HEADER] + [
        f'{i}\t0\t0\tg\tb\tb\tp\tp\ta cat sat\ta dog ran\t{labels[i]}\t'
        f'{labels[i]}'
        for i in range(rows)
    ]
    (folder / f'{split}.tsv').write_text('\n'.join(lines) + '\n')
  vocab = tmp_path / 'vocab.txt'
  vocab.write_text('\n'.join(_VOCAB) + '\n')
  return str(tmp_path), str(vocab)


def test_mnli_scores_matched_and_mismatched_in_one_pass(tmp_path):
  data_dir, vocab = _mnli_dir(tmp_path)
  task = glue.GlueTask(
      glue.GlueTaskConfig(
          task='mnli', data_dir=data_dir, vocab_file=vocab, max_seq_length=16
      )
  )
  features, files = task.load_features(glue.DEV_SPLIT)
  assert files == ('dev_matched', 'dev_mismatched')
  np.testing.assert_array_equal(features[glue.EVAL_SPLIT_KEY], [0, 0, 0, 1, 1])
  labels = features['label_ids']
  # Right on every matched example, wrong on the first mismatched one.
  predictions = labels.copy()
  predictions[3] = (predictions[3] + 1) % 3
  logits = np.eye(3)[predictions]
  metrics = task.compute_metrics(
      {
          'logits': logits,
          'label_ids': labels,
          glue.EVAL_SPLIT_KEY: features[glue.EVAL_SPLIT_KEY],
      }
  )
  assert metrics['accuracy'] == 1.0
  assert metrics['dev_mismatched/accuracy'] == 0.5
  assert metrics['score'] == 1.0


@pytest.mark.parametrize(
    'steps_per_epoch, train_steps, expected',
    [
        (10, 30, [10, 20, 30]),
        (10, 25, [10, 20, 25]),  # 2.5 epochs: the end is evaluated too.
        (10, 5, [5]),
    ],
)
def test_evaluation_points(steps_per_epoch, train_steps, expected):
  assert finetuning.evaluation_steps(steps_per_epoch, train_steps) == expected


def _pair_dir(tmp_path):
  """MRPC, STS-B and SST-2 folders of 3 train and 2 dev rows."""
  pairs = [('a cat sat', 'a dog'), ('dog ran', 'a cat ran'), ('cat', 'a')]
  mrpc, stsb, sst2 = (tmp_path / name for name in ('MRPC', 'STS-B', 'SST-2'))
  for folder in (mrpc, stsb, sst2):
    folder.mkdir()
  stsb_header = (
      'index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\t'
      'sentence1\tsentence2\tscore'
  )
  for split, rows in (('train', 3), ('dev', 2)):
    lines = ['Quality\t#1 ID\t#2 ID\t#1 String\t#2 String'] + [
        f'{i % 2}\t{i}\t{i}\t{a}\t{b}' for i, (a, b) in enumerate(pairs[:rows])
    ]
    (mrpc / f'{split}.tsv').write_text('\n'.join(lines) + '\n')
    lines = [stsb_header] + [
        f'{i}\tg\tf\t2012\t{i}\tn\tn\t{a}\t{b}\t{1.25 * (i + 1)}'
        for i, (a, b) in enumerate(pairs[:rows])
    ]
    (stsb / f'{split}.tsv').write_text('\n'.join(lines) + '\n')
    lines = ['sentence\tlabel'] + [
        f'{a}\t{i % 2}' for i, (a, _) in enumerate(pairs[:rows])
    ]
    (sst2 / f'{split}.tsv').write_text('\n'.join(lines) + '\n')
  vocab = tmp_path / 'vocab.txt'
  vocab.write_text('\n'.join(_VOCAB) + '\n')
  return str(tmp_path), str(vocab), pairs


def _features(data_dir, vocab, task, split, **options):
  config = glue.GlueTaskConfig(
      task=task,
      data_dir=data_dir,
      vocab_file=vocab,
      max_seq_length=16,
      **options,
  )
  return glue.GlueTask(config).load_features(split)[0]


def _segments(features, row):
  """The two sentences of a feature row as token lists (ids to words)."""
  words = np.array(_VOCAB)
  ids, types = features['input_word_ids'][row], features['input_type_ids'][row]
  mask = features['input_mask'][row].astype(bool)
  tokens = [w for w in words[ids[mask]] if w not in ('[CLS]', '[SEP]')]
  first = int(np.sum(types[mask] == 0)) - 2  # [CLS] and the first [SEP].
  return tokens[:first], tokens[first:]


@pytest.mark.parametrize('task', ['mrpc', 'stsb'])
def test_double_unordered_adds_each_training_pair_swapped(tmp_path, task):
  data_dir, vocab, pairs = _pair_dir(tmp_path)
  doubled = _features(data_dir, vocab, task, 'train', double_unordered=True)
  assert len(doubled['input_word_ids']) == 2 * len(pairs)
  for row, (a, b) in enumerate(pairs):
    assert _segments(doubled, row) == (a.split(), b.split())
    assert _segments(doubled, row + 3) == (b.split(), a.split())
  np.testing.assert_array_equal(
      doubled['label_ids'][3:], doubled['label_ids'][:3]
  )
  # Only training pairs, and only by request.
  assert (
      len(
          _features(
              data_dir, vocab, task, glue.DEV_SPLIT, double_unordered=True
          )['input_word_ids']
      )
      == 2
  )
  assert len(_features(data_dir, vocab, task, 'train')['input_word_ids']) == 3


def test_double_unordered_leaves_single_sentence_tasks_alone(tmp_path):
  data_dir, vocab, _ = _pair_dir(tmp_path)
  features = _features(data_dir, vocab, 'sst2', 'train', double_unordered=True)
  assert len(features['input_word_ids']) == 3


def test_stsb_targets_are_scaled_to_the_unit_interval(tmp_path):
  data_dir, vocab, _ = _pair_dir(tmp_path)
  for split, scores in (
      ('train', [1.25, 2.5, 3.75]),
      (glue.DEV_SPLIT, [1.25, 2.5]),
  ):
    scaled = _features(data_dir, vocab, 'stsb', split, scale_stsb_targets=True)
    np.testing.assert_allclose(
        scaled['label_ids'], np.array(scores) / 5, rtol=1e-6
    )
    raw = _features(data_dir, vocab, 'stsb', split)
    np.testing.assert_allclose(raw['label_ids'], scores, rtol=1e-6)


def test_the_data_rules_are_gin_bindings(clean_gin):
  gin.parse_config(
      ['glue.double_unordered = True', 'glue.scale_stsb_targets = True']
  )
  config = finetuning_registry.get('stsb').build_config(task='stsb')
  assert config.double_unordered and config.scale_stsb_targets
