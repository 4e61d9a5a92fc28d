"""Causal (left-to-right) language model over a BERT-style stack (002).

The ConvBERT rebuttal (002, Table 3) compares, on WikiText-103 perplexity, a
transformer language model "of similar size as small BERT" with a mixed
attention one "of similar size as small ConvBERT". `CausalLM` builds both
from one set of sizes:

* embeddings as in Model Garden's `BertEncoder`: word (`OnDeviceEmbedding`,
  width E) plus learned position embeddings (`PositionEmbedding`), LayerNorm,
  dropout, then a dense E -> H projection when E != H;
* L post-LN blocks of width H (as in BERT and ConvBERT), each given a
  lower-triangular `[B, T, T]` attention mask, so position t sees only
  positions <= t:
  - 'transformer': Model Garden's `TransformerEncoderBlock`. It has no causal
    switch of its own, so the causal mask is the attention mask. Windows of a
    contiguous token stream have no padding (padding added at the end of an
    evaluation stream comes after every real token and, under the causal
    mask, cannot reach it), so `SelfAttentionMask`'s padding mask would be all
    ones and is left out.
  - 'mixed': `ConvBertBlock(causal=True)`, which also restricts its span-based
    dynamic convolution to past positions;
* the output: a dense H -> E projection when E != H, then logits against the
  word-embedding table (tied input and output embeddings) plus a bias.

Set the output bias to the training data's log unigram probabilities
(`output_bias.assign(...)`) before a short training run. From a zero bias,
Adam fits the unigram distribution much faster through the tied table than
through the bias: the blocks learn to emit one vector at every position whose
dot products with the embedding rows are the log frequencies, and the model
then stays at the unigram perplexity (measured on WikiText-2 for both
architectures with Adam at 3e-4 to 3e-3 for up to 600 steps, with LAMB, with
an untied output table and with pre-LN blocks); with the prior in the bias
both fall below it within 50 steps.
"""

from typing import Any, Dict, Optional

import tensorflow as tf
import tf_keras

from official.modeling import tf_utils
from official.nlp.modeling import layers
from official_repro.modeling import activations
from official_repro.modeling.layers import mixed_attention

ARCHITECTURES = ('transformer', 'mixed')


@tf_keras.utils.register_keras_serializable(package='official_repro')
class CausalLM(tf_keras.Model):
  """Token ids `[B, T]` -> next-token logits `[B, T, vocab_size]`.

  Logit t scores the token at position t + 1 and depends only on the tokens
  at positions <= t.
  """

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

    Args:
      vocab_size: V, the number of token ids.
      architecture: 'transformer' or 'mixed' (see module docstring).
      hidden_size: H, width of the blocks.
      num_layers: L, number of blocks.
      num_attention_heads: heads N of the transformer; configured heads of
        the mixed block (max(1, N // head_ratio) attention heads plus as
        many convolution heads, all of size H / N).
      intermediate_size: feed-forward width.
      max_seq_length: longest input (size of the position table).
      embedding_width: E; None means H.
      head_ratio: mixed only, see `MixedAttention`.
      kernel_size: mixed only, odd convolution window.
      num_groups: mixed only, groups of the feed-forward matrices.
      activation: feed-forward activation, a name of
        `official_repro.modeling.activations` (default: exact erf GELU).
      dropout_rate: dropout on embeddings and block outputs.
      attention_dropout_rate: dropout on attention probabilities.
      initializer_range: stddev of the truncated-normal initializers.
      **kwargs: other `tf_keras.Model` arguments.

    Raises:
      ValueError: an unknown architecture or a non-positive size; the block
        layers check their own sizes.
    """
    super().__init__(**kwargs)
    if architecture not in ARCHITECTURES:
      raise ValueError(
          f'architecture must be one of {ARCHITECTURES}, got '
          f'{architecture!r}.'
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
    bad = {name: value for name, value in sizes.items() if value < 1}
    if bad:
      raise ValueError(f'CausalLM sizes must be >= 1, got {bad}.')
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
    width = sizes['embedding_width']
    initializer = tf_keras.initializers.TruncatedNormal(
        stddev=initializer_range
    )

    def init():
      return tf_utils.clone_initializer(initializer)

    self._word_embedding = layers.OnDeviceEmbedding(
        vocab_size, width, initializer=init(), name='word_embeddings'
    )
    self._position_embedding = layers.PositionEmbedding(
        max_length=max_seq_length, initializer=init(), name='position_embedding'
    )
    self._embedding_norm = tf_keras.layers.LayerNormalization(
        axis=-1, epsilon=1e-12, dtype=tf.float32, name='embeddings/layer_norm'
    )
    self._embedding_dropout = tf_keras.layers.Dropout(dropout_rate)
    self._input_projection = None
    self._output_projection = None
    if width != hidden_size:
      self._input_projection = tf_keras.layers.Dense(
          hidden_size, kernel_initializer=init(), name='embedding_projection'
      )
      self._output_projection = tf_keras.layers.Dense(
          width, kernel_initializer=init(), name='output_projection'
      )
    self._blocks = []
    for i in range(num_layers):
      if architecture == 'transformer':
        block = layers.TransformerEncoderBlock(
            num_attention_heads=num_attention_heads,
            inner_dim=intermediate_size,
            inner_activation=activations.get(activation),
            output_dropout=dropout_rate,
            attention_dropout=attention_dropout_rate,
            kernel_initializer=init(),
            name=f'transformer/layer_{i}',
        )
      else:
        block = mixed_attention.ConvBertBlock(
            hidden_size=hidden_size,
            num_attention_heads=num_attention_heads,
            intermediate_size=intermediate_size,
            head_ratio=head_ratio,
            kernel_size=kernel_size,
            num_groups=num_groups,
            causal=True,
            activation=activations.get(activation),
            dropout_rate=dropout_rate,
            attention_dropout_rate=attention_dropout_rate,
            kernel_initializer=init(),
            name=f'mixed/layer_{i}',
        )
      self._blocks.append(block)
    self._output_bias = self.add_weight(
        name='output_bias', shape=[vocab_size], initializer='zeros'
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
    """Next-token logits.

    Args:
      token_ids: int32 `[B, T]`, T <= max_seq_length.
      training: enables dropout.

    Returns:
      float32 `[B, T, V]`; position t scores the token at t + 1.
    """
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

    Keras' default would `build` with float inputs, which the embedding
    lookup rejects, so a called model could not be deserialized.

    Args:
      config: from `get_build_config`, with the `[B, T]` `input_shape`.
    """
    shape = [dim or 1 for dim in config['input_shape']]
    self(tf.zeros(shape, tf.int32))

  @classmethod
  def from_config(cls, config, custom_objects=None):
    del custom_objects
    return cls(**config)


def sequence_nll(
    logits: tf.Tensor, tokens: tf.Tensor, weights: tf.Tensor
) -> tf.Tensor:
  """Summed next-token negative log-likelihood (nats), a scalar.

  Args:
    logits: `[B, T, V]` from `CausalLM` on `tokens[:, :-1]`.
    tokens: int32 `[B, T + 1]` windows; the targets are `tokens[:, 1:]`.
    weights: float `[B, T]`, 1 on targets to score, 0 on padding.
  """
  losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=tokens[:, 1:], logits=tf.cast(logits, tf.float32)
  )
  return tf.reduce_sum(losses * tf.cast(weights, tf.float32))
