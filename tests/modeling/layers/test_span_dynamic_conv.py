"""Span-based dynamic convolution checked against per-position numpy loops."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from experiments.investigations import span_conv_speed
from official_repro.modeling.layers import span_dynamic_conv as sdc

BATCH, SEQ, WIDTH = 2, 7, 8
HEADS, HEAD_SIZE = 2, 3


def _naive_windowed_sum(values, kernel, causal):
  """out[b, t, n] = sum_j kernel[b, t, n, j] * values[b, t - left + j, n]."""
  batch, seq, heads, _ = values.shape
  k = kernel.shape[-1]
  left = k - 1 if causal else (k - 1) // 2
  out = np.zeros_like(values)
  for b in range(batch):
    for t in range(seq):
      for n in range(heads):
        for j in range(k):
          s = t - left + j
          if 0 <= s < seq:
            out[b, t, n] += kernel[b, t, n, j] * values[b, s, n]
  return out


def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def _naive_layer(layer, hidden, query):
  """The whole layer from its weights, one position at a time."""
  (
      depthwise,
      pointwise,
      span_bias,
      gen_kernel,
      gen_bias,
      value_kernel,
      value_bias,
  ) = layer.get_weights()
  k, heads, head_size = layer.kernel_size, layer.num_heads, layer.head_size
  batch, seq, _ = hidden.shape
  left = k - 1 if layer.get_config()['causal'] else (k - 1) // 2
  span_key = np.zeros((batch, seq, heads * head_size), np.float64)
  for b in range(batch):
    for t in range(seq):
      mixed = np.zeros(hidden.shape[-1])
      for j in range(k):
        s = t - left + j
        if 0 <= s < seq:
          mixed += depthwise[j, :, 0] * hidden[b, s]
      span_key[b, t] = mixed @ pointwise[0] + span_bias
  logits = (span_key * query) @ gen_kernel + gen_bias
  kernel = _softmax(logits.reshape(batch, seq, heads, k))
  values = (hidden @ value_kernel + value_bias).reshape(
      batch, seq, heads, head_size
  )
  out = _naive_windowed_sum(values, kernel, layer.get_config()['causal'])
  return out.reshape(batch, seq, heads * head_size), kernel


def _layer_and_inputs(kernel_size=3, causal=False, mask_values=False, seed=0):
  """A built layer with random weights (non-zero biases) and inputs."""
  rng = np.random.default_rng(seed)
  hidden = rng.normal(size=(BATCH, SEQ, WIDTH)).astype(np.float32)
  query = rng.normal(size=(BATCH, SEQ, HEADS * HEAD_SIZE)).astype(np.float32)
  layer = sdc.SpanDynamicConv(
      HEADS,
      HEAD_SIZE,
      kernel_size=kernel_size,
      causal=causal,
      mask_values=mask_values,
  )
  layer(hidden, query)
  layer.set_weights(
      [
          0.5 * rng.normal(size=w.shape).astype(np.float32)
          for w in layer.get_weights()
      ]
  )
  return layer, hidden, query


@pytest.mark.parametrize('causal', [False, True])
@pytest.mark.parametrize('kernel_size', [1, 3, 5])
def test_windowed_sum_equals_naive_loop(kernel_size, causal):
  rng = np.random.default_rng(kernel_size)
  values = rng.normal(size=(BATCH, SEQ, HEADS, HEAD_SIZE)).astype(np.float32)
  kernel = rng.normal(size=(BATCH, SEQ, HEADS, kernel_size)).astype(np.float32)
  got = sdc.apply_dynamic_kernel(
      tf.constant(values), tf.constant(kernel), causal=causal
  )
  np.testing.assert_allclose(
      got, _naive_windowed_sum(values, kernel, causal), rtol=1e-5, atol=1e-5
  )


# Lengths below, at and across the 32-position blocks, and a kernel wider
# than a block (k - 1 = 34 > 32), each against the naive loop.
@pytest.mark.parametrize(
    'seq_length, kernel_size',
    [(1, 9), (31, 9), (32, 9), (33, 9), (70, 9), (64, 3), (40, 35)],
)
@pytest.mark.parametrize('causal', [False, True])
def test_windowed_sum_across_blocks_equals_naive_loop(
    seq_length, kernel_size, causal
):
  rng = np.random.default_rng(seq_length + kernel_size)
  values = rng.normal(size=(2, seq_length, 2, 3)).astype(np.float32)
  kernel = rng.normal(size=(2, seq_length, 2, kernel_size)).astype(np.float32)
  got = sdc.apply_dynamic_kernel(
      tf.constant(values), tf.constant(kernel), causal=causal
  )
  np.testing.assert_allclose(
      got, _naive_windowed_sum(values, kernel, causal), rtol=1e-5, atol=1e-5
  )


@pytest.mark.parametrize('causal', [False, True])
def test_windowed_sum_gradients_equal_the_shifted_slices_form(causal):
  rng = np.random.default_rng(3)
  values = tf.constant(rng.normal(size=(2, 45, 2, 3)).astype(np.float32))
  kernel = tf.constant(rng.normal(size=(2, 45, 2, 9)).astype(np.float32))
  weights = tf.constant(rng.normal(size=(2, 45, 2, 3)).astype(np.float32))
  gradients = []
  for function in (
      sdc.apply_dynamic_kernel,
      span_conv_speed.shifted_slices_sum,
  ):
    with tf.GradientTape() as tape:
      tape.watch([values, kernel])
      loss = tf.reduce_sum(weights * function(values, kernel, causal))
    gradients.append(tape.gradient(loss, [values, kernel]))
  for got, expected in zip(*gradients):
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('jit_compile', [False, True])
def test_windowed_sum_takes_any_length_under_one_signature(jit_compile):
  function = tf.function(
      sdc.apply_dynamic_kernel,
      jit_compile=jit_compile,
      input_signature=[
          tf.TensorSpec([None, None, 2, 3]),
          tf.TensorSpec([None, None, 2, 5]),
      ],
  )
  rng = np.random.default_rng(4)
  for seq_length in (5, 37):
    values = rng.normal(size=(1, seq_length, 2, 3)).astype(np.float32)
    kernel = rng.normal(size=(1, seq_length, 2, 5)).astype(np.float32)
    np.testing.assert_allclose(
        function(values, kernel),
        _naive_windowed_sum(values, kernel, causal=False),
        rtol=1e-5,
        atol=1e-5,
    )
  assert function.experimental_get_tracing_count() == 1


def test_window_contraction_flops_counts_padded_blocks():
  # T = 70 at k = 9: 3 blocks of 32 positions, each reaching 40 values.
  assert sdc.window_contraction_flops(70, 6, 64, 9) == (
      2 * 3 * 32 * 40 * 6 * 64
  )
  # k = 35: blocks of 34 positions reaching 68.
  assert sdc.window_contraction_flops(34, 1, 1, 35) == 2 * 34 * 68


def test_windowed_sum_hand_computed():
  # One sequence [1, 2, 3], one head of size 1, k = 3 with taps (a, b, c):
  # centred out[t] = a*v[t-1] + b*v[t] + c*v[t+1]; causal uses v[t-2..t].
  values = tf.constant([1.0, 2.0, 3.0], shape=[1, 3, 1, 1])
  kernel = tf.tile(tf.constant([[[[1.0, 10.0, 100.0]]]]), [1, 3, 1, 1])
  centred = sdc.apply_dynamic_kernel(values, kernel).numpy().ravel()
  np.testing.assert_allclose(centred, [210.0, 321.0, 32.0])
  causal = sdc.apply_dynamic_kernel(values, kernel, causal=True).numpy()
  np.testing.assert_allclose(causal.ravel(), [100.0, 210.0, 321.0])


@pytest.mark.parametrize('causal', [False, True])
@pytest.mark.parametrize('kernel_size', [1, 3, 5])
def test_layer_equals_naive_loop(kernel_size, causal):
  layer, hidden, query = _layer_and_inputs(kernel_size, causal)
  expected, expected_kernel = _naive_layer(layer, hidden, query)
  np.testing.assert_allclose(
      layer(hidden, query), expected, rtol=1e-4, atol=1e-4
  )
  np.testing.assert_allclose(
      layer.dynamic_kernel(hidden, query), expected_kernel, rtol=1e-4, atol=1e-5
  )


def test_dynamic_kernel_is_a_softmax_over_taps():
  layer, hidden, query = _layer_and_inputs(kernel_size=5)
  kernel = layer.dynamic_kernel(hidden, query).numpy()
  assert kernel.shape == (BATCH, SEQ, HEADS, 5)
  assert np.all(kernel > 0)
  np.testing.assert_allclose(
      kernel.sum(-1), np.ones((BATCH, SEQ, HEADS)), rtol=1e-6
  )
  assert kernel.std() > 1e-3, 'kernel should vary with position and head'


@pytest.mark.parametrize('causal', [True, False])
def test_causal_output_ignores_future_positions(causal):
  layer, hidden, query = _layer_and_inputs(kernel_size=5, causal=causal)
  base = layer(hidden, query).numpy()
  for t in range(SEQ - 1):
    hidden2, query2 = hidden.copy(), query.copy()
    hidden2[:, t + 1 :] += 3.0
    query2[:, t + 1 :] -= 2.0
    changed = np.abs(layer(hidden2, query2).numpy() - base).max(-1)
    if causal:
      assert changed[:, : t + 1].max() < 1e-5, f'position <= {t} saw future'
    else:
      assert changed[:, t].max() > 1e-3, 'non-causal should look ahead'
    assert changed[:, t + 1 :].min() > 1e-4


def test_mask_values_makes_real_outputs_independent_of_padding():
  """Reference behaviour leaks padding into the last real tokens' outputs."""
  real = 4
  padding_mask = np.zeros((BATCH, SEQ), np.int32)
  padding_mask[:, :real] = 1
  for mask_values in (False, True):
    layer, hidden, query = _layer_and_inputs(
        kernel_size=5, mask_values=mask_values
    )
    padded_out = layer(hidden, query, padding_mask).numpy()[:, :real]
    unpadded_out = layer(hidden[:, :real], query[:, :real]).numpy()
    gap = np.abs(padded_out - unpadded_out).max()
    if mask_values:
      assert gap < 1e-5
    else:
      assert gap > 1e-3


def test_padding_mask_is_ignored_without_mask_values():
  layer, hidden, query = _layer_and_inputs(kernel_size=3)
  np.testing.assert_allclose(
      layer(hidden, query, np.zeros((BATCH, SEQ), np.int32)),
      layer(hidden, query),
  )


def test_default_initialisation_follows_tf1_original():
  layer = sdc.SpanDynamicConv(2, 4, kernel_size=9)
  config = layer.get_config()
  assert config['depthwise_initializer']['config']['stddev'] == (
      pytest.approx(1 / 9)
  )
  assert config['kernel_initializer']['config']['stddev'] == (
      pytest.approx(0.02)
  )
  layer(tf.zeros([1, 3, 16]), tf.zeros([1, 3, 8]))
  depthwise, _, bias = layer.get_weights()[:3]
  assert depthwise.shape == (9, 16, 1)
  assert 0.07 < depthwise.std() < 0.12  # truncated normal(1/9) ~ 0.098
  assert not bias.any()


def test_output_shape_and_parameter_count():
  layer = sdc.SpanDynamicConv(HEADS, HEAD_SIZE, kernel_size=3)
  out = layer(
      tf.zeros([BATCH, SEQ, WIDTH]), tf.zeros([BATCH, SEQ, HEADS * HEAD_SIZE])
  )
  assert out.shape == (BATCH, SEQ, HEADS * HEAD_SIZE)
  width, k = HEADS * HEAD_SIZE, 3
  assert layer.count_params() == (
      k * WIDTH
      + WIDTH * width
      + width
      + width * HEADS * k
      + HEADS * k
      + WIDTH * width
      + width
  )


def test_compiles_with_xla_and_unknown_length():
  layer, hidden, query = _layer_and_inputs(kernel_size=3, causal=True)
  fn = tf.function(layer, jit_compile=True)
  np.testing.assert_allclose(
      fn(hidden, query), layer(hidden, query), rtol=1e-5, atol=1e-5
  )
  graph_fn = tf.function(
      layer,
      input_signature=[
          tf.TensorSpec([None, None, WIDTH], tf.float32),
          tf.TensorSpec([None, None, HEADS * HEAD_SIZE], tf.float32),
      ],
  )
  np.testing.assert_allclose(
      graph_fn(hidden, query), layer(hidden, query), rtol=1e-5, atol=1e-5
  )


@pytest.mark.parametrize(
    'kwargs,pattern',
    [
        ({'kernel_size': 4}, r'odd.*kernel_size=4'),
        ({'kernel_size': 0}, r'kernel_size=0'),
        ({'num_heads': 0}, r'num_heads=0'),
        ({'head_size': 0}, r'head_size=0'),
    ],
)
def test_bad_configuration_raises(kwargs, pattern):
  args = {'num_heads': 2, 'head_size': 4, **kwargs}
  with pytest.raises(ValueError, match=pattern):
    sdc.SpanDynamicConv(**args)


def test_get_config_round_trip():
  layer = sdc.SpanDynamicConv(
      3, 4, kernel_size=5, causal=True, mask_values=True, name='sdconv'
  )
  config = layer.get_config()
  restored = sdc.SpanDynamicConv.from_config(config)
  assert restored.get_config() == config
  revived = tf_keras.layers.deserialize(tf_keras.layers.serialize(layer))
  assert isinstance(revived, sdc.SpanDynamicConv)
  assert revived.get_config() == config
