"""Encoder builder: registry, sharing (embeddings, blocks), serialization."""

import numpy as np
import pytest
import tensorflow as tf

from official_repro.modeling import arguments
from official_repro.modeling.networks import encoders


def _config(**overrides):
  fields = dict(
      hidden_size=32,
      num_layers=3,
      num_attention_heads=2,
      intermediate_size=64,
      embedding_width=16,
      vocab_size=50,
      max_position_embeddings=16,
  )
  fields.update(overrides)
  return encoders.validate(encoders.EncoderConfig(**fields))


def _inputs(batch=2, length=8):
  ids = tf.constant(
      np.arange(batch * length).reshape(batch, length) % 50, tf.int32
  )
  return dict(
      input_word_ids=ids,
      input_mask=tf.ones_like(ids),
      input_type_ids=tf.zeros_like(ids),
  )


def _num_params(model):
  return sum(v.shape.num_elements() for v in model.trainable_variables)


@pytest.mark.parametrize('backbone', ['bert', 'albert'])
def test_shared_word_embedding_is_one_variable(backbone):
  discriminator = encoders.build_encoder(_config(backbone=backbone))
  generator = encoders.build_encoder(
      _config(backbone=backbone, hidden_size=8, intermediate_size=16),
      shared=encoders.shared_from(discriminator),
  )
  assert generator.get_embedding_table() is discriminator.get_embedding_table()
  shared = discriminator.get_embedding_table()
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(
        generator(_inputs())['sequence_output']
    ) + tf.reduce_sum(discriminator(_inputs())['sequence_output'])
  assert tape.gradient(loss, shared) is not None
  assert sum(v is shared for v in generator.trainable_variables) == 1


# 001 Table IV / V: parameters of the discriminator with embeddings.
@pytest.mark.parametrize(
    'backbone, expected', [('bert', 13.5e6), ('albert', 4.8e6)]
)
def test_small_parameter_counts_match_paper_001(backbone, expected):
  config = encoders.EncoderConfig(
      backbone=backbone,
      hidden_size=256,
      num_layers=12,
      num_attention_heads=4,
      intermediate_size=1024,
      embedding_width=128,
      vocab_size=30522,
  )
  encoder = encoders.build_encoder(config)
  count = _num_params(encoder)
  assert abs(count - expected) / expected < 0.03, count


@pytest.mark.parametrize(
    'overrides, message',
    [
        (
            dict(backbone='gpt'),
            r"^EncoderConfig: backbone must be one of \[.*'albert', "
            r".*'bert', .*'convbert'.*\], got 'gpt'",
        ),
        (
            dict(hidden_size=30, num_attention_heads=4),
            r'^EncoderConfig: hidden_size=30 is not divisible by '
            r'num_attention_heads=4\.$',
        ),
        (
            dict(num_layers=0),
            '^EncoderConfig: num_layers must be a positive int, got 0.$',
        ),
    ],
)
def test_bad_config_names_the_argument(overrides, message):
  with pytest.raises(arguments.ArgumentError, match=message):
    _config(**overrides)


def test_vocab_size_conflict_names_source():
  with pytest.raises(
      ValueError, match=r'^EncoderConfig: vocab_size=10 .*vocab.txt'
  ):
    encoders.with_vocab_size(_config(vocab_size=10), 50, source='/r/vocab.txt')
  assert (
      encoders.with_vocab_size(_config(vocab_size=None), 50, 'x').vocab_size
      == 50
  )


@pytest.mark.slow
@pytest.mark.parametrize('backbone', ['bert', 'albert', 'convbert'])
def test_shared_bottom_blocks_are_the_other_networks_objects(backbone):
  discriminator = encoders.build_encoder(_config(backbone=backbone))
  generator = encoders.build_encoder(
      _config(backbone=backbone, num_layers=2),
      shared=encoders.shared_from(discriminator, num_blocks=1),
  )
  own_blocks = generator.transformer_layers
  assert own_blocks[0] is discriminator.transformer_layers[0]
  assert own_blocks[1] is not discriminator.transformer_layers[1]
  generator(_inputs())
  discriminator(_inputs())
  shared = {v.ref() for v in discriminator.transformer_layers[0].weights}
  assert shared <= {v.ref() for v in generator.trainable_variables}
  with pytest.raises(ValueError, match='Cannot share 4 blocks'):
    encoders.shared_from(discriminator, num_blocks=4)
