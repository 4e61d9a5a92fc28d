"""GLUE task plumbing that needs no model: dev files, metrics, eval points."""

import numpy as np
import pytest

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
