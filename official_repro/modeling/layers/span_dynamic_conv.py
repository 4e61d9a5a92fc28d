"""Span-based dynamic convolution, ConvBERT's local-attention heads (paper 002).

A dynamic convolution predicts a separate k-tap kernel for every position and
head and uses it to average the values in a window of k tokens around that
position. ConvBERT makes the kernel depend on the *span* around the token,
not only on the token itself. With hidden states `X [B, T, D]` and the query
`Q [B, T, N'*H]` that the attention branch also uses:

1. `Ks = pointwise(depthwise_k(X))`: a separable 1-D convolution over time
   (depthwise kernel of width k, 'same' zero padding, then a pointwise map to
   `N'*H` with bias; no activation). `Ks` is a span-aware key.
2. `A = Ks * Q` (element-wise).
3. `kernel = softmax_k(reshape(Dense(A -> N'*k), [B, T, N', k]))`.
4. `V = Dense(X -> N'*H)`, reshaped `[B, T, N', H]` (its own projection, not
   the attention branch's values).
5. `out[b, t, n] = sum_j kernel[b, t, n, j] * V[b, t + j - (k-1)/2, n]`, where
   positions outside `0 .. T-1` hold zeros; the result is `[B, T, N'*H]`.

With `causal=True` both the depthwise convolution and the window look only
backwards: the time axis is zero-padded with `k-1` steps on the left and none
on the right, so `out[t]` combines `V[t-k+1 .. t]` and depends on no input
after `t` (usable for language modeling).

Padding and dropout. As in the reference implementations, this branch has no
dropout and ignores the padding mask (`mask_values=False`, the default): the
hidden states of padding tokens enter the depthwise convolution and the values
of the real tokens within `(k-1)/2` of the end of the sequence, so those
outputs depend on how much padding follows and on what the padding tokens'
hidden states are. With `mask_values=True` padding positions are treated like
the zero padding beyond the sequence ends: their hidden states are zeroed
before the depthwise convolution and their values are zeroed before the
windowed sum, so the outputs at real positions equal those computed on the
unpadded sequence. That is a deviation from the reference, off by default.

Banded blocks. Step 5 is a product of each head's values with a banded `T x
(T+k-1)` matrix whose row t holds position t's kernel on the diagonal band
`t .. t+k-1` of the zero-padded values. `apply_dynamic_kernel` cuts the
sequence into blocks of `b = max(32, k-1)` positions and does one batched
contraction per block: the block's `b x (b+k-1)` band (built from the kernel
by padding and reshaping alone, the skewing trick, no gather) against the
`b+k-1` padded values its positions can reach (the block and the first `k-1`
values of the next). That costs `2(b+k-1)H` FLOPs per position and head
instead of the k-tap sum's `2kH` (the FLOPs tool and the papers count the
latter; `window_contraction_flops` gives the former, which XLA's dot count
includes), and it is faster where it matters, the backward pass: the earlier
form, k shifted static slices multiplied and accumulated, is 27 element-wise
ops at k = 9 whose gradients each pad a full-size tensor. Forward only,
under XLA, the slices are faster (XLA fuses them). Measured with
`experiments/investigations/span_conv_speed.py`; the numbers are in
`experiments/reports/span_conv_speed_cpu.md`. All ops are pad, reshape, slice,
concatenate, transpose and einsum, so the layer compiles with XLA and
accepts any sequence length (positions past the last block's end are
computed on zero padding and dropped).

Initialisation follows the TF1 original (yitu-opensource/ConvBert): the
depthwise kernel is truncated normal with stddev `1/k`; the pointwise kernel
and the dense kernels (dynamic-kernel generator and value projection) are
truncated normal with stddev 0.02; all biases are zero. (Hugging Face uses
0.02 everywhere.)

Parameters for input width D: depthwise `k*D`, pointwise `D*N'H + N'H`,
kernel generator `N'H*N'k + N'k`, values `D*N'H + N'H`.
"""

from typing import Any, Dict, Optional, Tuple, Union

import tensorflow as tf
import tf_keras

from official.modeling import tf_utils

_Initializer = Union[str, Dict[str, Any], tf_keras.initializers.Initializer]


def _default_dense_initializer() -> tf_keras.initializers.Initializer:
  return tf_keras.initializers.TruncatedNormal(stddev=0.02)


def window_padding(kernel_size: int, causal: bool) -> Tuple[int, int]:
  """Zeros added before and after the time axis for a k-tap window.

  Args:
    kernel_size: odd window width k.
    causal: whether the window ends at the current position.

  Returns:
    `(left, right)`: `(k-1, 0)` if causal, else `((k-1)/2, (k-1)/2)`.
  """
  if causal:
    return kernel_size - 1, 0
  return (kernel_size - 1) // 2, (kernel_size - 1) // 2


WINDOW_BLOCK_SIZE = 32


def block_size_for(kernel_size: int) -> int:
  """Positions per banded block.

  Positions per banded block: `WINDOW_BLOCK_SIZE`, or `k-1` if larger
  (a block's window must fit in it and the next block).
  """
  return max(WINDOW_BLOCK_SIZE, kernel_size - 1)


def window_contraction_flops(
    seq_length: int, num_heads: int, head_size: int, kernel_size: int
) -> int:
  """FLOPs of `apply_dynamic_kernel`'s banded contraction for one sequence.

  FLOPs of `apply_dynamic_kernel`'s banded contraction for one sequence:
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

  `out[b, t, n] = sum_j kernel[b, t, n, j] * values[b, t - left + j, n]`,
  with `left` from `window_padding` and zeros outside `0 .. T-1`, computed
  as one banded contraction per block of positions (see the module doc).

  Args:
    values: `[B, T, N, H]` float tensor with static N and H.
    kernel: `[B, T, N, k]` float tensor with a static last dimension.
    causal: if True, the window is `t-k+1 .. t`; else centred on `t`.

  Returns:
    `[B, T, N, H]` tensor.
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
class SpanDynamicConv(tf_keras.layers.Layer):
  """Span-based dynamic convolution over `num_heads` heads (see module doc).

  Call arguments:
    hidden_states: `[B, T, D]` layer input X.
    query: `[B, T, num_heads * head_size]`, the query projection shared with
      the self-attention branch.
    padding_mask: optional `[B, T]` (1 = real token, 0 = padding). Used only
      when the layer was built with `mask_values=True`; ignored otherwise.

  Returns:
    `[B, T, num_heads * head_size]`.
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

    Args:
      num_heads: number of convolution heads N' (>= 1).
      head_size: width H of each head (>= 1).
      kernel_size: window width k; odd and >= 1.
      causal: if True, position t only sees positions <= t.
      mask_values: if True, zero the padding positions' hidden states and
        values (see module doc); False reproduces the reference.
      kernel_initializer: initializer of the pointwise and dense kernels;
        default truncated normal with stddev 0.02.
      depthwise_initializer: initializer of the `[k, D, 1]` depthwise kernel;
        default truncated normal with stddev `1 / kernel_size`.
      bias_initializer: initializer of all biases.
      **kwargs: other `tf_keras.layers.Layer` arguments.

    Raises:
      ValueError: on a non-positive head count or size, or an even or
        non-positive kernel size.
    """
    super().__init__(**kwargs)
    if num_heads < 1:
      raise ValueError(f'num_heads must be >= 1, got num_heads={num_heads}.')
    if head_size < 1:
      raise ValueError(f'head_size must be >= 1, got head_size={head_size}.')
    if kernel_size < 1 or kernel_size % 2 == 0:
      raise ValueError(
          f'kernel_size must be an odd integer >= 1, got kernel_size='
          f'{kernel_size}.'
      )
    self._num_heads = num_heads
    self._head_size = head_size
    self._kernel_size = kernel_size
    self._causal = causal
    self._mask_values = mask_values
    self._kernel_initializer = tf_keras.initializers.get(
        kernel_initializer or _default_dense_initializer()
    )
    self._depthwise_initializer = tf_keras.initializers.get(
        depthwise_initializer
        or tf_keras.initializers.TruncatedNormal(stddev=1.0 / kernel_size)
    )
    self._bias_initializer = tf_keras.initializers.get(bias_initializer)

    width = num_heads * head_size
    self._span_key = tf_keras.layers.SeparableConv1D(
        filters=width,
        kernel_size=kernel_size,
        padding='causal' if causal else 'same',
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
        num_heads * kernel_size,
        kernel_initializer=tf_utils.clone_initializer(self._kernel_initializer),
        bias_initializer=tf_utils.clone_initializer(self._bias_initializer),
        name='kernel_generator',
    )
    self._value_projection = tf_keras.layers.Dense(
        width,
        kernel_initializer=tf_utils.clone_initializer(self._kernel_initializer),
        bias_initializer=tf_utils.clone_initializer(self._bias_initializer),
        name='conv_value',
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
    """Per-position, per-head convolution kernels (steps 1-3).

    Args:
      hidden_states: `[B, T, D]`.
      query: `[B, T, num_heads * head_size]`.
      padding_mask: optional `[B, T]`, used only with `mask_values=True`.

    Returns:
      `[B, T, num_heads, kernel_size]` kernels; each sums to 1 over the last
      axis.
    """
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
    shape = tf.shape(hidden_states)
    output = tf.reshape(
        output, [shape[0], shape[1], self._num_heads * self._head_size]
    )
    output.set_shape(
        hidden_states.shape[:-1].concatenate(
            [self._num_heads * self._head_size]
        )
    )
    return output

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    config.update(
        {
            'num_heads': self._num_heads,
            'head_size': self._head_size,
            'kernel_size': self._kernel_size,
            'causal': self._causal,
            'mask_values': self._mask_values,
            'kernel_initializer': tf_keras.initializers.serialize(
                self._kernel_initializer
            ),
            'depthwise_initializer': tf_keras.initializers.serialize(
                self._depthwise_initializer
            ),
            'bias_initializer': tf_keras.initializers.serialize(
                self._bias_initializer
            ),
        }
    )
    return config
