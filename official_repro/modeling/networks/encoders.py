"""Encoder configuration and the backbone registry.

A backbone (a module under `networks/backbones/` or anywhere) registers a
`Backbone`: name, options dataclass (`EncoderConfig.options`), reference
activation and a block builder; `transformer_encoder.TransformerEncoder`
assembles everything blocks share. Objectives never name a backbone: they
take an `EncoderConfig` and call `build_encoder`, optionally with
`SharedLayers` (ELECTRA's tied embeddings, TEAMS' shared bottom blocks),
which are used as they are, so their variables are the same variables.
"""

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Sequence, Type, Union

import tf_keras

from official.modeling.hyperparams import base_config
from official.nlp.configs import encoders as mg_encoders
from official_repro.common import cli
from official_repro.common import registry
from official_repro.modeling import activations
from official_repro.modeling import arguments
from official_repro.modeling.networks import transformer_encoder

# The package whose modules are the built-in backbones.
BACKBONES_PACKAGE = 'official_repro.modeling.networks.backbones'


@dataclasses.dataclass
class EncoderConfig(base_config.Config):
  """Architecture of a transformer text encoder.

  `backbone` is a registered name; `num_layers` L (ALBERT: applications of its
  one block); `embedding_width` E (None: H); `vocab_size` None until taken
  from the data; `hidden_activation` None: the backbone's, set by `validate`;
  `options` the backbone's options dataclass as a dict.
  """

  backbone: str = 'bert'
  hidden_size: int = 0
  num_layers: int = 0
  num_attention_heads: int = 0
  intermediate_size: int = 0
  embedding_width: Optional[int] = None
  vocab_size: Optional[int] = None
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  hidden_activation: Optional[str] = None
  dropout_rate: float = 0.1
  attention_dropout_rate: float = 0.1
  initializer_range: float = 0.02
  options: Dict[str, Any] = dataclasses.field(default_factory=dict)

  def __eq__(self, other: Any) -> bool:
    # Model Garden stores a dict field as a field-less `Config`, which the
    # generated dataclass equality would treat as always equal.
    return (
        isinstance(other, EncoderConfig) and self.as_dict() == other.as_dict()
    )

  def with_options(self, options: Dict[str, Any]) -> 'EncoderConfig':
    """A copy with `options` replaced (`replace` cannot add new keys)."""
    return dataclasses.replace(self, options=dict(options))

  def options_dict(self) -> Dict[str, Any]:
    """`options` as a plain dict."""
    if hasattr(self.options, 'as_dict'):
      return self.options.as_dict()
    return dict(self.options or {})

  @property
  def width(self) -> int:
    """E, the embedding width (H when `embedding_width` is unset)."""
    return self.embedding_width or self.hidden_size

  def initializer(self) -> tf_keras.initializers.Initializer:
    return tf_keras.initializers.TruncatedNormal(stddev=self.initializer_range)


@dataclasses.dataclass(frozen=True)
class SharedLayers:
  """Layers an encoder takes from another network instead of creating them.

  `blocks` become its bottom blocks 0..k-1; `embedding_block` is
  `TransformerEncoder.embedding_block` (position, type, LayerNorm) or None.
  """

  word_embedding_layer: Optional[tf_keras.layers.Layer] = None
  blocks: Sequence[tf_keras.layers.Layer] = ()
  embedding_block: Optional[Sequence[tf_keras.layers.Layer]] = None


def shared_from(
    network: tf_keras.Model,
    num_blocks: int = 0,
    word_embedding: bool = True,
    embedding_block: bool = False,
) -> SharedLayers:
  """The `SharedLayers` of `network`: embeddings and `num_blocks` blocks."""
  blocks = list(network.transformer_layers)
  if not 0 <= num_blocks <= len(blocks):
    raise cli.UserError(
        f'Cannot share {num_blocks} blocks of {network.name!r}, '
        f'which has {len(blocks)}.'
    )
  return SharedLayers(
      word_embedding_layer=(
          network.get_embedding_layer() if word_embedding else None
      ),
      blocks=tuple(blocks[:num_blocks]),
      embedding_block=network.embedding_block if embedding_block else None,
  )


BlockBuilder = Callable[[EncoderConfig, Any, int, bool], tf_keras.layers.Layer]


@dataclasses.dataclass(frozen=True)
class Backbone:
  """A registered backbone.

  `build_block(config, options, index, return_attention_scores)` makes a block
  called as `block([hidden_states, attention_mask])`, returning hidden states
  or `(hidden_states, probs [B, heads, T, T])`; `shares_blocks_across_layers`:
  one block at every layer (ALBERT); `validate_options(config, options)`
  raises a `config_error`; `flops_block(config, options)` gives its
  `metrics.flops.BlockFlops` (None: not modelled); `model_garden_config`
  its Model Garden `EncoderConfig`, where there is one.
  """

  name: str
  build_block: BlockBuilder
  options_cls: Optional[Type[Any]] = None
  default_activation: str = 'gelu_tanh'
  shares_blocks_across_layers: bool = False
  validate_options: Optional[Callable[[EncoderConfig, Any], None]] = None
  flops_block: Optional[Callable[[EncoderConfig, Any], Any]] = None
  model_garden_config: Optional[
      Callable[[EncoderConfig], mg_encoders.EncoderConfig]
  ] = None

  def parse_options(self, config: EncoderConfig):
    """The backbone's options object from `config.options`."""
    values = config.options_dict()
    if self.options_cls is None:
      if values:
        raise config_error(
            lambda name: f'{name("options")}={values} but backbone '
            f'{self.name!r} takes no options.'
        )
      return None
    known = {field.name for field in dataclasses.fields(self.options_cls)}
    unknown = sorted(set(values) - known)
    if unknown:
      raise config_error(
          lambda name: f'{name("options")} has {unknown}, which backbone '
          f'{self.name!r} does not have (its options: {sorted(known)}).'
      )
    return self.options_cls(**values)


def config_error(
    message: Callable[[arguments.Namer], str],
) -> arguments.ArgumentError:
  """An `ArgumentError` of `EncoderConfig` (options: `name('options.x')`)."""
  return arguments.ArgumentError(EncoderConfig.__name__, message)


def check_positive_ints(
    settings: Any, fields: Sequence[str], prefix: str = ''
) -> None:
  """Raises a `config_error` for the first of `fields` not a positive int."""
  for field in fields:
    value = getattr(settings, field)
    if not isinstance(value, int) or value <= 0:
      raise config_error(
          lambda name: f'{name(prefix + field)} must be a positive int, got '
          f'{value!r}.'
      )


_BACKBONES = registry.Registry[Backbone](
    'backbone', 'EncoderConfig.backbone', [BACKBONES_PACKAGE]
)
# Called with each backbone as it is registered (`add_registration_hook`).
_REGISTRATION_HOOKS: List[Callable[[Backbone], None]] = []


def register_backbone(backbone: Backbone) -> Backbone:
  """Adds a backbone to the registry (and tells the registration hooks)."""
  _BACKBONES.register(backbone.name, backbone)
  for hook in _REGISTRATION_HOOKS:
    hook(backbone)
  return backbone


def add_registration_hook(hook: Callable[[Backbone], None]) -> None:
  """Calls `hook(backbone)` for every backbone, registered so far or later.

  `hook` may see a backbone twice (a module imported under two names).
  """
  _REGISTRATION_HOOKS.append(hook)
  for backbone in _BACKBONES.entries():
    hook(backbone)


def backbone_names() -> List[str]:
  """The names of the registered backbones, sorted."""
  return sorted(_BACKBONES.names())


def get_backbone(
    name: str, setting: str = 'EncoderConfig.backbone'
) -> Backbone:
  """The registered backbone `name`; errors name `setting`."""
  return _BACKBONES.get(name, setting)


def validate(config: EncoderConfig) -> EncoderConfig:
  """Checks a config; returns it with the backbone's default activation."""
  backbone = arguments.checked(
      EncoderConfig.__name__,
      'backbone',
      lambda setting: get_backbone(config.backbone, setting),
  )
  check_positive_ints(
      config,
      ('hidden_size', 'num_layers', 'num_attention_heads', 'intermediate_size'),
  )
  if config.hidden_size % config.num_attention_heads:
    raise config_error(
        lambda name: f'{name("hidden_size")}={config.hidden_size} is not '
        f'divisible by {name("num_attention_heads")}='
        f'{config.num_attention_heads}.'
    )
  if config.hidden_activation is None:
    config = config.replace(hidden_activation=backbone.default_activation)
  arguments.checked(
      EncoderConfig.__name__,
      'hidden_activation',
      lambda setting: activations.check_name(config.hidden_activation, setting),
  )
  options = backbone.parse_options(config)
  if backbone.validate_options is not None:
    backbone.validate_options(config, options)
  if options is not None:
    config = config.with_options(dataclasses.asdict(options))
  return config


# Fields of configs saved before backbones had their own options: the old
# name, and the ConvBERT option it became (None: a renamed common field).
_LEGACY_FIELDS = dict(
    embedding_size=('embedding_width', None),
    head_ratio=(None, 'head_ratio'),
    conv_kernel_size=(None, 'kernel_size'),
    num_groups=(None, 'num_groups'),
    conv_only=(None, 'conv_only'),
    attention_only=(None, 'attention_only'),
)
# What 'gelu' meant for each backbone before activation names were explicit.
_LEGACY_GELU = dict(convbert='gelu_erf')


def upgrade_saved_config(saved: Dict[str, Any]) -> Dict[str, Any]:
  """An `EncoderConfig` dict written by an earlier version, in today's fields.

  Old: `embedding_size`, ConvBERT's options as top-level fields, and 'gelu'
  (tanh for BERT/ALBERT, erf for ConvBERT).
  """
  upgraded = dict(saved)
  backbone = upgraded.get('backbone', 'bert')
  options = dict(upgraded.get('options') or {})
  for old, (new_field, option) in _LEGACY_FIELDS.items():
    if old not in upgraded:
      continue
    value = upgraded.pop(old)
    if new_field is not None:
      upgraded.setdefault(new_field, value)
    elif backbone == 'convbert':
      options.setdefault(option, value)
  if backbone == 'convbert' or 'options' in saved:
    upgraded['options'] = options
  if upgraded.get('hidden_activation') == 'gelu':
    upgraded['hidden_activation'] = _LEGACY_GELU.get(backbone, 'gelu_tanh')
  return upgraded


# An `EncoderConfig` or its `as_dict()` form (a pretrainer's `get_config`
# stores the dict).
EncoderConfigLike = Union[EncoderConfig, Dict[str, Any]]


def as_encoder_config(config: EncoderConfigLike) -> EncoderConfig:
  """`config` itself, or the `EncoderConfig` of its `as_dict()` form."""
  if isinstance(config, EncoderConfig):
    return config
  return EncoderConfig.from_args(**config)


def with_vocab_size(
    config: EncoderConfig, vocab_size: int, source: str
) -> EncoderConfig:
  """The config with the data's `vocab_size` (from `source`), checked."""
  if config.vocab_size is not None and config.vocab_size != vocab_size:
    raise config_error(
        lambda name: f'{name("vocab_size")}={config.vocab_size} but the data '
        f'uses a vocabulary of {vocab_size} tokens ({source}); use the '
        f'vocabulary the records were written with, or leave '
        f"{name('vocab_size')} unset (None: the data's)."
    )
  return config.replace(vocab_size=vocab_size)


def to_model_garden_config(config: EncoderConfig) -> mg_encoders.EncoderConfig:
  """The same network as a Model Garden encoder config (stock baselines)."""
  backbone = get_backbone(config.backbone)
  if backbone.model_garden_config is None:
    raise config_error(
        lambda name: f'{name("backbone")}={config.backbone!r} has no Model '
        'Garden encoder; build it with official_repro.modeling.networks.'
        'encoders.build_encoder.'
    )
  _require_vocab_size(config)
  return backbone.model_garden_config(validate(config))


def _require_vocab_size(config: EncoderConfig) -> None:
  if config.vocab_size is None:
    raise config_error(
        lambda name: f'{name("vocab_size")} is unset; set it from the data '
        'vocabulary (with_vocab_size) first.'
    )


def build_block(config: EncoderConfig, index: int) -> tf_keras.layers.Layer:
  """A new block (own variables) at layer `index`, e.g. TEAMS' task layer."""
  config = validate(config)
  backbone = get_backbone(config.backbone)
  return backbone.build_block(
      config, backbone.parse_options(config), index, False
  )


def build_encoder(
    config: EncoderConfig,
    shared: Optional[SharedLayers] = None,
    return_attention_scores: bool = False,
    name: Optional[str] = None,
) -> transformer_encoder.TransformerEncoder:
  """Builds the `TransformerEncoder` a config (`vocab_size` set) describes.

  `shared` layers come from another network; `return_attention_scores` adds
  `attention_scores` (per layer `[batch, heads, seq, seq]`); `name` defaults
  to `<backbone>_encoder`.
  """
  config = validate(config)
  _require_vocab_size(config)
  backbone = get_backbone(config.backbone)
  options = backbone.parse_options(config)
  shared = shared or SharedLayers()
  if len(shared.blocks) > config.num_layers:
    raise cli.UserError(
        f'{len(shared.blocks)} shared blocks for an encoder of '
        f'{config.num_layers} layers.'
    )
  blocks = list(shared.blocks)
  own_block = None
  for index in range(len(blocks), config.num_layers):
    if own_block is None or not backbone.shares_blocks_across_layers:
      own_block = backbone.build_block(
          config, options, index, return_attention_scores
      )
    blocks.append(own_block)
  return transformer_encoder.TransformerEncoder(
      vocab_size=config.vocab_size,
      hidden_size=config.hidden_size,
      blocks=blocks,
      embedding_width=config.width,
      max_sequence_length=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size,
      dropout_rate=config.dropout_rate,
      initializer_range=config.initializer_range,
      word_embedding_layer=shared.word_embedding_layer,
      embedding_block=shared.embedding_block,
      return_attention_scores=return_attention_scores,
      name=name or f'{config.backbone}_encoder',
  )
