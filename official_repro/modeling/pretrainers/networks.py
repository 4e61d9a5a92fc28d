"""The networks of a generator/discriminator objective, and how they share.

A generator is the discriminator's config scaled by `generator_size` (width,
heads, feed-forward) and `generator_depth` (a fraction of L or a count). It
may share the word-embedding layer (ELECTRA), the whole embedding block
(google-research/electra and Model Garden's TEAMS; Model Garden's ELECTRA
ties the word table only) and its bottom `num_shared_layers` blocks (TEAMS'
`layer_sharing`: the same objects, so equal widths).
"""

from typing import Optional, Tuple

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
  """The generator's layer count for a discriminator of `num_layers` L.

  `generator_layer_fraction` in (0, 1] gives round(L * fraction), at least 1;
  `generator_num_layers` in [1, L] is used instead (the fraction then 1.0).
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
  """Shared bottom layers: 'none' 0, 'partial' half (rounded down), 'full'."""
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

  Shared layers are the same objects, so they need equal widths and no more
  than either network has.
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

  Width, heads and feed-forward size times `generator_size` (rounded, at
  least 1), depth from `generator_depth`; embedding width and backbone
  options stay (a ConvBERT generator with fewer heads than the ratio keeps
  one, as in the reference).
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
  """Raises `ArgumentError` unless the two embedding blocks can be one."""
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


def build_networks(
    discriminator_config: encoders.EncoderConfig,
    generator_config: encoders.EncoderConfig,
    tie_embeddings: bool = True,
    num_shared_layers: int = 0,
    tie_embedding_block: bool = False,
) -> Tuple[tf_keras.Model, tf_keras.Model]:
  """Builds the discriminator, then the generator sharing what it asks.

  Returns (generator, discriminator). Sharing is checked first
  (`shared_layers_problem`, `check_embedding_block`).
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
  return generator, discriminator
