"""The networks of a generator/discriminator objective, and how they share.

A generator is derived from the discriminator's config of L layers by
independent settings:
  * `generator_size`: the fraction of the discriminator's hidden size,
    attention heads and feed-forward size (ELECTRA and 001: 1/4);
  * its depth: `generator_layer_fraction` of L (003's generator has half
    the layers), or `generator_num_layers`, an explicit count used instead
    of the fraction (`generator_depth`).
It may share with the discriminator its word-embedding layer (ELECTRA's
tied embeddings, one variable), optionally with the rest of the embedding
block (position and type embeddings and their LayerNorm: how
google-research/electra and Model Garden's TEAMS tie; Model Garden's
`ElectraPretrainTask` ties the word table only), and its bottom
`num_shared_layers` transformer layers (TEAMS' partial sharing: the same
layer objects, which needs equal widths). The task configs set that count
by `layer_sharing`, 'none', 'partial' or 'full' (`num_shared_layers_for`).
"""

import dataclasses
from typing import Optional

import tf_keras

from official_repro.modeling import arguments
from official_repro.modeling.networks import encoders

# The `layer_sharing` settings: how many of the generator's bottom layers are
# the discriminator's (003 Sec. 3.2, Table 4).
LAYER_SHARING = ('none', 'partial', 'full')


def _is_number(value) -> bool:
  return not isinstance(value, bool) and isinstance(value, (int, float))


def generator_depth(
    num_layers: int,
    generator_layer_fraction: float = 1.0,
    generator_num_layers: Optional[int] = None,
) -> int:
  """The generator's layer count.

  Args:
    num_layers: the discriminator's layer count L.
    generator_layer_fraction: a fraction of L in (0, 1]; the depth is L
      times it, rounded, at least one layer.
    generator_num_layers: an explicit count in [1, L], used instead of the
      fraction (which must then stay at its default 1.0); None: use the
      fraction.

  Raises:
    ArgumentError: for both a count and a fraction other than 1.0, or a
      value outside those ranges.
  """
  fraction, count = generator_layer_fraction, generator_num_layers
  if not _is_number(fraction) or not 0.0 < fraction <= 1.0:
    raise arguments.ArgumentError(
        'generator_depth',
        lambda name: f'{name("generator_layer_fraction")}={fraction!r} must be '
        "a fraction of the discriminator's layers in (0, 1].",
    )
  if count is None:
    return max(1, int(round(num_layers * fraction)))
  if fraction != 1.0:

    def both(name: arguments.Namer) -> str:
      count_name = name('generator_num_layers')
      fraction_name = name('generator_layer_fraction')
      return (
          f'{count_name}={count!r} and {fraction_name}={fraction!r} both set '
          f'the generator depth: a count needs {fraction_name} = 1.0 (its '
          f'default); to use the fraction, leave {count_name} unset (None).'
      )

    raise arguments.ArgumentError('generator_depth', both)
  if (
      isinstance(count, bool)
      or not isinstance(count, int)
      or not 1 <= count <= num_layers
  ):
    raise arguments.ArgumentError(
        'generator_depth',
        lambda name: f'{name("generator_num_layers")}={count!r} must be an '
        f"int count of layers in [1, {num_layers}] (the discriminator's), or "
        f'None to use {name("generator_layer_fraction")}.',
    )
  return count


def num_shared_layers_for(layer_sharing: str, generator_num_layers: int) -> int:
  """The generator's bottom layers that are the discriminator's.

  Args:
    layer_sharing: 'none' (0), 'partial' (the bottom half of the generator's
      layers, rounded down) or 'full' (all of them).
    generator_num_layers: the generator's layer count.

  Raises:
    ArgumentError: for an unknown `layer_sharing`.
  """
  if layer_sharing not in LAYER_SHARING:
    raise arguments.ArgumentError(
        'num_shared_layers_for',
        lambda name: f'{name("layer_sharing")}={layer_sharing!r}; expected '
        f'one of {list(LAYER_SHARING)}.',
    )
  return dict(
      none=0, partial=generator_num_layers // 2, full=generator_num_layers
  )[layer_sharing]


def shared_layers_problem(
    num_shared_layers: int,
    generator_config: encoders.EncoderConfig,
    discriminator_config: encoders.EncoderConfig,
) -> Optional[str]:
  """Why the two networks cannot share `num_shared_layers` layers, or None.

  Shared layers are the same layer objects in both networks, so they need a
  generator as wide as the discriminator, and no more of them than either
  network has.

  Args:
    num_shared_layers: the generator's bottom layers to share.
    generator_config: the generator's architecture.
    discriminator_config: the discriminator's.

  Returns:
    What sharing them needs ('needs a generator as wide as ...'), or None.
  """
  if not num_shared_layers:
    return None
  if generator_config.hidden_size != discriminator_config.hidden_size:
    return (
        f'needs a generator as wide as the discriminator, got hidden sizes '
        f'{generator_config.hidden_size} and '
        f'{discriminator_config.hidden_size}'
    )
  if num_shared_layers > min(
      generator_config.num_layers, discriminator_config.num_layers
  ):
    return (
        f"exceeds the generator's {generator_config.num_layers} or the "
        f"discriminator's {discriminator_config.num_layers} layers"
    )
  return None


def scale_generator(
    discriminator: encoders.EncoderConfig,
    generator_size: float,
    generator_layer_fraction: float = 1.0,
    generator_num_layers: Optional[int] = None,
) -> encoders.EncoderConfig:
  """The generator config: the discriminator's, narrowed and/or shallower.

  Hidden size, attention heads and feed-forward size are multiplied by
  `generator_size` (rounded; at least one head); the depth is
  `generator_depth(L, generator_layer_fraction, generator_num_layers)`.
  Embedding width, backbone and its options stay the discriminator's
  (ConvBERT keeps `head_ratio`: a generator with fewer heads than the ratio
  keeps one self-attention head, as in the ConvBERT reference).

  Raises:
    ArgumentError: for a size outside (0, 1], a bad depth, or a scaled
      config that is invalid (e.g. a hidden size not divisible by the
      scaled number of heads).
  """
  if not _is_number(generator_size) or not 0.0 < generator_size <= 1.0:
    raise arguments.ArgumentError(
        'scale_generator',
        lambda name: f'{name("generator_size")} must be in (0, 1], got '
        f'{generator_size!r}.',
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
      num_layers=generator_depth(
          discriminator.num_layers,
          generator_layer_fraction,
          generator_num_layers,
      ),
      embedding_width=discriminator.width,
  )
  try:
    return encoders.validate(generator)
  except arguments.ArgumentError as error:
    problem = error.text()
    raise arguments.ArgumentError(
        'scale_generator',
        lambda name: f'{name("generator_size")}={generator_size!r} scales '
        f'the discriminator to an invalid generator: {problem}',
    ) from error


def check_embedding_block(
    tie_embeddings: bool,
    generator: encoders.EncoderConfig,
    discriminator: encoders.EncoderConfig,
) -> None:
  """Raises `ArgumentError` unless the two embedding blocks can be one.

  Args:
    tie_embeddings: whether the word table is shared too (it must be).
    generator: the generator's config.
    discriminator: the discriminator's config.
  """
  if not tie_embeddings:

    def untied(name: arguments.Namer) -> str:
      block = name('tie_embedding_block')
      return (
          f'{block} = True shares the position and type embeddings beside a '
          f"shared word table; set {name('tie_embeddings')} = True too, or "
          f'{block} = False.'
      )

    raise arguments.ArgumentError('check_embedding_block', untied)
  for field in ('width', 'max_position_embeddings', 'type_vocab_size'):
    ours, theirs = getattr(generator, field), getattr(discriminator, field)
    if ours != theirs:
      raise arguments.ArgumentError(
          'check_embedding_block',
          lambda name: f'{name("tie_embedding_block")} = True needs the '
          f"generator's {field} ({ours}) to be the discriminator's "
          f'({theirs}); set {name("tie_embedding_block")} = False.',
      )


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
    num_shared_layers: int = 0,
    tie_embedding_block: bool = False,
) -> GeneratorDiscriminator:
  """Builds the discriminator, then the generator sharing what it asks.

  Args:
    discriminator_config: the discriminator's architecture.
    generator_config: the generator's (e.g. from `scale_generator`).
    tie_embeddings: share the word-embedding layer (one variable).
    num_shared_layers: the generator's bottom layers that are the
      discriminator's bottom layers (same objects).
    tie_embedding_block: also share the position and type embeddings and
      their LayerNorm (needs `tie_embeddings`, and equal embedding widths,
      positions and types).

  Raises:
    ArgumentError: sharing layers between networks of different widths, or
      more layers than either network has (`shared_layers_problem`); tying
      the embedding block without the word table, or between embedding
      blocks of different shapes.
  """
  problem = shared_layers_problem(
      num_shared_layers, generator_config, discriminator_config
  )
  if problem:
    raise arguments.ArgumentError(
        'build_networks',
        lambda name: f'{name("num_shared_layers")}={num_shared_layers} '
        f"{problem}; share none, or give the generator the discriminator's "
        'width (generator_size 1.0).',
    )
  if tie_embedding_block:
    check_embedding_block(
        tie_embeddings, generator_config, discriminator_config
    )
  discriminator = encoders.build_encoder(
      discriminator_config, name='discriminator'
  )
  generator = encoders.build_encoder(
      generator_config,
      shared=encoders.shared_from(
          discriminator,
          num_shared_layers,
          word_embedding=tie_embeddings,
          embedding_block=tie_embedding_block,
      ),
      name='generator',
  )
  return GeneratorDiscriminator(
      generator, discriminator, generator_config, discriminator_config
  )
