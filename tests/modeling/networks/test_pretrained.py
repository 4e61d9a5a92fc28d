"""Resolving and restoring encoders for fine-tuning, ours and foreign."""

import json

from official.nlp.configs import encoders as mg_encoders
import numpy as np
import pytest
import tensorflow as tf

from official_repro.common import cli
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import export_layout
from official_repro.modeling.networks import pretrained
from official_repro.training import export

_VOCAB = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + [
    f'w{i}' for i in range(25)
]


def _config(**overrides):
  fields = dict(
      hidden_size=16,
      num_layers=2,
      num_attention_heads=2,
      intermediate_size=32,
      max_position_embeddings=16,
  )
  fields.update(overrides)
  return encoders.EncoderConfig(**fields)


def _vocab_file(tmp_path):
  path = tmp_path / 'vocab.txt'
  path.write_text('\n'.join(_VOCAB) + '\n')
  return str(path)


def test_model_garden_bert_checkpoint_with_gin_architecture(tmp_path):
  """A foreign `Checkpoint(encoder=BertEncoder)`: gin sizes + --vocab_file."""
  config = _config(vocab_size=len(_VOCAB))
  stock = mg_encoders.build_encoder(encoders.to_model_garden_config(config))
  prefix = tf.train.Checkpoint(encoder=stock).write(str(tmp_path / 'bert'))
  resolved = pretrained.resolve(
      prefix, vocab_file=_vocab_file(tmp_path), config=_config()
  )
  assert resolved.config.vocab_size == len(_VOCAB)  # From the vocab file.
  assert resolved.checkpoint_path == prefix
  ours = encoders.build_encoder(resolved.config)
  pretrained.restore(ours, resolved.checkpoint_path)
  np.testing.assert_array_equal(
      ours.get_embedding_table().numpy(), stock.get_embedding_table().numpy()
  )


def test_foreign_checkpoint_needs_architecture_and_vocab(tmp_path):
  config = _config(vocab_size=len(_VOCAB))
  stock = mg_encoders.build_encoder(encoders.to_model_garden_config(config))
  prefix = tf.train.Checkpoint(encoder=stock).write(str(tmp_path / 'bert'))
  with pytest.raises(ValueError, match='encoder_config.json'):
    pretrained.resolve(prefix, vocab_file=_vocab_file(tmp_path))
  with pytest.raises(ValueError, match='--vocab_file'):
    pretrained.resolve(prefix, config=_config())


def test_export_folder_latest_checkpoint_and_tokenizer(tmp_path):
  config = _config(vocab_size=len(_VOCAB))
  encoder = encoders.build_encoder(config)
  holder = tf.train.Checkpoint()
  holder.checkpoint_items = {'encoder': encoder}
  for step in (5, 20, 10):
    export.export_encoder(
        holder,
        config.as_dict(),
        str(tmp_path),
        step,
        vocab_file=_vocab_file(tmp_path),
        lower_case=False,
    )
  for path in (tmp_path, tmp_path / 'encoder'):
    resolved = pretrained.resolve(str(path))
    assert resolved.checkpoint_path.endswith('encoder-20')
    assert resolved.config == config
    assert not resolved.lower_case
    with open(resolved.vocab_file) as f:
      assert f.read().split() == _VOCAB
  with open(tmp_path / 'encoder' / export_layout.TOKENIZER_FILENAME) as f:
    assert json.load(f) == {'lower_case': False, 'vocab_file': 'vocab.txt'}


def test_a_casing_the_vocabulary_does_not_have_is_refused(tmp_path):
  words = [f'word{chr(97 + i // 26)}{chr(97 + i % 26)}' for i in range(60)]
  tokens = _VOCAB[:5] + words
  config = _config(vocab_size=len(tokens))
  holder = tf.train.Checkpoint()
  holder.checkpoint_items = {'encoder': encoders.build_encoder(config)}
  vocab_file = tmp_path / 'uncased.txt'
  vocab_file.write_text('\n'.join(tokens) + '\n')
  export.export_encoder(
      holder,
      config.as_dict(),
      str(tmp_path),
      1,
      vocab_file=str(vocab_file),
      lower_case=False,
  )
  with pytest.raises(ValueError, match=r'is uncased .*lower_case=False'):
    pretrained.resolve(str(tmp_path))
  assert pretrained.resolve(str(tmp_path), lower_case=True).lower_case


def test_restoring_another_architecture_fails(tmp_path):
  config = _config(vocab_size=len(_VOCAB))
  prefix = tf.train.Checkpoint(encoder=encoders.build_encoder(config)).write(
      str(tmp_path / 'small')
  )
  deeper = encoders.build_encoder(_config(vocab_size=len(_VOCAB), num_layers=3))
  with pytest.raises(ValueError, match='does not hold this encoder'):
    pretrained.restore(deeper, prefix)


@pytest.mark.parametrize('damage', ['truncate', 'flip'])
def test_a_damaged_checkpoint_is_named_in_one_line(tmp_path, damage):
  config = _config(vocab_size=len(_VOCAB))
  prefix = tf.train.Checkpoint(encoder=encoders.build_encoder(config)).write(
      str(tmp_path / 'small')
  )
  (data_file,) = tf.io.gfile.glob(prefix + '.data-*')
  with open(data_file, 'r+b') as f:
    if damage == 'truncate':
      f.truncate(100)
    else:
      payload = bytearray(f.read())
      payload[100:200] = bytes(255 - b for b in payload[100:200])
      f.seek(0)
      f.write(payload)
  with pytest.raises(cli.UserError, match=f'{prefix}: its files are damaged'):
    pretrained.restore(encoders.build_encoder(config), prefix)


def test_encoder_exported_by_an_earlier_version_still_resolves(tmp_path):
  # encoder_config.json as written before backbone options and explicit
  # activation names: embedding_size, top-level ConvBERT fields, 'gelu'.
  config = _config(vocab_size=len(_VOCAB), embedding_width=8)
  encoder = encoders.build_encoder(config)
  export_dir = tmp_path / 'encoder'
  export_dir.mkdir()
  prefix = tf.train.Checkpoint(encoder=encoder).write(
      str(export_dir / 'encoder-7')
  )
  legacy = dict(
      config.as_dict(),
      embedding_size=8,
      hidden_activation='gelu',
      head_ratio=2,
      conv_kernel_size=9,
      num_groups=1,
      conv_only=False,
      attention_only=False,
  )
  del legacy['embedding_width'], legacy['options']
  (export_dir / 'encoder_config.json').write_text(json.dumps(legacy))
  resolved = pretrained.resolve(str(tmp_path), vocab_file=_vocab_file(tmp_path))
  assert resolved.checkpoint_path == prefix
  assert resolved.config == encoders.validate(config)
  assert resolved.config.hidden_activation == 'gelu_tanh'
  pretrained.restore(encoders.build_encoder(resolved.config), prefix)
  convbert = encoders.upgrade_saved_config(
      dict(legacy, backbone='convbert', conv_kernel_size=3)
  )
  assert convbert['hidden_activation'] == 'gelu_erf'
  assert convbert['options'] == dict(
      head_ratio=2,
      kernel_size=3,
      num_groups=1,
      conv_only=False,
      attention_only=False,
  )
