"""ConvBERT encoder (Jiang et al. 2020; paper 002 is its rebuttal).

ConvBERT is BERT with every transformer block replaced by a `ConvBertBlock`:

  embeddings: word (width E) + learned position + type, LayerNorm, dropout,
      dense E -> H when E != H (`embedding_network`, shared with ALBERT);
  L blocks, each post-LN:
      x1 = LayerNorm(x + Dropout(MixedAttention(x, mask)))
      x2 = LayerNorm(x1 + Dropout(GL(act(GL(x1)))))
    where mixed attention keeps N' = max(1, N // head_ratio) self-attention
    heads of size H / N ("bottleneck", BNK; the ConvBERT reference's rule)
    and adds N' span-based dynamic convolution heads (kernel k) sharing their
    query, and GL is the grouped linear layer with G groups (a plain dense at
    G = 1);
  pooler: dense H -> H with tanh on the first ([CLS]) token.

How it differs from Model Garden's `BertEncoder`, which it otherwise mirrors
(inputs, dict outputs, `transformer_layers`, `pooler_layer`,
`get_embedding_table`, `get_embedding_layer`, `return_attention_scores`):
  * the attention sublayer is `MixedAttention` (BNK + span-based dynamic
    convolution) and the feed-forward matrices may be grouped;
  * the self-attention branch is N'H wide (H / head_ratio when head_ratio
    divides N), so the scores are `[B, N', T, T]` rather than
    `[B, N, T, T]`;
  * the convolution branch ignores the padding mask, as the reference does:
    the content of padding positions reaches the real tokens up to k // 2
    positions away in each block (`attention_only` has no such leak);
  * the feed-forward activation is the exact (erf) GELU of the reference,
    not Model Garden's tanh approximation;
  * the pooler is not part of the reference ConvBERT (its classifier reads
    the [CLS] state directly); it is kept here for Model Garden's fine-tuning
    models and receives no gradient during ELECTRA pretraining.

Initialisation follows the TF1 original (yitu-opensource/ConvBert): embedding
tables and every dense kernel truncated normal with stddev
`initializer_range` (0.02), the depthwise convolution kernel truncated normal
with stddev 1/k, all biases zero, LayerNorm gamma one and beta zero.

The ablations of 002 are flags of the same network: `conv_only` (convolution
heads only, no self-attention) and `attention_only` (the bottleneck
self-attention alone, the "+BNK,+GL" rows of 002 Table 4).
"""

from typing import Any, Dict, Optional

import tensorflow as tf
import tf_keras

from official.modeling import tf_utils
from official_repro.modeling.layers import mixed_attention
from official_repro.modeling.networks import embedding_network


class ConvBertEncoder(tf_keras.Model):
  """Functional ConvBERT encoder with Model Garden `BertEncoder`'s interface.

  Inputs: `input_word_ids`, `input_mask`, `input_type_ids`, int32 `[B, T]`
  (a dict or a list in that order).

  Outputs (a dict):
    sequence_output: `[B, T, H]`, the last block's output.
    pooled_output: `[B, H]`, tanh(dense(sequence_output[:, 0])).
    encoder_outputs: list of L `[B, T, H]`, every block's output.
    attention_scores: only with `return_attention_scores=True`: list of L
      `[B, N', T, T]` self-attention probabilities (before dropout), with
      `N' = max(1, num_attention_heads // head_ratio)`.
  """

  def __init__(self,
               vocab_size: int,
               hidden_size: int = 768,
               num_layers: int = 12,
               num_attention_heads: int = 12,
               intermediate_size: int = 3072,
               head_ratio: int = 2,
               kernel_size: int = 9,
               num_groups: int = 1,
               conv_only: bool = False,
               attention_only: bool = False,
               embedding_width: Optional[int] = None,
               max_sequence_length: int = 512,
               type_vocab_size: int = 2,
               activation: str = 'gelu',
               dropout_rate: float = 0.1,
               attention_dropout_rate: float = 0.1,
               initializer_range: float = 0.02,
               embedding_layer: Optional[tf_keras.layers.Layer] = None,
               return_attention_scores: bool = False,
               **kwargs):
    """Builds the network.

    Args:
      vocab_size: number of token ids.
      hidden_size: H.
      num_layers: L, the number of (distinct) blocks.
      num_attention_heads: N; the head size is H / N.
      intermediate_size: feed-forward width.
      head_ratio: >= 1; `N' = max(1, N // head_ratio)` self-attention heads
        (see `MixedAttention`).
      kernel_size: odd convolution window k.
      num_groups: groups G of both feed-forward matrices.
      conv_only: convolution heads only (002's convolution-only ablation).
      attention_only: bottleneck self-attention only, no convolution heads.
      embedding_width: E; None means E = H.
      max_sequence_length: rows of the position table.
      type_vocab_size: number of segment ids.
      activation: feed-forward activation name ('gelu' is the exact GELU).
      dropout_rate: dropout on the embeddings and every sublayer output.
      attention_dropout_rate: dropout on the attention probabilities.
      initializer_range: stddev of the truncated-normal initializer.
      embedding_layer: an existing word-embedding layer (output width E) to
        share, e.g. the discriminator's for an ELECTRA generator.
      return_attention_scores: add the `attention_scores` output.
      **kwargs: other `tf_keras.Model` arguments (e.g. `name`).

    Raises:
      ValueError: `return_attention_scores` with `conv_only` (there is no
        self-attention), or an invalid size (raised by the blocks and naming
        the setting).
    """
    if return_attention_scores and conv_only:
      raise ValueError(
          'return_attention_scores=True needs self-attention heads, but the '
          'encoder has conv_only=True (convolution heads only).')
    embedding_width = embedding_width or hidden_size
    initializer = tf_keras.initializers.TruncatedNormal(
        stddev=initializer_range)
    embeddings, embedding_layer = embedding_network.build_embedding_network(
        vocab_size=vocab_size, embedding_width=embedding_width,
        hidden_size=hidden_size, max_sequence_length=max_sequence_length,
        type_vocab_size=type_vocab_size, dropout_rate=dropout_rate,
        initializer=initializer, word_embedding_layer=embedding_layer,
        name='embeddings')
    word_ids = tf_keras.layers.Input(shape=(None,), dtype=tf.int32,
                                     name='input_word_ids')
    mask = tf_keras.layers.Input(shape=(None,), dtype=tf.int32,
                                 name='input_mask')
    type_ids = tf_keras.layers.Input(shape=(None,), dtype=tf.int32,
                                     name='input_type_ids')
    hidden_states, attention_mask = embeddings([word_ids, mask, type_ids])

    transformer_layers = []
    encoder_outputs = []
    attention_outputs = []
    for index in range(num_layers):
      block = mixed_attention.ConvBertBlock(
          hidden_size=hidden_size,
          num_attention_heads=num_attention_heads,
          intermediate_size=intermediate_size,
          head_ratio=head_ratio,
          kernel_size=kernel_size,
          num_groups=num_groups,
          conv_only=conv_only,
          attention_only=attention_only,
          activation=activation,
          dropout_rate=dropout_rate,
          attention_dropout_rate=attention_dropout_rate,
          kernel_initializer=tf_utils.clone_initializer(initializer),
          name=f'transformer/layer_{index}')
      transformer_layers.append(block)
      hidden_states = block([hidden_states, attention_mask],
                            return_attention_scores=return_attention_scores)
      if return_attention_scores:
        hidden_states, probabilities = hidden_states
        attention_outputs.append(probabilities)
      encoder_outputs.append(hidden_states)

    pooler_layer = tf_keras.layers.Dense(
        units=hidden_size, activation='tanh',
        kernel_initializer=tf_utils.clone_initializer(initializer),
        name='pooler_transform')
    outputs = dict(sequence_output=hidden_states,
                   pooled_output=pooler_layer(hidden_states[:, 0, :]),
                   encoder_outputs=encoder_outputs)
    if return_attention_scores:
      outputs['attention_scores'] = attention_outputs
    super().__init__(inputs=[word_ids, mask, type_ids], outputs=outputs,
                     **kwargs)

    self._embedding_network = embeddings
    self._embedding_layer = embedding_layer
    self._transformer_layers = transformer_layers
    self._pooler_layer = pooler_layer
    # Plain attribute, not tracked as a dependency (like BertEncoder's).
    self._setattr_tracking = False
    self._config = dict(
        vocab_size=vocab_size, hidden_size=hidden_size,
        num_layers=num_layers, num_attention_heads=num_attention_heads,
        intermediate_size=intermediate_size, head_ratio=head_ratio,
        kernel_size=kernel_size, num_groups=num_groups, conv_only=conv_only,
        attention_only=attention_only, embedding_width=embedding_width,
        max_sequence_length=max_sequence_length,
        type_vocab_size=type_vocab_size, activation=activation,
        dropout_rate=dropout_rate,
        attention_dropout_rate=attention_dropout_rate,
        initializer_range=initializer_range,
        return_attention_scores=return_attention_scores)
    self._setattr_tracking = True

  def get_embedding_table(self):
    """The word-embedding table `[vocab_size, E]`."""
    return self._embedding_layer.embeddings

  def get_embedding_layer(self) -> tf_keras.layers.Layer:
    """The word-embedding layer (share it to tie embeddings)."""
    return self._embedding_layer

  @property
  def transformer_layers(self):
    """The L `ConvBertBlock`s, input side first."""
    return self._transformer_layers

  @property
  def pooler_layer(self) -> tf_keras.layers.Dense:
    """The dense tanh layer on the [CLS] state."""
    return self._pooler_layer

  def get_config(self) -> Dict[str, Any]:
    return dict(self._config)
