"""A SavedModel's `serve_text` tokenizes as the records and readers do."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from official_repro.data import vocab
from official_repro.training import serving

_TOKENS = list(vocab.SPECIAL_TOKENS) + [
    'fu',
    '##ß',
    '##ach',
    'fuss',
    'ﬁ',
    'fi',
    '##nal',
    'ο',
    '##δ',
    '##ο',
    '##ς',
    '##σ',
    'ab',
    'a',
    '##a',
    'b',
    '[',
    ']',
    'mask',
]
_TEXTS = [
    'Fußach ﬁnal',
    'ΟΔΟΣ a\x0bb',
    '[MASK] ' + 'a' * 101,
    'a' * 10,  # cut to max_seq_length - 2 pieces
    '',
]
_PIECES = [
    ['fu', '##ß', '##ach', 'ﬁ', '##nal'],
    ['ο', '##δ', '##ο', '##ς', 'ab'],
    ['[', 'mask', ']', '[UNK]'],
    ['a'] + ['##a'] * 9,
    [],
]


def _echo_encoder():
  """An 'encoder' whose sequence output is its input ids."""
  inputs = {
      name: tf_keras.Input([None], dtype=tf.int32, name=name)
      for name in ('input_word_ids', 'input_mask', 'input_type_ids')
  }
  ids = inputs['input_word_ids']
  sequence = tf_keras.layers.Lambda(
      lambda x: tf.cast(x, tf.float32)[..., None]
  )(ids)
  pooled = tf_keras.layers.Lambda(lambda x: tf.cast(x[:, :1], tf.float32))(ids)
  return tf_keras.Model(
      inputs, dict(sequence_output=sequence, pooled_output=pooled)
  )


@pytest.mark.slow
def test_serve_text_gives_the_tokenizers_ids(tmp_path):
  max_seq_length = 8
  vocab_file = tmp_path / 'vocab.txt'
  vocab_file.write_text(''.join(token + '\n' for token in _TOKENS))
  path = serving.export(
      _echo_encoder(),
      str(tmp_path / 'saved_model'),
      vocab_file=str(vocab_file),
      lower_case=True,
      max_seq_length=max_seq_length,
  )
  assert (tmp_path / 'saved_model' / 'assets' / 'vocab.txt').exists()
  served = tf.saved_model.load(path).signatures['serve_text'](
      text=tf.constant(_TEXTS)
  )
  ids = served['sequence_output'].numpy()[..., 0].astype(np.int32)
  expected = vocab.tokenize_with_vocab(_TEXTS, _TOKENS, lower_case=True)
  assert [[_TOKENS[i] for i in line] for line in expected] == _PIECES
  special = vocab.SpecialTokenIds.from_vocab(_TOKENS)
  for row, line in zip(ids, expected):
    line = [special.cls] + line[: max_seq_length - 2] + [special.sep]
    assert row[: len(line)].tolist() == line
    assert (row[len(line) :] == special.pad).all()
