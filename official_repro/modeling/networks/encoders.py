"""One gin-configured encoder description for every backbone.

Objectives never build a backbone themselves: they receive an
`EncoderConfig`, scale it if they need a smaller generator, and call
`build_encoder`. The backbones:

  * 'bert': Model Garden's `BertEncoder` (factorized embedding when
    `embedding_size != hidden_size`). Its variables are the ones Model
    Garden's BERT fine-tuning tasks restore, so exported checkpoints load
    there.
  * 'albert': ALBERT (Lan et al. 2020): a factorized embedding (width E, then a
    dense E -> H projection) and ONE transformer block applied `num_layers`
    times. Model Garden's `AlbertEncoder` builds its embedding layer inside
    its constructor and cannot take a shared one, which ELECTRA's tied
    generator/discriminator embeddings (ALE, paper 001) need. So the same
    architecture is assembled from Model Garden's `EncoderScaffold` (an
    embedding network instance + a single `TransformerEncoderBlock` instance,
    which the scaffold reuses for every layer). Variable names differ from
    `AlbertEncoder` checkpoints.
  * 'convbert': ConvBERT (Jiang et al. 2020, paper 002): BERT with mixed
    attention (bottleneck self-attention plus span-based dynamic convolution
    heads) and grouped feed-forward layers; our `ConvBertEncoder` (Model
    Garden has none). It has the settings `head_ratio`, `conv_kernel_size`,
    `num_groups`, `conv_only` and `attention_only`, which the other backbones
    must leave at their defaults.

ALBERT and ConvBERT embed tokens with the same sub-network
(`embedding_network`), which can take an existing word-embedding layer.
"""

import dataclasses
from typing import Optional

import gin
import tf_keras

from official.modeling import tf_utils
from official.modeling.hyperparams import base_config
from official.nlp.configs import encoders as mg_encoders
from official.nlp.modeling import layers
from official.nlp.modeling import networks
from official_repro.modeling.networks import convbert_encoder
from official_repro.modeling.networks import embedding_network

BACKBONES = ('bert', 'albert', 'convbert')

# ConvBERT-only settings and the defaults every other backbone must keep.
_CONVBERT_DEFAULTS = dict(head_ratio=2, conv_kernel_size=9, num_groups=1,
                          conv_only=False, attention_only=False)


@dataclasses.dataclass
class EncoderConfig(base_config.Config):
  """Architecture of a transformer text encoder.

  Attributes:
    backbone: 'bert', 'albert' or 'convbert' (see the module docstring).
    hidden_size: width H of the transformer layers.
    num_layers: number of transformer layers L (ALBERT: applications of the
      one shared block).
    num_attention_heads: attention heads per layer; must divide hidden_size.
    intermediate_size: feed-forward inner width.
    embedding_size: token-embedding width E; None means E = H. When E != H a
      dense projection maps embeddings to H.
    vocab_size: number of token ids; None until taken from the data.
    max_position_embeddings: size of the learned position table.
    type_vocab_size: number of segment (token type) ids.
    hidden_activation: feed-forward activation.
    dropout_rate: dropout on embeddings and sublayer outputs.
    attention_dropout_rate: dropout on attention probabilities.
    initializer_range: stddev of the truncated-normal initializer.
    head_ratio: ConvBERT: the bottleneck ratio; the self-attention branch
      keeps N' = max(1, num_attention_heads // head_ratio) heads of size
      hidden_size / num_attention_heads (the ConvBERT reference's rule, so
      num_attention_heads need not be divisible by it, and a 1-head
      generator keeps one head). >= 1.
    conv_kernel_size: ConvBERT: the span-based dynamic convolution window k
      (odd).
    num_groups: ConvBERT: groups of the grouped feed-forward matrices; must
      divide hidden_size and intermediate_size.
    conv_only: ConvBERT: convolution heads only (002's convolution-only
      ablation).
    attention_only: ConvBERT: the bottleneck self-attention without
      convolution heads (the "+BNK,+GL" baselines of 002 Table 4).
  """
  backbone: str = 'bert'
  hidden_size: int = 0
  num_layers: int = 0
  num_attention_heads: int = 0
  intermediate_size: int = 0
  embedding_size: Optional[int] = None
  vocab_size: Optional[int] = None
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  hidden_activation: str = 'gelu'
  dropout_rate: float = 0.1
  attention_dropout_rate: float = 0.1
  initializer_range: float = 0.02
  head_ratio: int = 2
  conv_kernel_size: int = 9
  num_groups: int = 1
  conv_only: bool = False
  attention_only: bool = False

  @property
  def embedding_width(self) -> int:
    return self.embedding_size or self.hidden_size


def validate(config: EncoderConfig, name: str = 'encoder') -> EncoderConfig:
  """Checks an encoder config; returns it.

  Args:
    config: the config.
    name: how the error messages name it (its gin scope).

  Raises:
    ValueError: naming the setting and the constraint it breaks.
  """
  if config.backbone not in BACKBONES:
    raise ValueError(f'{name}.backbone must be one of {BACKBONES}, got '
                     f'{config.backbone!r}.')
  for field in ('hidden_size', 'num_layers', 'num_attention_heads',
                'intermediate_size'):
    value = getattr(config, field)
    if not isinstance(value, int) or value <= 0:
      raise ValueError(f'{name}.{field} must be a positive int, got '
                       f'{value!r}.')
  if config.hidden_size % config.num_attention_heads:
    raise ValueError(
        f'{name}.hidden_size={config.hidden_size} is not divisible by '
        f'{name}.num_attention_heads={config.num_attention_heads}.')
  if config.backbone == 'convbert':
    _validate_convbert(config, name)
  else:
    for field, default in _CONVBERT_DEFAULTS.items():
      if getattr(config, field) != default:
        raise ValueError(
            f'{name}.{field}={getattr(config, field)!r} is a ConvBERT '
            f"setting; with {name}.backbone={config.backbone!r} it must keep "
            f'its default {default!r}.')
  return config


def _validate_convbert(config: EncoderConfig, name: str) -> None:
  """The ConvBERT constraints of `validate`."""
  for field in ('head_ratio', 'conv_kernel_size', 'num_groups'):
    value = getattr(config, field)
    if not isinstance(value, int) or value <= 0:
      raise ValueError(f'{name}.{field} must be a positive int, got '
                       f'{value!r}.')
  if config.conv_kernel_size % 2 == 0:
    raise ValueError(f'{name}.conv_kernel_size={config.conv_kernel_size} '
                     'must be odd.')
  for field in ('hidden_size', 'intermediate_size'):
    if getattr(config, field) % config.num_groups:
      raise ValueError(
          f'{name}.{field}={getattr(config, field)} is not divisible by '
          f'{name}.num_groups={config.num_groups}.')
  if config.conv_only and config.attention_only:
    raise ValueError(f'{name}.conv_only and {name}.attention_only exclude '
                     'each other; set at most one to True.')


@gin.configurable('encoder')
def encoder_config(
    backbone: str = 'bert',
    hidden_size: int = gin.REQUIRED,
    num_layers: int = gin.REQUIRED,
    num_attention_heads: int = gin.REQUIRED,
    intermediate_size: int = gin.REQUIRED,
    embedding_size: Optional[int] = None,
    vocab_size: Optional[int] = None,
    max_position_embeddings: int = 512,
    type_vocab_size: int = 2,
    hidden_activation: str = 'gelu',
    dropout_rate: float = 0.1,
    attention_dropout_rate: float = 0.1,
    initializer_range: float = 0.02,
    head_ratio: int = 2,
    conv_kernel_size: int = 9,
    num_groups: int = 1,
    conv_only: bool = False,
    attention_only: bool = False,
) -> EncoderConfig:
  """The gin-bound encoder (see `EncoderConfig` for the arguments)."""
  return validate(EncoderConfig(
      backbone=backbone, hidden_size=hidden_size, num_layers=num_layers,
      num_attention_heads=num_attention_heads,
      intermediate_size=intermediate_size, embedding_size=embedding_size,
      vocab_size=vocab_size, max_position_embeddings=max_position_embeddings,
      type_vocab_size=type_vocab_size, hidden_activation=hidden_activation,
      dropout_rate=dropout_rate,
      attention_dropout_rate=attention_dropout_rate,
      initializer_range=initializer_range, head_ratio=head_ratio,
      conv_kernel_size=conv_kernel_size, num_groups=num_groups,
      conv_only=conv_only, attention_only=attention_only))


def with_vocab_size(config: EncoderConfig, vocab_size: int,
                    source: str) -> EncoderConfig:
  """Returns the config with `vocab_size` set, checking any explicit value.

  Args:
    config: the encoder config.
    vocab_size: the vocabulary size of the data.
    source: where `vocab_size` comes from, for the error message.

  Raises:
    ValueError: if the config names a different vocabulary size.
  """
  if config.vocab_size is not None and config.vocab_size != vocab_size:
    raise ValueError(
        f'encoder.vocab_size={config.vocab_size} but the data uses a '
        f'vocabulary of {vocab_size} tokens ({source}). Use the vocab the '
        'records were written with, or rebind encoder.vocab_size.')
  return config.replace(vocab_size=vocab_size)


def to_model_garden_config(config: EncoderConfig) -> mg_encoders.EncoderConfig:
  """The equivalent Model Garden `EncoderConfig` (for Model Garden's tasks).

  Raises:
    ValueError: for the 'convbert' backbone, which Model Garden does not have
      (build it with `build_encoder`).
  """
  if config.backbone == 'convbert':
    raise ValueError(
        "encoder.backbone='convbert' has no Model Garden encoder config "
        '(Model Garden has no ConvBERT); build it with '
        'official_repro.modeling.networks.encoders.build_encoder.')
  _require_vocab_size(config)
  common = dict(
      vocab_size=config.vocab_size,
      hidden_size=config.hidden_size,
      num_layers=config.num_layers,
      num_attention_heads=config.num_attention_heads,
      intermediate_size=config.intermediate_size,
      hidden_activation=config.hidden_activation,
      dropout_rate=config.dropout_rate,
      attention_dropout_rate=config.attention_dropout_rate,
      max_position_embeddings=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size,
      initializer_range=config.initializer_range)
  if config.backbone == 'albert':
    return mg_encoders.EncoderConfig(
        type='albert', albert=mg_encoders.AlbertEncoderConfig(
            embedding_width=config.embedding_width, **common))
  return mg_encoders.EncoderConfig(
      type='bert', bert=mg_encoders.BertEncoderConfig(
          embedding_size=config.embedding_size, **common))


def _require_vocab_size(config: EncoderConfig) -> None:
  if config.vocab_size is None:
    raise ValueError('EncoderConfig.vocab_size is unset; set it from the '
                     'data vocabulary (with_vocab_size) first.')


class AlbertScaffoldEncoder(networks.EncoderScaffold):
  """`EncoderScaffold` that also exposes its word-embedding layer."""

  def __init__(self, word_embedding_layer: tf_keras.layers.Layer, **kwargs):
    super().__init__(**kwargs)
    self._word_embedding_layer = word_embedding_layer

  def get_embedding_layer(self) -> tf_keras.layers.Layer:
    return self._word_embedding_layer


def _initializer(config: EncoderConfig):
  return tf_keras.initializers.TruncatedNormal(stddev=config.initializer_range)


def _build_albert(config: EncoderConfig,
                  word_embedding_layer: Optional[tf_keras.layers.Layer]
                  ) -> AlbertScaffoldEncoder:
  embeddings, word_embedding_layer = embedding_network.build_embedding_network(
      vocab_size=config.vocab_size, embedding_width=config.embedding_width,
      hidden_size=config.hidden_size,
      max_sequence_length=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size,
      dropout_rate=config.dropout_rate, initializer=_initializer(config),
      word_embedding_layer=word_embedding_layer, name='albert_embeddings')
  shared_block = layers.TransformerEncoderBlock(
      num_attention_heads=config.num_attention_heads,
      inner_dim=config.intermediate_size,
      inner_activation=tf_utils.get_activation(config.hidden_activation),
      output_dropout=config.dropout_rate,
      attention_dropout=config.attention_dropout_rate,
      kernel_initializer=_initializer(config),
      name='shared_transformer')
  return AlbertScaffoldEncoder(
      word_embedding_layer=word_embedding_layer,
      embedding_cls=embeddings,
      embedding_data=word_embedding_layer.embeddings,
      hidden_cls=shared_block,
      num_hidden_instances=config.num_layers,
      pooled_output_dim=config.hidden_size,
      pooler_layer_initializer=_initializer(config),
      return_all_layer_outputs=False,
      dict_outputs=True,
      name='albert_encoder')


def _build_convbert(config: EncoderConfig,
                    word_embedding_layer: Optional[tf_keras.layers.Layer],
                    return_attention_scores: bool
                    ) -> convbert_encoder.ConvBertEncoder:
  return convbert_encoder.ConvBertEncoder(
      vocab_size=config.vocab_size,
      hidden_size=config.hidden_size,
      num_layers=config.num_layers,
      num_attention_heads=config.num_attention_heads,
      intermediate_size=config.intermediate_size,
      head_ratio=config.head_ratio,
      kernel_size=config.conv_kernel_size,
      num_groups=config.num_groups,
      conv_only=config.conv_only,
      attention_only=config.attention_only,
      embedding_width=config.embedding_width,
      max_sequence_length=config.max_position_embeddings,
      type_vocab_size=config.type_vocab_size,
      activation=config.hidden_activation,
      dropout_rate=config.dropout_rate,
      attention_dropout_rate=config.attention_dropout_rate,
      initializer_range=config.initializer_range,
      embedding_layer=word_embedding_layer,
      return_attention_scores=return_attention_scores,
      name='convbert_encoder')


def build_encoder(config: EncoderConfig,
                  word_embedding_layer: Optional[tf_keras.layers.Layer] = None,
                  return_attention_scores: bool = False) -> tf_keras.Model:
  """Builds the Keras encoder network a config describes.

  Args:
    config: the architecture, with `vocab_size` set.
    word_embedding_layer: an existing word-embedding layer (width E) to share;
      used for tied generator/discriminator embeddings.
    return_attention_scores: add an `attention_scores` output, a list over
      layers of the self-attention probabilities `[batch, heads, seq, seq]`
      (ConvBERT: `max(1, num_attention_heads // head_ratio)` heads). BERT and
      ConvBERT only.

  Returns:
    A Keras encoder taking `input_word_ids`, `input_mask`, `input_type_ids`
    (int32 `[batch, seq]`) and returning a dict with `sequence_output`
    `[batch, seq, hidden]` and `pooled_output` `[batch, hidden]`. It has
    `get_embedding_table()` (`[vocab, E]`) and `get_embedding_layer()`.

  Raises:
    ValueError: an invalid config (see `validate`), no `vocab_size`, or
      `return_attention_scores` for a backbone or variant without them
      (ALBERT; ConvBERT with `conv_only`).
  """
  validate(config)
  _require_vocab_size(config)
  if config.backbone == 'albert':
    if return_attention_scores:
      raise ValueError(
          "return_attention_scores is not available for encoder.backbone="
          "'albert' (Model Garden's EncoderScaffold does not return them); "
          "use 'bert' or 'convbert'.")
    return _build_albert(config, word_embedding_layer)
  if config.backbone == 'convbert':
    return _build_convbert(config, word_embedding_layer,
                           return_attention_scores)
  model_garden_config = to_model_garden_config(config)
  model_garden_config.bert.return_attention_scores = return_attention_scores
  return mg_encoders.build_encoder(model_garden_config,
                                   embedding_layer=word_embedding_layer)
