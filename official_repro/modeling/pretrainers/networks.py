"""The networks of a generator/discriminator objective, and how they share.

A generator is derived from the discriminator's config by two independent
settings:
  * `generator_size`: the fraction of the discriminator's hidden size,
    attention heads and feed-forward size (ELECTRA and 001: 1/4);
  * `generator_layers`: its depth, a count of layers (an int) or a fraction
    of the discriminator's (a float; 003's generator has half the layers).
It may share with the discriminator its word-embedding layer (ELECTRA's
tied embeddings, one variable) and its bottom `num_shared_blocks`
transformer blocks (TEAMS' partial sharing: the same layer objects, which
needs equal widths).
"""

import dataclasses
from typing import Union

import tf_keras

from official_repro.modeling.networks import encoders


def generator_depth(
    num_layers: int, generator_layers: Union[int, float]
) -> int:
  """The generator's layer count.

  Args:
    num_layers: the discriminator's layer count L.
    generator_layers: an int is a count in [1, L]; a float a fraction of L in
      (0, 1], rounded, at least one layer.

  Raises:
    ValueError: outside those ranges.
  """
  if isinstance(generator_layers, bool) or not isinstance(
      generator_layers, (int, float)
  ):
    raise ValueError(
        f'generator_layers must be an int (a count) or a float '
        f'(a fraction), got {generator_layers!r}.'
    )
  if isinstance(generator_layers, int):
    if not 1 <= generator_layers <= num_layers:
      raise ValueError(
          f'generator_layers={generator_layers} must be a count '
          f'in [1, {num_layers}].'
      )
    return generator_layers
  if not 0.0 < generator_layers <= 1.0:
    raise ValueError(
        f'generator_layers={generator_layers} must be a '
        'fraction in (0, 1] (or an int count).'
    )
  return max(1, int(round(num_layers * generator_layers)))


def scale_generator(
    discriminator: encoders.EncoderConfig,
    generator_size: float,
    generator_layers: Union[int, float] = 1.0,
) -> encoders.EncoderConfig:
  """The generator config: the discriminator's, narrowed and/or shallower.

  Hidden size, attention heads and feed-forward size are multiplied by
  `generator_size` (rounded; at least one head); the depth is
  `generator_depth(L, generator_layers)`. Embedding width, backbone and its
  options stay the discriminator's (ConvBERT keeps `head_ratio`: a generator
  with fewer heads than the ratio keeps one self-attention head, as in the
  ConvBERT reference).

  Raises:
    ValueError: for a size outside (0, 1], a bad depth, or a scaled hidden
      size not divisible by the scaled number of heads.
  """
  if not 0.0 < generator_size <= 1.0:
    raise ValueError(
        f'generator_size must be in (0, 1], got ' f'{generator_size}.'
    )
  hidden = max(1, int(round(discriminator.hidden_size * generator_size)))
  heads = max(1, int(round(discriminator.num_attention_heads * generator_size)))
  intermediate = max(
      1, int(round(discriminator.intermediate_size * generator_size))
  )
  generator = discriminator.replace(
      hidden_size=hidden,
      num_attention_heads=heads,
      intermediate_size=intermediate,
      num_layers=generator_depth(discriminator.num_layers, generator_layers),
      embedding_width=discriminator.width,
  )
  return encoders.validate(generator, name='generator (scaled encoder)')


@dataclasses.dataclass(frozen=True)
class GeneratorDiscriminator:
  """The two encoders of a generator/discriminator model and their configs."""

  generator: tf_keras.Model
  discriminator: tf_keras.Model
  generator_config: encoders.EncoderConfig
  discriminator_config: encoders.EncoderConfig


def build_networks(
    discriminator_config: encoders.EncoderConfig,
    generator_config: encoders.EncoderConfig,
    tie_embeddings: bool = True,
    num_shared_blocks: int = 0,
) -> GeneratorDiscriminator:
  """Builds the discriminator, then the generator sharing what it asks.

  Args:
    discriminator_config: the discriminator's architecture.
    generator_config: the generator's (e.g. from `scale_generator`).
    tie_embeddings: share the word-embedding layer (one variable).
    num_shared_blocks: the generator's bottom blocks that are the
      discriminator's bottom blocks (same objects).

  Raises:
    ValueError: sharing blocks between networks of different widths, or more
      blocks than either network has.
  """
  if num_shared_blocks:
    if generator_config.hidden_size != discriminator_config.hidden_size:
      raise ValueError(
          f'num_shared_blocks={num_shared_blocks} needs a generator as wide as '
          f'the discriminator (generator_size 1.0), got hidden sizes '
          f'{generator_config.hidden_size} and '
          f'{discriminator_config.hidden_size}.'
      )
    if num_shared_blocks > generator_config.num_layers:
      raise ValueError(
          f"num_shared_blocks={num_shared_blocks} exceeds the generator's "
          f'{generator_config.num_layers} layers.'
      )
  discriminator = encoders.build_encoder(
      discriminator_config, name='discriminator'
  )
  generator = encoders.build_encoder(
      generator_config,
      shared=encoders.shared_from(
          discriminator, num_shared_blocks, word_embedding=tie_embeddings
      ),
      name='generator',
  )
  return GeneratorDiscriminator(
      generator, discriminator, generator_config, discriminator_config
  )
