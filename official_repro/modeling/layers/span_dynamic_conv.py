"""Span-based dynamic convolution, ConvBERT's local-attention heads (paper 002).

With hidden states `X [B, T, D]` and the attention branch's query
`Q [B, T, N'H]`: span key `Ks = pointwise(depthwise_k(X))`, kernel
`softmax_k(Dense(Ks * Q))` `[B, T, N', k]`, values `Dense(X)` (own
projection), and `out[t] = sum_j kernel[t, j] * V[t + j - (k-1)/2]` with
zeros outside the sequence (`causal`: the window `t-k+1 .. t`).

As in the reference there is no dropout and padding is not masked;
`mask_values=True` (a deviation, off by default) zeroes padding so real
positions match the unpadded sequence. `apply_dynamic_kernel` computes the
window sum as one banded contraction per block of `max(32, k-1)` positions
(pad and reshape, no gather; XLA-compatible, any length), faster than k
shifted slices in the backward pass
(`experiments/reports/span_conv_speed_cpu.md`). Initialisation follows the
TF1 original: depthwise stddev `1/k`, other kernels 0.02, zero biases.
"""

from typing import Any, Dict, Optional, Tuple, Union

import tensorflow as tf
import tf_keras

from official.modeling import tf_utils
from official_repro.modeling import arguments

_Initializer = Union[str, Dict[str, Any], tf_keras.initializers.Initializer]


def dense_initializer(
    initializer: Optional[_Initializer],
) -> tf_keras.initializers.Initializer:
  """`initializer`, or for None the TF1 original's truncated normal 0.02."""
  return tf_keras.initializers.get(
      initializer or tf_keras.initializers.TruncatedNormal(stddev=0.02)
  )


def cloned_initializers(
    kernel: _Initializer, bias: _Initializer
) -> Dict[str, tf_keras.initializers.Initializer]:
  """Copies of a layer's kernel and bias initializers, as keyword arguments.

  A sublayer gets copies, so that no two draw the same values.
  """
  return dict(
      kernel_initializer=tf_utils.clone_initializer(kernel),
      bias_initializer=tf_utils.clone_initializer(bias),
  )


def window_padding(kernel_size: int, causal: bool) -> Tuple[int, int]:
  """`(left, right)` zeros for a k-tap window: `(k-1, 0)` if causal."""
  if causal:
    return kernel_size - 1, 0
  return (kernel_size - 1) // 2, (kernel_size - 1) // 2


WINDOW_BLOCK_SIZE = 32


def check_kernel_size(kernel_size: int) -> None:
  """Raises ValueError unless `kernel_size` is an odd integer >= 1."""
  if kernel_size < 1 or kernel_size % 2 == 0:
    raise ValueError(
        f'kernel_size must be an odd integer >= 1, got kernel_size='
        f'{kernel_size}.'
    )


def block_size_for(kernel_size: int) -> int:
  """Positions per banded block: `WINDOW_BLOCK_SIZE`, or `k-1` if larger."""
  return max(WINDOW_BLOCK_SIZE, kernel_size - 1)


def window_contraction_flops(
    seq_length: int, num_heads: int, head_size: int, kernel_size: int
) -> int:
  """FLOPs of `apply_dynamic_kernel`'s banded contraction for one sequence.

  `ceil(T/b)` blocks of `b` positions, each `2(b+k-1)H` per head.
  """
  block_size = block_size_for(kernel_size)
  num_blocks = -(-seq_length // block_size)
  return (
      2
      * num_blocks
      * block_size
      * (block_size + kernel_size - 1)
      * num_heads
      * head_size
  )


def apply_dynamic_kernel(
    values: tf.Tensor, kernel: tf.Tensor, causal: bool = False
) -> tf.Tensor:
  """Combines each position's window of values with its own k-tap kernel.

  `values` `[B, T, N, H]` (static N, H), `kernel` `[B, T, N, k]` (static k)
  -> `[B, T, N, H]`, one banded contraction per block of positions.
  """
  kernel_size = kernel.shape[-1]
  num_heads, head_size = values.shape[2], values.shape[3]
  block = block_size_for(kernel_size)
  window = block + kernel_size - 1
  left, _ = window_padding(kernel_size, causal)
  batch_size, seq_length = tf.shape(values)[0], tf.shape(values)[1]
  num_blocks = (seq_length + block - 1) // block
  padded_length = num_blocks * block
  # Values: `left` zeros in front and zeros up to one block past the last,
  # so window c is chunk c followed by chunk c+1's first k-1 positions.
  padded = tf.pad(
      values,
      [
          [0, 0],
          [left, padded_length + block - left - seq_length],
          [0, 0],
          [0, 0],
      ],
  )
  chunks = tf.reshape(
      padded, [batch_size, num_blocks + 1, block, num_heads, head_size]
  )
  windows = tf.concat(
      [chunks[:, :-1], chunks[:, 1:, : kernel_size - 1]], axis=2
  )  # [B, C, b+k-1, N, H]
  # Kernel: per block and head a [b, k] matrix; padding each row with b
  # zeros and reading the flat rows back b+k-1 wide shifts row t right by
  # t (the zeros that come in are the previous row's), giving the band.
  kernel = tf.pad(
      kernel, [[0, 0], [0, padded_length - seq_length], [0, 0], [0, 0]]
  )
  kernel = tf.reshape(
      kernel, [batch_size, num_blocks, block, num_heads, kernel_size]
  )
  kernel = tf.transpose(kernel, [0, 1, 3, 2, 4])  # [B, C, N, b, k]
  kernel = tf.pad(kernel, [[0, 0], [0, 0], [0, 0], [0, 0], [0, block]])
  flat = tf.reshape(
      kernel, [batch_size, num_blocks, num_heads, block * (block + kernel_size)]
  )
  band = tf.reshape(
      flat[..., : block * window],
      [batch_size, num_blocks, num_heads, block, window],
  )
  output = tf.einsum('bcnts,bcsnh->bctnh', band, windows)
  output = tf.reshape(output, [batch_size, padded_length, num_heads, head_size])
  return output[:, :seq_length]


def split_heads(tensor: tf.Tensor, num_heads: int, width: int) -> tf.Tensor:
  """`[B, T, num_heads * width]` -> `[B, T, num_heads, width]`."""
  shape = tf.shape(tensor)
  return tf.reshape(tensor, [shape[0], shape[1], num_heads, width])


@tf_keras.utils.register_keras_serializable(package='official_repro')
class SpanDynamicConv(arguments.ConfigFromArguments, tf_keras.layers.Layer):
  """Span-based dynamic convolution over `num_heads` heads (see module doc).

  Call: `hidden_states` `[B, T, D]`, `query` `[B, T, num_heads * head_size]`,
  `padding_mask` `[B, T]` (used only with `mask_values`) -> `[B, T,
  num_heads * head_size]`.
  """

  def __init__(
      self,
      num_heads: int,
      head_size: int,
      kernel_size: int = 9,
      causal: bool = False,
      mask_values: bool = False,
      kernel_initializer: Optional[_Initializer] = None,
      depthwise_initializer: Optional[_Initializer] = None,
      bias_initializer: _Initializer = 'zeros',
      **kwargs,
  ):
    """Initializes the layer.

    `kernel_size` is odd; `kernel_initializer` (pointwise and dense kernels)
    defaults to truncated normal 0.02, `depthwise_initializer` to stddev
    `1 / kernel_size`.
    """
    super().__init__(**kwargs)
    arguments.check_sizes(num_heads=num_heads, head_size=head_size)
    check_kernel_size(kernel_size)
    self._num_heads = num_heads
    self._head_size = head_size
    self._kernel_size = kernel_size
    self._causal = causal
    self._mask_values = mask_values
    self._kernel_initializer = dense_initializer(kernel_initializer)
    self._depthwise_initializer = tf_keras.initializers.get(
        depthwise_initializer
        or tf_keras.initializers.TruncatedNormal(stddev=1.0 / kernel_size)
    )
    self._bias_initializer = tf_keras.initializers.get(bias_initializer)

    self._build_sublayers()

  def _build_sublayers(self) -> None:
    """The span-key convolution, kernel generator and value projection."""
    width = self._num_heads * self._head_size
    self._span_key = tf_keras.layers.SeparableConv1D(
        filters=width,
        kernel_size=self._kernel_size,
        padding='causal' if self._causal else 'same',
        depthwise_initializer=tf_utils.clone_initializer(
            self._depthwise_initializer
        ),
        pointwise_initializer=tf_utils.clone_initializer(
            self._kernel_initializer
        ),
        bias_initializer=tf_utils.clone_initializer(self._bias_initializer),
        name='span_key',
    )
    self._kernel_generator = tf_keras.layers.Dense(
        self._num_heads * self._kernel_size,
        name='kernel_generator',
        **cloned_initializers(self._kernel_initializer, self._bias_initializer),
    )
    self._value_projection = tf_keras.layers.Dense(
        width,
        name='conv_value',
        **cloned_initializers(self._kernel_initializer, self._bias_initializer),
    )

  @property
  def num_heads(self) -> int:
    return self._num_heads

  @property
  def head_size(self) -> int:
    return self._head_size

  @property
  def kernel_size(self) -> int:
    return self._kernel_size

  def _masked(
      self, tensor: tf.Tensor, padding_mask: Optional[tf.Tensor]
  ) -> tf.Tensor:
    """Zeros the padding rows of a `[B, T, C]` tensor if `mask_values`."""
    if not self._mask_values or padding_mask is None:
      return tensor
    return tensor * tf.cast(padding_mask, tensor.dtype)[:, :, tf.newaxis]

  def dynamic_kernel(
      self,
      hidden_states: tf.Tensor,
      query: tf.Tensor,
      padding_mask: Optional[tf.Tensor] = None,
  ) -> tf.Tensor:
    """`[B, T, num_heads, kernel_size]` kernels, each summing to 1."""
    span_key = self._span_key(self._masked(hidden_states, padding_mask))
    logits = self._kernel_generator(span_key * query)
    return tf.nn.softmax(
        split_heads(logits, self._num_heads, self._kernel_size), axis=-1
    )

  def call(
      self,
      hidden_states: tf.Tensor,
      query: tf.Tensor,
      padding_mask: Optional[tf.Tensor] = None,
  ) -> tf.Tensor:
    kernel = self.dynamic_kernel(hidden_states, query, padding_mask)
    values = split_heads(
        self._masked(self._value_projection(hidden_states), padding_mask),
        self._num_heads,
        self._head_size,
    )
    output = apply_dynamic_kernel(values, kernel, causal=self._causal)
    width = self._num_heads * self._head_size
    output = tf.reshape(
        output, tf.concat([tf.shape(hidden_states)[:-1], [width]], axis=0)
    )
    output.set_shape(hidden_states.shape[:-1].concatenate([width]))
    return output
