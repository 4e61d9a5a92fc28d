"""A generator's config from its discriminator's, and how much they share."""

import pytest

from official_repro.modeling import arguments
from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import networks


def test_generator_size_scales_width_not_depth():
  discriminator = encoders.EncoderConfig(
      hidden_size=256,
      num_layers=12,
      num_attention_heads=4,
      intermediate_size=1024,
      embedding_width=128,
      vocab_size=100,
  )
  generator = networks.scale_generator(discriminator, 0.25)
  assert (
      generator.hidden_size,
      generator.num_attention_heads,
      generator.intermediate_size,
  ) == (64, 1, 256)
  assert generator.num_layers == 12
  assert generator.embedding_width == 128
  with pytest.raises(ValueError, match='generator_size'):
    networks.scale_generator(discriminator, 0.0)


# (generator_layer_fraction, generator_num_layers, depth) of a generator over
# a 12-layer discriminator, by hand: 12 * 0.5 = 6; 12 * 0.25 = 3; 12 * 1/3 =
# 4; 12 * 0.01 = 0.12 rounds to 0, raised to one layer; a count is itself.
@pytest.mark.parametrize(
    'fraction, count, depth',
    [
        (0.5, None, 6),
        (1.0, None, 12),
        (0.25, None, 3),
        (1 / 3, None, 4),
        (0.01, None, 1),
        (1.0, 3, 3),
        (1.0, 1, 1),
        (1.0, 12, 12),
    ],
)
def test_generator_depth_is_the_fraction_or_the_count(fraction, count, depth):
  assert networks.generator_depth(12, fraction, count) == depth
  discriminator = encoders.EncoderConfig(
      hidden_size=256,
      num_layers=12,
      num_attention_heads=4,
      intermediate_size=1024,
      vocab_size=100,
  )
  generator = networks.scale_generator(discriminator, 1.0, fraction, count)
  assert generator.num_layers == depth
  assert generator.hidden_size == 256  # Depth and width are independent.


def test_a_count_and_a_fraction_are_refused_together():
  with pytest.raises(
      arguments.ArgumentError,
      match=r'^generator_depth: generator_num_layers=3 and '
      r'generator_layer_fraction=0\.5 both set',
  ):
    networks.generator_depth(12, 0.5, 3)


@pytest.mark.parametrize(
    'fraction, count, message',
    [
        (
            1.0,
            0,
            r'generator_num_layers=0 must be an int count of layers '
            r'in \[1, 12\]',
        ),
        (1.0, 13, r'generator_num_layers=13 .* in \[1, 12\]'),
        (1.0, 6.0, r'generator_num_layers=6\.0 must be an int'),
        (1.0, True, r'generator_num_layers=True must be an int'),
        (1.5, None, r'generator_layer_fraction=1\.5 .* in \(0, 1\]'),
        (0.0, None, r'generator_layer_fraction=0\.0 .* in \(0, 1\]'),
        ('0.5', None, r"generator_layer_fraction='0\.5' .* in \(0, 1\]"),
        (True, None, r'generator_layer_fraction=True .* in \(0, 1\]'),
    ],
)
def test_generator_depth_out_of_range(fraction, count, message):
  with pytest.raises(ValueError, match=message):
    networks.generator_depth(12, fraction, count)


@pytest.mark.parametrize(
    'layer_sharing, generator_num_layers, shared',
    [
        ('partial', 6, 3),
        ('partial', 1, 0),
        ('partial', 7, 3),
        ('full', 6, 6),
        ('none', 6, 0),
    ],
)
def test_num_shared_layers_for(layer_sharing, generator_num_layers, shared):
  assert (
      networks.num_shared_layers_for(layer_sharing, generator_num_layers)
      == shared
  )


def test_unknown_layer_sharing_is_refused():
  with pytest.raises(
      arguments.ArgumentError,
      match=r"^num_shared_layers_for: layer_sharing='half'; expected one of",
  ):
    networks.num_shared_layers_for('half', 6)
