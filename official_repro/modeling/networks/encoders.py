"""One gin-configured encoder description for every backbone.

Objectives never build a backbone themselves: they receive an
`EncoderSpec`, scale it if they need a smaller generator, and call
`build_encoder`. The spec is a plain, backbone-agnostic description; this
module maps it onto Model Garden's encoder configs (`bert`, `albert`) so that
Model Garden's own tasks can be run on an identical configuration (used by the
benchmarks) and Model Garden checkpoints stay loadable.
"""

import dataclasses
from typing import Optional

import gin
import tf_keras

from official.nlp.configs import encoders

BACKBONES = ('bert', 'albert')


@gin.configurable('encoder')
@dataclasses.dataclass(frozen=True)
class EncoderSpec:
  """Architecture of a transformer text encoder.

  Attributes:
    backbone: 'bert' (Model Garden `BertEncoder`) or 'albert' (factorized
      embedding, one transformer block shared by all layers).
    hidden_size: width H of the transformer layers.
    num_layers: number of transformer layers L.
    num_attention_heads: attention heads per layer; must divide hidden_size.
    intermediate_size: feed-forward inner width.
    embedding_size: token-embedding width E; None means E = H. When E != H a
      dense projection maps embeddings to H.
    vocab_size: number of token ids; None means "take it from the data's
      metadata" (the task fills it in and checks any explicit value).
    max_position_embeddings: size of the learned position table.
    type_vocab_size: number of segment (token type) ids.
    hidden_activation: feed-forward activation.
    dropout_rate: dropout on embeddings and sublayer outputs.
    attention_dropout_rate: dropout on attention probabilities.
    initializer_range: stddev of the truncated-normal initializer.
  """
  backbone: str = 'bert'
  hidden_size: int = gin.REQUIRED
  num_layers: int = gin.REQUIRED
  num_attention_heads: int = gin.REQUIRED
  intermediate_size: int = gin.REQUIRED
  embedding_size: Optional[int] = None
  vocab_size: Optional[int] = None
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  hidden_activation: str = 'gelu'
  dropout_rate: float = 0.1
  attention_dropout_rate: float = 0.1
  initializer_range: float = 0.02

  def __post_init__(self):
    if self.backbone not in BACKBONES:
      raise ValueError(f'encoder.backbone must be one of {BACKBONES}, got '
                       f'{self.backbone!r}.')
    for name in ('hidden_size', 'num_layers', 'num_attention_heads',
                 'intermediate_size'):
      value = getattr(self, name)
      if not isinstance(value, int) or value <= 0:
        raise ValueError(f'encoder.{name} must be a positive int, got '
                         f'{value!r}.')
    if self.hidden_size % self.num_attention_heads:
      raise ValueError(
          f'encoder.hidden_size={self.hidden_size} is not divisible by '
          f'encoder.num_attention_heads={self.num_attention_heads}.')

  @property
  def embedding_width(self) -> int:
    return self.embedding_size or self.hidden_size

  def with_vocab_size(self, vocab_size: int, source: str) -> 'EncoderSpec':
    """Returns the spec with `vocab_size` set, checking any explicit value.

    Args:
      vocab_size: the vocabulary size of the data.
      source: where `vocab_size` comes from, for the error message.

    Raises:
      ValueError: if the spec names a different vocabulary size.
    """
    if self.vocab_size is not None and self.vocab_size != vocab_size:
      raise ValueError(
          f'encoder.vocab_size={self.vocab_size} but the data uses a '
          f'vocabulary of {vocab_size} tokens ({source}). Use the vocab the '
          'records were written with, or rebind encoder.vocab_size.')
    return dataclasses.replace(self, vocab_size=vocab_size)

  def to_model_garden_config(self) -> encoders.EncoderConfig:
    """The equivalent Model Garden `EncoderConfig`."""
    if self.vocab_size is None:
      raise ValueError('EncoderSpec.vocab_size is unset; call '
                       'with_vocab_size() with the data vocabulary first.')
    common = dict(
        vocab_size=self.vocab_size,
        hidden_size=self.hidden_size,
        num_layers=self.num_layers,
        num_attention_heads=self.num_attention_heads,
        intermediate_size=self.intermediate_size,
        hidden_activation=self.hidden_activation,
        dropout_rate=self.dropout_rate,
        attention_dropout_rate=self.attention_dropout_rate,
        max_position_embeddings=self.max_position_embeddings,
        type_vocab_size=self.type_vocab_size,
        initializer_range=self.initializer_range)
    if self.backbone == 'albert':
      return encoders.EncoderConfig(
          type='albert',
          albert=encoders.AlbertEncoderConfig(
              embedding_width=self.embedding_width, **common))
    return encoders.EncoderConfig(
        type='bert',
        bert=encoders.BertEncoderConfig(
            embedding_size=self.embedding_size, **common))


def build_encoder(spec: EncoderSpec,
                  embedding_layer: Optional[tf_keras.layers.Layer] = None
                  ) -> tf_keras.Model:
  """Builds the Keras encoder network a spec describes.

  Args:
    spec: the architecture, with `vocab_size` set.
    embedding_layer: an existing word-embedding layer to share (tied
      generator/discriminator embeddings).

  Returns:
    A Keras encoder taking `input_word_ids`, `input_mask`, `input_type_ids`
    and returning a dict with `sequence_output` `[batch, seq, hidden]` and
    `pooled_output` `[batch, hidden]`.
  """
  return encoders.build_encoder(spec.to_model_garden_config(),
                                embedding_layer=embedding_layer)
