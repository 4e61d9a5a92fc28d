"""ConvBERT's mixed attention and the transformer block built on it (002).

ConvBERT observes that many BERT heads only attend locally, and replaces half
of them (at `head_ratio=2`) with span-based dynamic convolution heads, which
model local context at a cost linear in the sequence length:

* `MixedAttention`: with `N` configured heads of size `H = hidden / N`, the
  self-attention branch keeps `N' = max(1, N // head_ratio)` heads
  ("bottleneck"), and `SpanDynamicConv` adds `N'` convolution heads that
  share the attention branch's query projection. The two `[B, T, N'*H]`
  outputs are concatenated (`2 N' H`, which is `hidden` at `head_ratio=2`
  with N even) and projected back to `hidden` by the output dense layer.
* `ConvBertBlock`: a post-LN BERT block around it: mixed attention, dropout,
  residual, LayerNorm, then the (optionally grouped, `GroupedDense`)
  feed-forward network, dropout, residual, LayerNorm.

The head count follows the ConvBERT reference (yitu-opensource/ConvBert,
`model/modeling.py`, `attention_layer`): the configured head count is
integer-divided by the ratio and raised to 1 if that leaves none, while the
head size stays `hidden / N`. So N need not be divisible by `head_ratio`:
hidden 432 with N = 9 heads of 48 at `head_ratio=2` keeps N' = 4 heads, a
192-wide attention branch, a 192-wide convolution branch and a 384 -> 432
output dense; a 1-head generator keeps its single head (`N' = 1`, width
`hidden`, output dense `2 hidden -> hidden`). (Hugging Face's
`ConvBertSelfAttention` uses the same N' but a head size of
`hidden // N' // 2`, which agrees with `hidden / N` only when `N' * 2 = N`.)
The reference's mixed ("sdconv") path reshapes the input to `N' *
head_ratio * H` features before the span-key convolution, which fails unless
`N' * head_ratio = N` (or N < head_ratio); here the span-key convolution
reads the full hidden width, so such mixed configurations also run, while
its attention-only ("noconv") path takes any N, as here.

The block follows Model Garden's `TransformerEncoderBlock` call convention:
`block([hidden_states, attention_mask])` or `block(hidden_states)`, where
`attention_mask` is the `[B, T, T]` mask of `layers.SelfAttentionMask` (1 =
may attend), and it returns the new `[B, T, hidden]` hidden states.

Masking uses Model Garden's `MaskedSoftmax` (an additive -1e9 on masked
scores; the TF1 original adds -10000, which gives the same probabilities in
float32). The padding mask is not applied to the convolution branch unless
`conv_mask_values=True` (see `span_dynamic_conv`).

Weights are initialised as in the TF1 original: truncated normal with stddev
0.02 for all dense kernels, 1/k for the depthwise convolution, zero biases.
"""

from typing import Any, Dict, Optional, Sequence, Tuple, Union

import tensorflow as tf
import tf_keras

from official.modeling import tf_utils
from official.nlp.modeling.layers import masked_softmax
from official_repro.modeling import activations
from official_repro.modeling.layers import grouped_dense
from official_repro.modeling.layers import span_dynamic_conv

_Initializer = Union[str, Dict[str, Any], tf_keras.initializers.Initializer]


def causal_attention_mask(
    seq_length: tf.Tensor, dtype: tf.DType = tf.float32
) -> tf.Tensor:
  """`[1, T, T]` lower-triangular mask: query t may attend to keys <= t."""
  ones = tf.ones([seq_length, seq_length], dtype=dtype)
  return tf.linalg.band_part(ones, -1, 0)[tf.newaxis]


@tf_keras.utils.register_keras_serializable(package='official_repro')
class MixedAttention(tf_keras.layers.Layer):
  """Self-attention heads plus span-based dynamic convolution heads.

  Shapes: `N` = `num_attention_heads`, `H = hidden_size // N`,
  `N' = max(1, N // head_ratio)` attention heads (the ConvBERT reference's
  rule: divide the configured head count by the ratio, rounding down, and
  keep at least one head; N need not be divisible by `head_ratio`, and
  `2N'H` may then be less than `2 * hidden_size / head_ratio`).

  * Mixed (default): query, key and value are dense `hidden -> N'H` (with
    bias); scaled dot-product attention (scale `1/sqrt(H)`, additive mask,
    dropout on the probabilities) over the `N'` heads; `SpanDynamicConv` with
    `N'` heads reusing the same query; `concat([attention, conv])` of width
    `2N'H`; dense `2N'H -> hidden`.
  * `conv_only=True` (the rebuttal's convolution-only ablation): no key,
    value or attention; the convolution branch gets all the width, i.e.
    `2N'` convolution heads of size `H` with a `hidden -> 2N'H` query, so
    the output dense is `2N'H -> hidden` as in the mixed layer.
  * `attention_only=True` (the reference code's `conv_type="noconv"`; the
    "+BNK,+GL" baselines of 002 Table 4 have no convolution heads): the
    bottleneck self-attention branch alone, `N'` heads with a
    `hidden -> N'H` query, and a `N'H -> hidden` output dense.

  With `causal=True` the attention mask is multiplied by a lower-triangular
  mask and the convolution looks only backwards, so output t depends on no
  input after t.

  Call arguments:
    hidden_states: `[B, T, hidden_size]`.
    attention_mask: optional `[B, T, T]` (1 = query may attend to key).
    training: enables attention dropout.
    return_attention_scores: also return the attention probabilities
      `[B, N', T, T]` (before dropout), e.g. to measure how concentrated
      attention is near the diagonal. Not available with `conv_only=True`.

  Returns:
    `[B, T, hidden_size]`, or `(output, probabilities)` when
    `return_attention_scores` is True.
  """

  def __init__(
      self,
      hidden_size: int,
      num_attention_heads: int,
      head_ratio: int = 2,
      kernel_size: int = 9,
      conv_only: bool = False,
      attention_only: bool = False,
      causal: bool = False,
      conv_mask_values: bool = False,
      attention_dropout: float = 0.0,
      kernel_initializer: Optional[_Initializer] = None,
      bias_initializer: _Initializer = 'zeros',
      **kwargs,
  ):
    """Initializes the layer.

    Args:
      hidden_size: input and output width; divisible by `num_attention_heads`.
      num_attention_heads: configured head count N (sets the head size).
      head_ratio: >= 1; the self-attention branch keeps
        `N' = max(1, N // head_ratio)` heads of size `hidden_size // N`.
      kernel_size: convolution window k; odd and >= 1.
      conv_only: drop the self-attention branch (see class doc).
      attention_only: drop the convolution branch (see class doc).
      causal: restrict both branches to positions <= t.
      conv_mask_values: forwarded as `SpanDynamicConv(mask_values=...)`; the
        padding mask is read from `attention_mask` as "key position s is real
        if any query may attend to it" (its maximum over queries).
      attention_dropout: dropout rate on the attention probabilities.
      kernel_initializer: initializer of all dense kernels and the pointwise
        convolution; default truncated normal with stddev 0.02.
      bias_initializer: initializer of all biases.
      **kwargs: other `tf_keras.layers.Layer` arguments.

    Raises:
      ValueError: on an invalid size, head count, ratio or kernel size; the
        message names the value and the constraint.
    """
    super().__init__(**kwargs)
    if hidden_size < 1 or num_attention_heads < 1:
      raise ValueError(
          'hidden_size and num_attention_heads must be >= 1, got hidden_size='
          f'{hidden_size}, num_attention_heads={num_attention_heads}.'
      )
    if hidden_size % num_attention_heads:
      raise ValueError(
          f'hidden_size={hidden_size} must be divisible by '
          f'num_attention_heads={num_attention_heads}.'
      )
    if head_ratio < 1:
      raise ValueError(f'head_ratio must be >= 1, got head_ratio={head_ratio}.')
    if kernel_size < 1 or kernel_size % 2 == 0:
      raise ValueError(
          f'kernel_size must be an odd integer >= 1, got kernel_size='
          f'{kernel_size}.'
      )
    if not 0.0 <= attention_dropout < 1.0:
      raise ValueError(
          f'attention_dropout must be in [0, 1), got {attention_dropout}.'
      )
    if conv_only and attention_only:
      raise ValueError(
          'conv_only and attention_only exclude each other; '
          'at most one may be True.'
      )
    self._hidden_size = hidden_size
    self._num_attention_heads = num_attention_heads
    self._head_ratio = head_ratio
    self._kernel_size = kernel_size
    self._conv_only = conv_only
    self._attention_only = attention_only
    self._causal = causal
    self._conv_mask_values = conv_mask_values
    self._attention_dropout = attention_dropout
    self._kernel_initializer = tf_keras.initializers.get(
        kernel_initializer or tf_keras.initializers.TruncatedNormal(stddev=0.02)
    )
    self._bias_initializer = tf_keras.initializers.get(bias_initializer)

    self._head_size = hidden_size // num_attention_heads
    # The reference's rule: N' = N // head_ratio, at least 1.
    self._num_self_attention_heads = max(1, num_attention_heads // head_ratio)
    if conv_only:
      self._num_conv_heads = 2 * self._num_self_attention_heads
    elif attention_only:
      self._num_conv_heads = 0
    else:
      self._num_conv_heads = self._num_self_attention_heads
    query_heads = (
        self._num_conv_heads if conv_only else self._num_self_attention_heads
    )

    self._query = self._dense(query_heads * self._head_size, 'query')
    if not conv_only:
      attention_width = self._num_self_attention_heads * self._head_size
      self._key = self._dense(attention_width, 'key')
      self._value = self._dense(attention_width, 'value')
      self._masked_softmax = masked_softmax.MaskedSoftmax(
          mask_expansion_axes=[1]
      )
      self._attention_dropout_layer = tf_keras.layers.Dropout(attention_dropout)
    if not attention_only:
      self._conv = span_dynamic_conv.SpanDynamicConv(
          num_heads=self._num_conv_heads,
          head_size=self._head_size,
          kernel_size=kernel_size,
          causal=causal,
          mask_values=conv_mask_values,
          kernel_initializer=tf_utils.clone_initializer(
              self._kernel_initializer
          ),
          bias_initializer=tf_utils.clone_initializer(self._bias_initializer),
          name='span_dynamic_conv',
      )
    self._output_dense = self._dense(hidden_size, 'attention_output')

  def _dense(self, units: int, name: str) -> tf_keras.layers.Dense:
    return tf_keras.layers.Dense(
        units,
        kernel_initializer=tf_utils.clone_initializer(self._kernel_initializer),
        bias_initializer=tf_utils.clone_initializer(self._bias_initializer),
        name=name,
    )

  @property
  def num_self_attention_heads(self) -> int:
    """N', the number of self-attention heads (0 when `conv_only`)."""
    return 0 if self._conv_only else self._num_self_attention_heads

  @property
  def num_conv_heads(self) -> int:
    """Convolution heads (0 when `attention_only`)."""
    return self._num_conv_heads

  @property
  def head_size(self) -> int:
    return self._head_size

  def _attention(
      self,
      hidden_states: tf.Tensor,
      query: tf.Tensor,
      attention_mask: Optional[tf.Tensor],
      training: Optional[bool],
  ) -> Tuple[tf.Tensor, tf.Tensor]:
    """Returns the `[B, T, N'H]` context and the `[B, N', T, T]` probs."""
    num_heads, head_size = self._num_self_attention_heads, self._head_size
    split_heads = span_dynamic_conv.split_heads
    query = split_heads(query, num_heads, head_size)
    key = split_heads(self._key(hidden_states), num_heads, head_size)
    value = split_heads(self._value(hidden_states), num_heads, head_size)
    scores = tf.einsum('bfnh,btnh->bnft', query, key)
    scores *= tf.cast(1.0 / head_size**0.5, scores.dtype)
    if self._causal:
      causal_mask = causal_attention_mask(
          tf.shape(hidden_states)[1], scores.dtype
      )
      attention_mask = (
          causal_mask
          if attention_mask is None
          else causal_mask * tf.cast(attention_mask, scores.dtype)
      )
    probabilities = self._masked_softmax(scores, attention_mask)
    dropped = self._attention_dropout_layer(probabilities, training=training)
    context = tf.einsum('bnft,btnh->bfnh', dropped, value)
    shape = tf.shape(hidden_states)
    context = tf.reshape(context, [shape[0], shape[1], num_heads * head_size])
    return context, probabilities

  def call(
      self,
      hidden_states: tf.Tensor,
      attention_mask: Optional[tf.Tensor] = None,
      training: Optional[bool] = None,
      return_attention_scores: bool = False,
  ) -> Union[tf.Tensor, Tuple[tf.Tensor, tf.Tensor]]:
    if return_attention_scores and self._conv_only:
      raise ValueError(
          'return_attention_scores=True needs the self-attention branch, but '
          f'MixedAttention {self.name!r} has conv_only=True.'
      )
    query = self._query(hidden_states)
    if self._attention_only:
      context, probabilities = self._attention(
          hidden_states, query, attention_mask, training
      )
    else:
      padding_mask = None
      if self._conv_mask_values and attention_mask is not None:
        padding_mask = tf.reduce_max(attention_mask, axis=1)
      conv_context = self._conv(hidden_states, query, padding_mask)
      if self._conv_only:
        return self._output_dense(conv_context)
      attention_context, probabilities = self._attention(
          hidden_states, query, attention_mask, training
      )
      context = tf.concat([attention_context, conv_context], axis=-1)
    output = self._output_dense(context)
    if return_attention_scores:
      return output, probabilities
    return output

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update(
        {
            'hidden_size': self._hidden_size,
            'num_attention_heads': self._num_attention_heads,
            'head_ratio': self._head_ratio,
            'kernel_size': self._kernel_size,
            'conv_only': self._conv_only,
            'attention_only': self._attention_only,
            'causal': self._causal,
            'conv_mask_values': self._conv_mask_values,
            'attention_dropout': self._attention_dropout,
            'kernel_initializer': tf_keras.initializers.serialize(
                self._kernel_initializer
            ),
            'bias_initializer': tf_keras.initializers.serialize(
                self._bias_initializer
            ),
        }
    )
    return config


@tf_keras.utils.register_keras_serializable(package='official_repro')
class ConvBertBlock(tf_keras.layers.Layer):
  """Post-LN transformer block with mixed attention and grouped FFN.

  `x1 = LayerNorm(x + Dropout(MixedAttention(x, mask)))`
  `y = LayerNorm(x1 + Dropout(GL_out(activation(GL_in(x1)))))`
  where `GL_in: hidden -> intermediate` and `GL_out: intermediate -> hidden`
  are `GroupedDense` layers with `num_groups` groups (plain dense matrices at
  `num_groups=1`).

  Call arguments:
    inputs: `[hidden_states, attention_mask]` or `hidden_states` alone;
      hidden states `[B, T, hidden_size]`, mask `[B, T, T]` as produced by
      Model Garden's `SelfAttentionMask`.
    training: enables dropout.
    return_attention_scores: also return the `[B, N', T, T]` attention
      probabilities of the mixed attention layer.

  Returns:
    `[B, T, hidden_size]`, or `(output, probabilities)`.
  """

  def __init__(
      self,
      hidden_size: int,
      num_attention_heads: int,
      intermediate_size: int,
      head_ratio: int = 2,
      kernel_size: int = 9,
      num_groups: int = 1,
      conv_only: bool = False,
      attention_only: bool = False,
      causal: bool = False,
      conv_mask_values: bool = False,
      activation: Union[str, Any] = 'gelu_erf',
      dropout_rate: float = 0.0,
      attention_dropout_rate: float = 0.0,
      layer_norm_epsilon: float = 1e-12,
      kernel_initializer: Optional[_Initializer] = None,
      bias_initializer: _Initializer = 'zeros',
      return_attention_scores: bool = False,
      **kwargs,
  ):
    """Initializes the block.

    Args:
      hidden_size: width of the hidden states; divisible by
        `num_attention_heads` and by `num_groups`.
      num_attention_heads: configured head count N (see `MixedAttention`).
      intermediate_size: feed-forward width; divisible by `num_groups`.
      head_ratio: >= 1; `N' = max(1, N // head_ratio)` self-attention heads
        (see `MixedAttention`).
      kernel_size: odd convolution window k.
      num_groups: groups G of both feed-forward matrices (>= 1).
      conv_only: convolution-only ablation (see `MixedAttention`).
      attention_only: bottleneck attention without convolution heads (see
        `MixedAttention`).
      causal: position t only sees positions <= t, in both branches; the
        causal mask is combined with the given attention mask.
      conv_mask_values: zero padding positions in the convolution branch
        (see `SpanDynamicConv`); False reproduces the reference.
      activation: feed-forward activation, a callable or a name of
        `official_repro.modeling.activations` (default: the exact erf GELU
        of the ConvBERT reference).
      dropout_rate: dropout on the attention output and the feed-forward
        output, before each residual.
      attention_dropout_rate: dropout on the attention probabilities.
      layer_norm_epsilon: epsilon of both LayerNorms (1e-12 as in BERT).
      kernel_initializer: initializer of all dense kernels; default truncated
        normal with stddev 0.02.
      bias_initializer: initializer of all biases.
      return_attention_scores: the default of the call argument of the same
        name (a block inside a functional encoder is called without it).
      **kwargs: other `tf_keras.layers.Layer` arguments.

    Raises:
      ValueError: on invalid sizes or ratios (see `MixedAttention`), a
        non-positive `num_groups` or `intermediate_size`, `hidden_size` or
        `intermediate_size` not divisible by `num_groups`, or a dropout rate
        outside [0, 1).
    """
    super().__init__(**kwargs)
    if num_groups < 1:
      raise ValueError(f'num_groups must be >= 1, got num_groups={num_groups}.')
    if intermediate_size < 1:
      raise ValueError(
          f'intermediate_size must be >= 1, got {intermediate_size}.'
      )
    for name, size in (
        ('hidden_size', hidden_size),
        ('intermediate_size', intermediate_size),
    ):
      if size % num_groups:
        raise ValueError(
            f'{name}={size} must be divisible by num_groups={num_groups} '
            '(grouped feed-forward).'
        )
    if not 0.0 <= dropout_rate < 1.0:
      raise ValueError(f'dropout_rate must be in [0, 1), got {dropout_rate}.')
    self._hidden_size = hidden_size
    self._num_attention_heads = num_attention_heads
    self._intermediate_size = intermediate_size
    self._head_ratio = head_ratio
    self._kernel_size = kernel_size
    self._num_groups = num_groups
    self._conv_only = conv_only
    self._attention_only = attention_only
    self._causal = causal
    self._conv_mask_values = conv_mask_values
    self._activation = (
        activations.get(activation)
        if isinstance(activation, str)
        else tf_keras.activations.get(activation)
    )
    self._dropout_rate = dropout_rate
    self._attention_dropout_rate = attention_dropout_rate
    self._layer_norm_epsilon = layer_norm_epsilon
    self._kernel_initializer = tf_keras.initializers.get(
        kernel_initializer or tf_keras.initializers.TruncatedNormal(stddev=0.02)
    )
    self._bias_initializer = tf_keras.initializers.get(bias_initializer)
    self._return_attention_scores = return_attention_scores

    self._attention = MixedAttention(
        hidden_size=hidden_size,
        num_attention_heads=num_attention_heads,
        head_ratio=head_ratio,
        kernel_size=kernel_size,
        conv_only=conv_only,
        attention_only=attention_only,
        causal=causal,
        conv_mask_values=conv_mask_values,
        attention_dropout=attention_dropout_rate,
        kernel_initializer=tf_utils.clone_initializer(self._kernel_initializer),
        bias_initializer=tf_utils.clone_initializer(self._bias_initializer),
        name='mixed_attention',
    )
    self._attention_dropout = tf_keras.layers.Dropout(dropout_rate)
    self._attention_layer_norm = tf_keras.layers.LayerNormalization(
        axis=-1,
        epsilon=layer_norm_epsilon,
        dtype=tf.float32,
        name='attention_layer_norm',
    )
    self._intermediate = self._grouped_dense(intermediate_size, 'intermediate')
    self._output = self._grouped_dense(hidden_size, 'output')
    self._output_dropout = tf_keras.layers.Dropout(dropout_rate)
    self._output_layer_norm = tf_keras.layers.LayerNormalization(
        axis=-1,
        epsilon=layer_norm_epsilon,
        dtype=tf.float32,
        name='output_layer_norm',
    )

  def _grouped_dense(self, units: int, name: str) -> grouped_dense.GroupedDense:
    return grouped_dense.GroupedDense(
        units,
        groups=self._num_groups,
        kernel_initializer=tf_utils.clone_initializer(self._kernel_initializer),
        bias_initializer=tf_utils.clone_initializer(self._bias_initializer),
        name=name,
    )

  @property
  def attention_layer(self) -> MixedAttention:
    return self._attention

  def call(
      self,
      inputs: Union[tf.Tensor, Sequence[tf.Tensor]],
      training: Optional[bool] = None,
      return_attention_scores: Optional[bool] = None,
  ) -> Union[tf.Tensor, Tuple[tf.Tensor, tf.Tensor]]:
    if return_attention_scores is None:
      return_attention_scores = self._return_attention_scores
    if isinstance(inputs, (list, tuple)):
      if len(inputs) not in (1, 2):
        raise ValueError(
            f'ConvBertBlock {self.name!r} expects [hidden_states] or '
            f'[hidden_states, attention_mask], got {len(inputs)} inputs.'
        )
      hidden_states = inputs[0]
      attention_mask = inputs[1] if len(inputs) == 2 else None
    else:
      hidden_states, attention_mask = inputs, None

    attention = self._attention(
        hidden_states,
        attention_mask,
        training=training,
        return_attention_scores=return_attention_scores,
    )
    if return_attention_scores:
      attention, probabilities = attention
    attention = self._attention_dropout(attention, training=training)
    # The LayerNorms compute in float32 under mixed precision (as Model
    # Garden's TransformerEncoderBlock): each residual sum is formed in
    # float32 from its compute-dtype branch and its float32 (or compute-
    # dtype) input.
    attention = self._attention_layer_norm(
        tf.cast(hidden_states, tf.float32) + tf.cast(attention, tf.float32)
    )

    intermediate = self._activation(self._intermediate(attention))
    output = self._output_dropout(self._output(intermediate), training=training)
    output = self._output_layer_norm(attention + tf.cast(output, tf.float32))
    output = tf.cast(output, hidden_states.dtype)
    if return_attention_scores:
      return output, probabilities
    return output

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update(
        {
            'hidden_size': self._hidden_size,
            'num_attention_heads': self._num_attention_heads,
            'intermediate_size': self._intermediate_size,
            'head_ratio': self._head_ratio,
            'kernel_size': self._kernel_size,
            'num_groups': self._num_groups,
            'conv_only': self._conv_only,
            'attention_only': self._attention_only,
            'causal': self._causal,
            'conv_mask_values': self._conv_mask_values,
            'activation': tf_keras.activations.serialize(self._activation),
            'dropout_rate': self._dropout_rate,
            'attention_dropout_rate': self._attention_dropout_rate,
            'layer_norm_epsilon': self._layer_norm_epsilon,
            'kernel_initializer': tf_keras.initializers.serialize(
                self._kernel_initializer
            ),
            'bias_initializer': tf_keras.initializers.serialize(
                self._bias_initializer
            ),
            'return_attention_scores': self._return_attention_scores,
        }
    )
    return config
