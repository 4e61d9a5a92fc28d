"""Causal (left-to-right) language model over a BERT-style stack (002).

The ConvBERT rebuttal (002, Table 3) compares on WikiText-103 a transformer
LM "of similar size as small BERT" with a mixed-attention one "of similar
size as small ConvBERT"; `CausalLM` builds both from one set of sizes:
`BertEncoder`-style embeddings (no types), L post-LN blocks under a
lower-triangular mask ('transformer': Model Garden's
`TransformerEncoderBlock`, whose padding mask is left out since windows of a
token stream have none before a real token; 'mixed':
`ConvBertBlock(causal=True)`), and logits against the tied word table plus a
bias. Set `output_bias` to the data's log unigram probabilities before a
short run: from a zero bias both architectures stall at the unigram
perplexity.
"""

from typing import Any, Dict, Optional

import tensorflow as tf
import tf_keras

from official.nlp.modeling import layers
from official_repro.modeling import activations
from official_repro.modeling import arguments
from official_repro.modeling.layers import mixed_attention

ARCHITECTURES = ('transformer', 'mixed')


@tf_keras.utils.register_keras_serializable(package='official_repro')
class CausalLM(tf_keras.Model):
  """Token ids `[B, T]` -> logits `[B, T, V]`; logit t scores token t + 1."""

  def __init__(
      self,
      vocab_size: int,
      architecture: str,
      hidden_size: int,
      num_layers: int,
      num_attention_heads: int,
      intermediate_size: int,
      max_seq_length: int,
      embedding_width: Optional[int] = None,
      head_ratio: int = 2,
      kernel_size: int = 9,
      num_groups: int = 1,
      activation: str = 'gelu_erf',
      dropout_rate: float = 0.1,
      attention_dropout_rate: float = 0.1,
      initializer_range: float = 0.02,
      **kwargs,
  ):
    """Initializes the model.

    `architecture` is 'transformer' or 'mixed'; for 'mixed',
    `num_attention_heads` N gives max(1, N // head_ratio) attention heads
    plus as many convolution heads of size H / N, and `head_ratio`,
    `kernel_size` and `num_groups` apply (see `ConvBertBlock`).
    `max_seq_length` sizes the position table; `embedding_width` E defaults
    to `hidden_size` H; `activation` names an `activations` function.
    """
    super().__init__(**kwargs)
    if architecture not in ARCHITECTURES:
      raise ValueError(
          f'architecture must be one of {ARCHITECTURES}, got {architecture!r}.'
      )
    sizes = dict(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_attention_heads=num_attention_heads,
        intermediate_size=intermediate_size,
        max_seq_length=max_seq_length,
        embedding_width=embedding_width or hidden_size,
    )
    arguments.check_sizes(**sizes)
    self._config = dict(
        sizes,
        architecture=architecture,
        embedding_width=embedding_width,
        head_ratio=head_ratio,
        kernel_size=kernel_size,
        num_groups=num_groups,
        activation=activation,
        dropout_rate=dropout_rate,
        attention_dropout_rate=attention_dropout_rate,
        initializer_range=initializer_range,
    )
    self._build_embeddings(sizes['embedding_width'])
    self._blocks = [self._new_block(i) for i in range(num_layers)]
    self._output_bias = self.add_weight(
        name='output_bias', shape=[vocab_size], initializer='zeros'
    )

  def _build_embeddings(self, width: int) -> None:
    """Word and position tables of `width` E, with projections if E != H."""
    config, init = self._config, self._initializer
    self._word_embedding = layers.OnDeviceEmbedding(
        config['vocab_size'], width, initializer=init(), name='word_embeddings'
    )
    self._position_embedding = layers.PositionEmbedding(
        max_length=config['max_seq_length'],
        initializer=init(),
        name='position_embedding',
    )
    self._embedding_norm = tf_keras.layers.LayerNormalization(
        axis=-1, epsilon=1e-12, dtype=tf.float32, name='embeddings/layer_norm'
    )
    self._embedding_dropout = tf_keras.layers.Dropout(config['dropout_rate'])
    self._input_projection = None
    self._output_projection = None
    if width != config['hidden_size']:
      self._input_projection = tf_keras.layers.Dense(
          config['hidden_size'],
          kernel_initializer=init(),
          name='embedding_projection',
      )
      self._output_projection = tf_keras.layers.Dense(
          width, kernel_initializer=init(), name='output_projection'
      )

  def _initializer(self) -> tf_keras.initializers.Initializer:
    return tf_keras.initializers.TruncatedNormal(
        stddev=self._config['initializer_range']
    )

  def _new_block(self, i: int) -> tf_keras.layers.Layer:
    """Block `i` of the configured architecture."""
    c = self._config
    if c['architecture'] == 'transformer':
      return layers.TransformerEncoderBlock(
          num_attention_heads=c['num_attention_heads'],
          inner_dim=c['intermediate_size'],
          inner_activation=activations.get(c['activation']),
          output_dropout=c['dropout_rate'],
          attention_dropout=c['attention_dropout_rate'],
          kernel_initializer=self._initializer(),
          name=f'transformer/layer_{i}',
      )
    return mixed_attention.ConvBertBlock(
        hidden_size=c['hidden_size'],
        num_attention_heads=c['num_attention_heads'],
        intermediate_size=c['intermediate_size'],
        head_ratio=c['head_ratio'],
        kernel_size=c['kernel_size'],
        num_groups=c['num_groups'],
        causal=True,
        activation=activations.get(c['activation']),
        dropout_rate=c['dropout_rate'],
        attention_dropout_rate=c['attention_dropout_rate'],
        kernel_initializer=self._initializer(),
        name=f'mixed/layer_{i}',
    )

  @property
  def word_embeddings(self) -> tf.Variable:
    """The `[V, E]` table shared by the input and the output."""
    return self._word_embedding.embeddings

  @property
  def output_bias(self) -> tf.Variable:
    """The `[V]` bias of the logits (zeros at initialization)."""
    return self._output_bias

  def call(
      self, token_ids: tf.Tensor, training: Optional[bool] = None
  ) -> tf.Tensor:
    """Float32 `[B, T, V]` logits of int32 `[B, T]` ids; t scores t + 1."""
    embeddings = self._word_embedding(token_ids)
    embeddings += self._position_embedding(embeddings)
    hidden = self._embedding_dropout(
        self._embedding_norm(embeddings), training=training
    )
    if self._input_projection is not None:
      hidden = self._input_projection(hidden)
    shape = tf.shape(token_ids)
    mask = tf.tile(
        mixed_attention.causal_attention_mask(shape[1]), [shape[0], 1, 1]
    )
    for block in self._blocks:
      hidden = block([hidden, mask], training=training)
    if self._output_projection is not None:
      hidden = self._output_projection(hidden)
    logits = tf.einsum('bte,ve->btv', hidden, self.word_embeddings)
    return logits + self._output_bias

  def get_config(self) -> Dict[str, Any]:
    return dict(self._config)

  def build_from_config(self, config: Dict[str, Any]) -> None:
    """Creates the weights by a call on zero token ids of the built shape.

    Keras' default builds with float inputs, which the lookup rejects.
    """
    shape = [dim or 1 for dim in config['input_shape']]
    self(tf.zeros(shape, tf.int32))


def sequence_nll(
    logits: tf.Tensor, tokens: tf.Tensor, weights: tf.Tensor
) -> tf.Tensor:
  """Summed next-token negative log-likelihood (nats), a scalar.

  `logits` `[B, T, V]` of `tokens[:, :-1]`, `tokens` int32 `[B, T + 1]`
  (targets `tokens[:, 1:]`), `weights` float `[B, T]` (0 on padding).
  """
  losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tokens[:, 1:], logits=tf.cast(logits, tf.float32)
  )
  return tf.reduce_sum(losses * tf.cast(weights, tf.float32))
