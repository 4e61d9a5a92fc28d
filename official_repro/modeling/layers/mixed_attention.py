"""ConvBERT's mixed attention and the transformer block built on it (002).

`MixedAttention` keeps `N' = max(1, N // head_ratio)` self-attention heads of
size `hidden / N` (the ConvBERT reference's rule, so N need not be divisible
by the ratio) and adds `SpanDynamicConv` heads sharing its query; the
concatenation is projected back to `hidden`. Unlike the reference's mixed
path, the span-key convolution reads the full hidden width, so N' * ratio
!= N also runs. `ConvBertBlock` is a post-LN BERT block around it with a
(grouped) feed-forward network, called like Model Garden's
`TransformerEncoderBlock`: `block([hidden_states, attention_mask])`.
Masking uses Model Garden's `MaskedSoftmax`; the convolution branch ignores
padding unless `conv_mask_values`. Initialisation as in the TF1 original.
"""

from typing import Any, Dict, Optional, Sequence, Tuple, Union

import tensorflow as tf
import tf_keras

from official.nlp.modeling.layers import masked_softmax
from official_repro.modeling import activations
from official_repro.modeling import arguments
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
class MixedAttention(arguments.ConfigFromArguments, tf_keras.layers.Layer):
  """Self-attention heads plus span-based dynamic convolution heads.

  Mixed (default): `N'` attention heads and `N'` convolution heads sharing
  the query, output dense `2N'H -> hidden`. `conv_only` (the rebuttal's
  ablation): `2N'` convolution heads. `attention_only` (the reference's
  "noconv", 002 Table 4 "+BNK,+GL"): `N'` attention heads only. `causal`:
  output t depends on no input after t.

  Call: `hidden_states` `[B, T, hidden_size]`, `attention_mask` `[B, T, T]`
  (1 = may attend); returns `[B, T, hidden_size]`, with
  `return_attention_scores` also the `[B, N', T, T]` probabilities (not with
  `conv_only`).
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

    `hidden_size` is divisible by N = `num_attention_heads`; `head_ratio` >= 1
    keeps `N' = max(1, N // head_ratio)` attention heads; `kernel_size` is
    odd; `conv_mask_values` reads padding as the maximum of `attention_mask`
    over queries; `kernel_initializer` defaults to truncated normal 0.02.
    """
    super().__init__(**kwargs)
    arguments.check_sizes(
        hidden_size=hidden_size,
        num_attention_heads=num_attention_heads,
        head_ratio=head_ratio,
    )
    arguments.check_divisible(
        'num_attention_heads', num_attention_heads, hidden_size=hidden_size
    )
    span_dynamic_conv.check_kernel_size(kernel_size)
    arguments.check_rates(attention_dropout=attention_dropout)
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
    self._kernel_initializer = span_dynamic_conv.dense_initializer(
        kernel_initializer
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

    self._build_sublayers()

  def _build_sublayers(self) -> None:
    """The query, key, value, convolution and output layers."""
    query_heads = (
        self._num_conv_heads
        if self._conv_only
        else self._num_self_attention_heads
    )
    self._query = self._dense(query_heads * self._head_size, 'query')
    if not self._conv_only:
      attention_width = self._num_self_attention_heads * self._head_size
      self._key = self._dense(attention_width, 'key')
      self._value = self._dense(attention_width, 'value')
      self._masked_softmax = masked_softmax.MaskedSoftmax(
          mask_expansion_axes=[1]
      )
      self._attention_dropout_layer = tf_keras.layers.Dropout(
          self._attention_dropout
      )
    if not self._attention_only:
      self._conv = span_dynamic_conv.SpanDynamicConv(
          num_heads=self._num_conv_heads,
          head_size=self._head_size,
          kernel_size=self._kernel_size,
          causal=self._causal,
          mask_values=self._conv_mask_values,
          name='span_dynamic_conv',
          **span_dynamic_conv.cloned_initializers(
              self._kernel_initializer, self._bias_initializer
          ),
      )
    self._output_dense = self._dense(self._hidden_size, 'attention_output')

  def _dense(self, units: int, name: str) -> tf_keras.layers.Dense:
    return tf_keras.layers.Dense(
        units,
        name=name,
        **span_dynamic_conv.cloned_initializers(
            self._kernel_initializer, self._bias_initializer
        ),
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


@tf_keras.utils.register_keras_serializable(package='official_repro')
class ConvBertBlock(arguments.ConfigFromArguments, tf_keras.layers.Layer):
  """Post-LN transformer block with mixed attention and grouped FFN.

  `x1 = LayerNorm(x + Dropout(MixedAttention(x, mask)))`,
  `y = LayerNorm(x1 + Dropout(GL_out(activation(GL_in(x1)))))` with
  `GroupedDense` of `num_groups` groups. Called on `[hidden_states,
  attention_mask]` or `hidden_states`, `[B, T, hidden_size]` and `[B, T, T]`;
  returns `[B, T, hidden_size]` or `(output, [B, N', T, T] probabilities)`.
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
    """Initializes the block; other arguments as in `MixedAttention`.

    `intermediate_size` and `hidden_size` are divisible by `num_groups` (of
    both feed-forward matrices); `activation` is a callable or a name of
    `activations` (default: the reference's erf GELU); `dropout_rate` is
    applied before each residual; `return_attention_scores` is the call's
    default.
    """
    super().__init__(**kwargs)
    arguments.check_sizes(
        num_groups=num_groups, intermediate_size=intermediate_size
    )
    arguments.check_divisible(  # The grouped feed-forward's widths.
        'num_groups',
        num_groups,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
    )
    arguments.check_rates(dropout_rate=dropout_rate)
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
    self._kernel_initializer = span_dynamic_conv.dense_initializer(
        kernel_initializer
    )
    self._bias_initializer = tf_keras.initializers.get(bias_initializer)
    self._return_attention_scores = return_attention_scores
    self._build_sublayers()

  def _build_sublayers(self) -> None:
    """The mixed attention, the grouped feed-forward, dropouts and norms."""
    self._attention = MixedAttention(
        hidden_size=self._hidden_size,
        num_attention_heads=self._num_attention_heads,
        head_ratio=self._head_ratio,
        kernel_size=self._kernel_size,
        conv_only=self._conv_only,
        attention_only=self._attention_only,
        causal=self._causal,
        conv_mask_values=self._conv_mask_values,
        attention_dropout=self._attention_dropout_rate,
        name='mixed_attention',
        **span_dynamic_conv.cloned_initializers(
            self._kernel_initializer, self._bias_initializer
        ),
    )
    self._attention_dropout = tf_keras.layers.Dropout(self._dropout_rate)
    self._attention_layer_norm = self._layer_norm('attention_layer_norm')
    self._intermediate = self._grouped_dense(
        self._intermediate_size, 'intermediate'
    )
    self._output = self._grouped_dense(self._hidden_size, 'output')
    self._output_dropout = tf_keras.layers.Dropout(self._dropout_rate)
    self._output_layer_norm = self._layer_norm('output_layer_norm')

  def _layer_norm(self, name: str) -> tf_keras.layers.LayerNormalization:
    return tf_keras.layers.LayerNormalization(
        axis=-1, epsilon=self._layer_norm_epsilon, dtype=tf.float32, name=name
    )

  def _grouped_dense(self, units: int, name: str) -> grouped_dense.GroupedDense:
    return grouped_dense.GroupedDense(
        units,
        groups=self._num_groups,
        name=name,
        **span_dynamic_conv.cloned_initializers(
            self._kernel_initializer, self._bias_initializer
        ),
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
