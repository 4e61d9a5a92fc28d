"""Encoder configuration and the backbone registry.

A backbone is one module under `official_repro/modeling/networks/backbones/`
(or anywhere else) that calls `register_backbone` with a `Backbone`: its name,
its own options dataclass (`EncoderConfig.options` holds its values), the
reference's feed-forward activation, and a function that builds its
transformer blocks. Everything the blocks share is assembled by
`transformer_encoder.TransformerEncoder` (embeddings, pooler, outputs,
checkpoint layout), so a backbone is only its block. (The configuration
files are read outside `modeling/`, where `EncoderConfig` and each
backbone's options dataclass are made settable, the latter as backbones
register: `add_registration_hook`.)

`EncoderConfig.backbone` picks the backbone; objectives never name one. They
receive an `EncoderConfig`, derive others from it (a smaller generator) and
call `build_encoder`, optionally with `SharedLayers`: a word-embedding layer
(ELECTRA's tied embeddings) and the bottom transformer blocks of another
network (TEAMS' partial generator/discriminator sharing). The shared objects
are used as they are, so their variables are the same variables.
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

  Attributes:
    backbone: a registered backbone name (`backbone_names()`): 'bert',
      'albert', 'convbert', ...
    hidden_size: width H of the transformer layers.
    num_layers: number of transformer layers L (ALBERT: applications of the
      one shared block).
    num_attention_heads: attention heads per layer; must divide hidden_size.
    intermediate_size: feed-forward inner width.
    embedding_width: token-embedding width E; None means E = H. When E != H a
      dense projection maps embeddings to H.
    vocab_size: number of token ids; None until taken from the data.
    max_position_embeddings: size of the learned position table.
    type_vocab_size: number of segment (token type) ids.
    hidden_activation: feed-forward activation ('gelu_tanh', 'gelu_erf',
      'relu', ...; see `activations`); None means the backbone's reference
      activation, filled in by `validate`.
    dropout_rate: dropout on embeddings and sublayer outputs.
    attention_dropout_rate: dropout on attention probabilities.
    initializer_range: stddev of the truncated-normal initializer.
    options: the backbone's own settings (its registered options dataclass
      as a dict), e.g. ConvBERT's kernel size.
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

  Attributes:
    word_embedding_layer: a word-embedding layer of output width E (tied
      embeddings).
    blocks: transformer blocks used as the encoder's bottom blocks 0..k-1
      (same objects, so the same variables).
    embedding_block: the (position-embedding, type-embedding, LayerNorm)
      layers of width E (`TransformerEncoder.embedding_block`), or None.
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
  """What to take from `network`: its embeddings and bottom blocks.

  Args:
    network: an encoder built by `build_encoder`.
    num_blocks: how many of its bottom transformer blocks to share.
    word_embedding: share its word-embedding layer.
    embedding_block: share its position and type embeddings and their
      LayerNorm too.

  Raises:
    ValueError: if `network` has fewer than `num_blocks` blocks.
  """
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

  Attributes:
    name: the `EncoderConfig.backbone` value.
    build_block: `(config, options, index, return_attention_scores) -> layer`
      builds transformer block `index` (0-based). A block is called as
      `block([hidden_states, attention_mask])` and returns the new hidden
      states, or `(hidden_states, probabilities [B, heads, T, T])` when built
      with `return_attention_scores`.
    options_cls: the dataclass of the backbone's own options (None: none).
    default_activation: the feed-forward activation of the reference code.
    shares_blocks_across_layers: one block object is applied at every layer
      (ALBERT): `build_block` is called once and reused.
    validate_options: `(config, options)` raises a `config_error` naming
      the options (`options.<option>`) and fields that do not fit.
    flops_block: `(config, options) -> metrics.flops.BlockFlops`, the FLOPs
      terms of the backbone's block (`BlockFlops()`: ELECTRA's BERT block;
      a block of another shape subclasses it in the backbone's module;
      None: the backbone's FLOPs are not modelled, and `count_flops` says
      so).
    model_garden_config: `config -> official.nlp.configs.encoders.EncoderConfig`
      of the same network, where Model Garden has one (stock baselines).
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
    """The backbone's options object from `config.options`.

    Raises:
      ArgumentError: options the backbone does not have.
    """
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
  """An `ArgumentError` of `EncoderConfig`.

  Args:
    message: `name -> message`; a field is named `name(field)`, an option
      of the backbone `name('options.<option>')`.
  """
  return arguments.ArgumentError(EncoderConfig.__name__, message)


_BACKBONES = registry.Registry[Backbone](
    'backbone', 'EncoderConfig.backbone', [BACKBONES_PACKAGE]
)
# Called with each backbone as it is registered (`add_registration_hook`).
_REGISTRATION_HOOKS: List[Callable[[Backbone], None]] = []


def register_backbone(backbone: Backbone) -> Backbone:
  """Adds a backbone to the registry (and tells the registration hooks).

  Raises:
    ValueError: if another backbone has the name.
  """
  _BACKBONES.register(backbone.name, backbone)
  for hook in _REGISTRATION_HOOKS:
    hook(backbone)
  return backbone


def add_registration_hook(hook: Callable[[Backbone], None]) -> None:
  """Calls `hook(backbone)` for every backbone, registered so far or later.

  For code that keeps something per backbone (the settings of its options
  where a configuration system resolves them). A backbone's module may be
  imported twice under one name, which registers it again, so `hook` may
  see a backbone more than once.
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
  """The registered backbone `name`.

  Args:
    name: the backbone's name.
    setting: how the error message names the setting that gave `name`.

  Raises:
    UserError: naming the setting and the registered backbones.
  """
  return _BACKBONES.get(name, setting)


def validate(config: EncoderConfig) -> EncoderConfig:
  """Checks a config; returns it with the backbone's default activation.

  Raises:
    ArgumentError: naming the fields (and options) and the constraint they
      break (`config_error`).
  """
  backbone = arguments.checked(
      EncoderConfig.__name__,
      'backbone',
      lambda setting: get_backbone(config.backbone, setting),
  )
  for field in (
      'hidden_size',
      'num_layers',
      'num_attention_heads',
      'intermediate_size',
  ):
    value = getattr(config, field)
    if not isinstance(value, int) or value <= 0:
      raise config_error(
          lambda name: f'{name(field)} must be a positive int, got {value!r}.'
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

  Earlier versions had `embedding_size`, ConvBERT's settings as top-level
  fields (`head_ratio`, `conv_kernel_size`, ...; other backbones had to keep
  their defaults, which are dropped) and a `'gelu'` activation meaning the
  tanh form for BERT/ALBERT and the erf form for ConvBERT. Exported BERT
  encoders (`encoder_config.json`) written then still load for fine-tuning.
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
  """Returns the config with `vocab_size` set, checking any explicit value.

  Args:
    config: the encoder config.
    vocab_size: the vocabulary size of the data.
    source: where `vocab_size` comes from, for the error message.

  Raises:
    ArgumentError: if the config names a different vocabulary size.
  """
  if config.vocab_size is not None and config.vocab_size != vocab_size:
    raise config_error(
        lambda name: f'{name("vocab_size")}={config.vocab_size} but the data '
        f'uses a vocabulary of {vocab_size} tokens ({source}); use the '
        f'vocabulary the records were written with, or leave '
        f"{name('vocab_size')} unset (None: the data's)."
    )
  return config.replace(vocab_size=vocab_size)


def to_model_garden_config(config: EncoderConfig) -> mg_encoders.EncoderConfig:
  """The same network as a Model Garden encoder config (stock baselines).

  Raises:
    ArgumentError: for a backbone Model Garden does not have.
  """
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
  """A new transformer block of the config's backbone, outside any network.

  For task layers added beside an encoder (TEAMS' attention-based task
  head): called as `block([hidden_states, attention_mask])` like the
  encoder's own blocks, with its own variables (also for ALBERT, whose
  encoder applies one block at every layer).

  Args:
    config: the architecture (the block takes its sizes and options).
    index: the layer index it stands at (names the block).
  """
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
  """Builds the Keras encoder network a config describes.

  Args:
    config: the architecture, with `vocab_size` set.
    shared: layers taken from another network (tied word embedding, bottom
      blocks).
    return_attention_scores: add an `attention_scores` output, a list over
      layers of the self-attention probabilities `[batch, heads, seq, seq]`.
    name: the network's name (default `<backbone>_encoder`).

  Returns:
    A `TransformerEncoder` taking `input_word_ids`, `input_mask`,
    `input_type_ids` (int32 `[batch, seq]`) and returning a dict with
    `sequence_output` `[batch, seq, hidden]`, `pooled_output`
    `[batch, hidden]` and `encoder_outputs` (every layer's output).

  Raises:
    ValueError: an invalid config (see `validate`), no `vocab_size`, more
      shared blocks than layers, or attention scores from blocks without
      self-attention (ConvBERT's `conv_only`).
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
