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

from official_repro.common import cli
from official_repro.modeling.networks import encoders

# The `layer_sharing` settings: how many of the generator's bottom layers are
# the discriminator's (003 Sec. 3.2, Table 4).
LAYER_SHARING = ('none', 'partial', 'full')


def _binding(gin_name: str, field: str) -> str:
  """`gin_name.field` (the gin binding), or `field` without a gin name."""
  return f'{gin_name}.{field}' if gin_name else field


def _is_number(value) -> bool:
  return not isinstance(value, bool) and isinstance(value, (int, float))


def generator_depth(
    num_layers: int,
    generator_layer_fraction: float = 1.0,
    generator_num_layers: Optional[int] = None,
    gin_name: str = '',
) -> int:
  """The generator's layer count.

  Args:
    num_layers: the discriminator's layer count L.
    generator_layer_fraction: a fraction of L in (0, 1]; the depth is L
      times it, rounded, at least one layer.
    generator_num_layers: an explicit count in [1, L], used instead of the
      fraction (which must then stay at its default 1.0); None: use the
      fraction.
    gin_name: the gin name of the model config (e.g. 'teams'), for the
      messages.

  Raises:
    ValueError: for both a count and a fraction other than 1.0, or a value
      outside those ranges.
  """
  fraction = _binding(gin_name, 'generator_layer_fraction')
  count = _binding(gin_name, 'generator_num_layers')
  if not _is_number(generator_layer_fraction) or not (
      0.0 < generator_layer_fraction <= 1.0
  ):
    raise cli.UserError(
        f'{fraction}={generator_layer_fraction!r} must be a fraction of the '
        "discriminator's layers in (0, 1]."
    )
  if generator_num_layers is None:
    return max(1, int(round(num_layers * generator_layer_fraction)))
  if generator_layer_fraction != 1.0:
    raise cli.UserError(
        f'{count}={generator_num_layers!r} and '
        f'{fraction}={generator_layer_fraction!r} both set the generator '
        f'depth: a count needs {fraction} = 1.0 (its default); to use the '
        f'fraction, leave {count} unbound (None).'
    )
  if (
      isinstance(generator_num_layers, bool)
      or not isinstance(generator_num_layers, int)
      or not 1 <= generator_num_layers <= num_layers
  ):
    raise cli.UserError(
        f'{count}={generator_num_layers!r} must be an int count of layers '
        f"in [1, {num_layers}] (the discriminator's), or None to use "
        f'{fraction}.'
    )
  return generator_num_layers


def num_shared_layers_for(
    layer_sharing: str, generator_num_layers: int, gin_name: str = ''
) -> int:
  """The generator's bottom layers that are the discriminator's.

  Args:
    layer_sharing: 'none' (0), 'partial' (the bottom half of the generator's
      layers, rounded down) or 'full' (all of them).
    generator_num_layers: the generator's layer count.
    gin_name: the gin name of the model config (e.g. 'teams'), for the
      message.

  Raises:
    ValueError: for an unknown `layer_sharing`.
  """
  if layer_sharing not in LAYER_SHARING:
    raise cli.UserError(
        f'{_binding(gin_name, "layer_sharing")}={layer_sharing!r}; expected '
        f'one of {list(LAYER_SHARING)}.'
    )
  return dict(
      none=0, partial=generator_num_layers // 2, full=generator_num_layers
  )[layer_sharing]


def check_shared_layers(
    num_shared_layers: int,
    generator_config: encoders.EncoderConfig,
    discriminator_config: encoders.EncoderConfig,
    setting: str,
    fix: str,
) -> None:
  """Stops layer sharing the two networks cannot have.

  Shared layers are the same layer objects in both networks, so they need a
  generator as wide as the discriminator, and no more of them than either
  network has.

  Args:
    num_shared_layers: the generator's bottom layers to share.
    generator_config: the generator's architecture.
    discriminator_config: the discriminator's.
    setting: the setting that asked for them, for the message
      ("electra.layer_sharing='partial'").
    fix: the change that makes the setting apply, for the message.

  Raises:
    UserError: naming `setting`, the sizes and `fix`.
  """
  if not num_shared_layers:
    return
  if generator_config.hidden_size != discriminator_config.hidden_size:
    problem = (
        f'needs a generator as wide as the discriminator, got hidden sizes '
        f'{generator_config.hidden_size} and '
        f'{discriminator_config.hidden_size}'
    )
  elif num_shared_layers > min(
      generator_config.num_layers, discriminator_config.num_layers
  ):
    problem = (
        f"exceeds the generator's {generator_config.num_layers} or the "
        f"discriminator's {discriminator_config.num_layers} layers"
    )
  else:
    return
  raise cli.UserError(
      f'{setting} shares {num_shared_layers} layers, which {problem}; {fix}.'
  )


def scale_generator(
    discriminator: encoders.EncoderConfig,
    generator_size: float,
    generator_layer_fraction: float = 1.0,
    generator_num_layers: Optional[int] = None,
    gin_name: str = '',
) -> encoders.EncoderConfig:
  """The generator config: the discriminator's, narrowed and/or shallower.

  Hidden size, attention heads and feed-forward size are multiplied by
  `generator_size` (rounded; at least one head); the depth is
  `generator_depth(L, generator_layer_fraction, generator_num_layers,
  gin_name)`. Embedding width, backbone and its options stay the
  discriminator's (ConvBERT keeps `head_ratio`: a generator with fewer heads
  than the ratio keeps one self-attention head, as in the ConvBERT
  reference).

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
      num_layers=generator_depth(
          discriminator.num_layers,
          generator_layer_fraction,
          generator_num_layers,
          gin_name,
      ),
      embedding_width=discriminator.width,
  )
  return encoders.validate(generator)


def check_embedding_block(
    tie_embeddings: bool,
    generator: encoders.EncoderConfig,
    discriminator: encoders.EncoderConfig,
    gin_name: str = '',
) -> None:
  """Raises UserError unless the two embedding blocks can be one.

  Args:
    tie_embeddings: whether the word table is shared too (it must be).
    generator: the generator's config.
    discriminator: the discriminator's config.
    gin_name: the gin name of the model config (e.g. 'electra'), for the
      messages.
  """
  block = _binding(gin_name, 'tie_embedding_block')
  if not tie_embeddings:
    raise cli.UserError(
        f'{block} = True shares the position and type embeddings beside a '
        f"shared word table; set {_binding(gin_name, 'tie_embeddings')} = "
        f'True too, or {block} = False.'
    )
  for field in ('width', 'max_position_embeddings', 'type_vocab_size'):
    ours, theirs = getattr(generator, field), getattr(discriminator, field)
    if ours != theirs:
      raise cli.UserError(
          f"{block} = True needs the generator's {field} ({ours}) to be the "
          f"discriminator's ({theirs}); set {block} = False."
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
    UserError: sharing layers between networks of different widths, or more
      layers than either network has (`check_shared_layers`); tying the
      embedding block without the word table, or between embedding blocks
      of different shapes.
  """
  check_shared_layers(
      num_shared_layers,
      generator_config,
      discriminator_config,
      f'num_shared_layers={num_shared_layers}',
      "share none, or give the generator the discriminator's width "
      '(generator_size 1.0)',
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
