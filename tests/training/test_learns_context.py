"""The whole pretraining path learns what only context predicts.

A synthetic corpus of two-line documents whose second line repeats the first
(words drawn uniformly from a small vocabulary) goes through
`create_pretraining_data`, dynamic masking, the masked-LM task and the
trainer; each document is one `[CLS] first [SEP] second [SEP]` instance. A
masked word is predictable only from its copy at the same place in the other
segment. A third of the tokens is masked, so that several words of a line are
missing at once: their identities could be read off the two segments' word
counts, but not which of the masked places each one fills, so a model
without position information stays far below one that copies by position. A
control corpus, whose second lines are drawn independently, has nothing to
copy: the trained model must score near chance there, which catches a label
that leaks into the input.

Each of these mutations makes a test below fail: an inverted attention mask
in the encoder, a position table that is not added to the embeddings, and
masked-LM labels read one position after the [MASK] tokens.
"""

import os
import random

import gin
import pytest
import tensorflow as tf

from official_repro.data import create_pretraining_data
from official_repro.training import experiment
from official_repro.training import gin_utils

# The tests share module fixtures: one xdist worker runs them all
# (--dist loadgroup, pytest.ini), so the fixtures are built once.
pytestmark = pytest.mark.xdist_group('test_learns_context')

_NUM_WORDS = 24
_HALF_LENGTH = 16
_MAX_SEQ_LENGTH = 2 * _HALF_LENGTH + 3
_SPECIAL = ('[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]')
_WORDS = tuple(f'w{i:02d}' for i in range(_NUM_WORDS))


def _write_corpus(path, copy, num_lines, seed):
  """Writes `num_lines` documents of two lines of `_HALF_LENGTH` words.

  Writes `num_lines` documents of two lines of `_HALF_LENGTH` words; the
  second line repeats the first when `copy`, else is drawn independently.
  """
  rng = random.Random(seed)
  with open(path, 'w') as f:
    for _ in range(num_lines):
      first = [rng.choice(_WORDS) for _ in range(_HALF_LENGTH)]
      second = (
          first if copy else [rng.choice(_WORDS) for _ in range(_HALF_LENGTH)]
      )
      f.write(' '.join(first) + '\n' + ' '.join(second) + '\n\n')


def _records(root, name, copy, num_lines, seed):
  """Writes a corpus and its records; returns the record directory."""
  corpus_dir = root / f'{name}_corpus'
  corpus_dir.mkdir()
  _write_corpus(corpus_dir / 'corpus.txt', copy, num_lines, seed)
  vocab = root / 'vocab.txt'
  if not vocab.exists():
    vocab.write_text('\n'.join(_SPECIAL + _WORDS) + '\n')
  output_dir = str(root / f'{name}_records')
  create_pretraining_data.prepare_pretraining_data(
      [str(corpus_dir)],
      output_dir,
      vocab_file=str(vocab),
      sentence_per_line=True,
      max_seq_length=_MAX_SEQ_LENGTH,
      short_seq_prob=0.0,
      eval_fraction=0.1,
      seed=seed,
  )
  return output_dir


def _run(records, model_dir, mode, steps):
  """Trains or evaluates a 2-layer masked LM on `records`."""
  gin.clear_config()
  try:
    gin_utils.parse_config(
        [os.path.join(gin_utils.REPO_ROOT, 'gin/pretrain/masked_lm.gin')],
        [
            'encoder.hidden_size = 64',
            'encoder.num_layers = 2',
            'encoder.num_attention_heads = 4',
            'encoder.intermediate_size = 128',
            f'encoder.max_position_embeddings = {_MAX_SEQ_LENGTH}',
            'encoder.dropout_rate = 0.0',
            'encoder.attention_dropout_rate = 0.0',
            f'pretrain_data.input_path = {records!r}',
            f'pretrain_data.max_seq_length = {_MAX_SEQ_LENGTH}',
            'pretrain_data.train_batch_size = 32',
            'pretrain_data.mask_rate = 0.3',
            'pretrain_data.eval_batch_size = 32',
            f'experiment.train_steps = {steps}',
            f'experiment.steps_per_loop = {steps}',
            f'experiment.checkpoint_interval = {steps}',
            'experiment.seed = 1',
            'optimization.optimizer = "adamw"',
            'optimization.learning_rate = 3e-3',
            'optimization.warmup_steps = 50',
            'optimization.weight_decay_rate = 0.01',
        ],
    )
    params, settings = experiment.experiment_config()
    return experiment.run(
        params, settings, tf.distribute.get_strategy(), str(model_dir), mode
    )
  finally:
    gin.clear_config()


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """Evaluations of a masked LM trained on the copy corpus.

  (copy-corpus eval, control-corpus eval) of a masked LM trained on the
  copy corpus.
  """
  root = tmp_path_factory.mktemp('context')
  copy_records = _records(root, 'copy', copy=True, num_lines=2000, seed=1)
  control_records = _records(root, 'control', copy=False, num_lines=400, seed=2)
  model_dir = root / 'model'
  result = _run(copy_records, model_dir, 'train_and_eval', steps=800)
  control = _run(control_records, model_dir, 'eval', steps=800)
  return result['eval'], control['eval']


@pytest.mark.slow
def test_masked_words_are_predicted_from_their_copy(trained):
  copied, _ = trained
  # Chance is 1 / 24 (words are drawn uniformly). A masked word's copy is
  # masked too in about 30% of cases, which caps accuracy near 0.7.
  assert copied['masked_lm_accuracy'] > 0.5, copied


@pytest.mark.slow
def test_nothing_is_predicted_without_a_copy(trained):
  _, control = trained
  assert control['masked_lm_accuracy'] < 0.15, control
