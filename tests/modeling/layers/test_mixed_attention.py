"""MixedAttention and ConvBertBlock: shapes, masking, training, configs."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from official.nlp.modeling import layers as mg_layers
from official_repro.modeling.layers import mixed_attention as ma

BATCH, SEQ, HIDDEN, HEADS = 2, 6, 16, 4
REAL_LENGTHS = (6, 3)


def _inputs(seed=0):
  """Random hidden states and Model Garden's 3-D mask for REAL_LENGTHS."""
  rng = np.random.default_rng(seed)
  hidden = rng.normal(size=(BATCH, SEQ, HIDDEN)).astype(np.float32)
  input_mask = (np.arange(SEQ)[None] < np.array(REAL_LENGTHS)[:, None]).astype(
      np.int32
  )
  mask = mg_layers.SelfAttentionMask()(hidden, input_mask).numpy()
  return hidden, input_mask, mask


def _randomise(layer, seed=1, scale=0.3):
  rng = np.random.default_rng(seed)
  layer.set_weights(
      [
          scale * rng.normal(size=w.shape).astype(np.float32)
          for w in layer.get_weights()
      ]
  )


def _expected_mixed_params(hidden, heads, ratio, k):
  """Hand count of the parameters, in the TF1 layout."""
  head_size = hidden // heads
  attention_heads = max(1, heads // ratio)
  width = attention_heads * head_size

  def dense(i, o):
    return i * o + o

  return (
      3 * dense(hidden, width)  # query, key, value
      + k * hidden
      + dense(hidden, width)  # depthwise, pointwise + bias
      + dense(width, attention_heads * k)  # dynamic-kernel generator
      + dense(hidden, width)  # convolution values
      + dense(2 * width, hidden)
  )  # output projection


@pytest.mark.parametrize('conv_only', [False, True])
def test_builds_and_outputs_hidden_width(conv_only):
  hidden, _, mask = _inputs()
  layer = ma.MixedAttention(
      HIDDEN, HEADS, head_ratio=2, kernel_size=3, conv_only=conv_only
  )
  assert layer(hidden, mask).shape == (BATCH, SEQ, HIDDEN)
  if conv_only:
    assert (layer.num_self_attention_heads, layer.num_conv_heads) == (0, 4)
    assert not any('/key/' in w.name for w in layer.weights)
    assert not any('/value/' in w.name for w in layer.weights)
  else:
    assert (layer.num_self_attention_heads, layer.num_conv_heads) == (2, 2)
    assert any('/key/' in w.name for w in layer.weights)


def test_parameter_count_base_size():
  layer = ma.MixedAttention(768, 12, head_ratio=2, kernel_size=9)
  layer(tf.zeros([1, 4, 768]))
  assert layer.count_params() == _expected_mixed_params(768, 12, 2, 9)
  assert layer.count_params() == 2_094_774


def _output_kernel_shape(layer):
  (kernel,) = [
      w
      for w in layer.weights
      if 'attention_output' in w.name and 'kernel' in w.name
  ]
  return tuple(kernel.shape)


@pytest.mark.parametrize(
    'hidden,heads,ratio,attention_heads',
    [
        (36, 9, 2, 4),  # 9 // 2 = 4: N need not be divisible by the ratio.
        (16, 4, 3, 1),  # 4 // 3 = 1.
        (16, 1, 2, 1),  # 1 // 2 = 0 -> at least one head.
        (16, 2, 8, 1),  # a ratio above N also keeps one head.
    ],
)
def test_head_count_follows_reference_rule(
    hidden, heads, ratio, attention_heads
):
  """N' = max(1, N // head_ratio), heads of size hidden // N (reference)."""
  head_size = hidden // heads
  rng = np.random.default_rng(0)
  inputs = rng.normal(size=(BATCH, SEQ, hidden)).astype(np.float32)
  layer = ma.MixedAttention(hidden, heads, head_ratio=ratio, kernel_size=3)
  output, probs = layer(inputs, return_attention_scores=True)
  assert output.shape == (BATCH, SEQ, hidden)
  assert probs.shape == (BATCH, attention_heads, SEQ, SEQ)
  assert (
      layer.num_self_attention_heads,
      layer.num_conv_heads,
      layer.head_size,
  ) == (attention_heads, attention_heads, head_size)
  assert _output_kernel_shape(layer) == (
      2 * attention_heads * head_size,
      hidden,
  )
  assert layer.count_params() == _expected_mixed_params(hidden, heads, ratio, 3)

  conv_only = ma.MixedAttention(
      hidden, heads, head_ratio=ratio, kernel_size=3, conv_only=True
  )
  assert conv_only(inputs).shape == (BATCH, SEQ, hidden)
  assert conv_only.num_conv_heads == 2 * attention_heads
  assert _output_kernel_shape(conv_only) == (
      2 * attention_heads * head_size,
      hidden,
  )

  attention_only = ma.MixedAttention(
      hidden, heads, head_ratio=ratio, kernel_size=3, attention_only=True
  )
  assert attention_only(inputs).shape == (BATCH, SEQ, hidden)
  assert (
      attention_only.num_self_attention_heads,
      attention_only.num_conv_heads,
  ) == (attention_heads, 0)
  assert _output_kernel_shape(attention_only) == (
      attention_heads * head_size,
      hidden,
  )


def test_block_with_indivisible_heads_runs():
  """The 002 Table 4 larger baseline's shape: 9 heads of 48, N' = 4."""
  block = ma.ConvBertBlock(
      432,
      9,
      1728,
      head_ratio=2,
      kernel_size=9,
      num_groups=2,
      attention_only=True,
  )
  output = block(tf.zeros([1, SEQ, 432]))
  assert output.shape == (1, SEQ, 432)
  assert block.attention_layer.num_self_attention_heads == 4
  assert _output_kernel_shape(block.attention_layer) == (192, 432)


def test_attention_probabilities_match_numpy_and_skip_padding():
  hidden, _, mask = _inputs()
  layer = ma.MixedAttention(HIDDEN, HEADS, kernel_size=3)
  layer(hidden, mask)
  _randomise(layer)
  _, probs = layer(hidden, mask, return_attention_scores=True)
  probs = probs.numpy()
  weights = {
      w.name.split('/')[-2] + '/' + w.name.split('/')[-1][:-2]: w.numpy()
      for w in layer.weights
  }
  head_size, heads = HIDDEN // HEADS, HEADS // 2

  def project(name):
    out = hidden @ weights[f'{name}/kernel'] + weights[f'{name}/bias']
    return out.reshape(BATCH, SEQ, heads, head_size)

  scores = np.einsum('bfnh,btnh->bnft', project('query'), project('key'))
  scores = scores / np.sqrt(head_size) - 1e9 * (1 - mask[:, None])
  expected = np.exp(scores - scores.max(-1, keepdims=True))
  expected /= expected.sum(-1, keepdims=True)
  assert probs.shape == (BATCH, heads, SEQ, SEQ)
  np.testing.assert_allclose(probs, expected, rtol=1e-4, atol=1e-6)
  assert probs[1, :, :, REAL_LENGTHS[1] :].max() < 1e-7


def test_padding_does_not_change_attention_branch_at_real_positions():
  # With k = 1 the convolution branch is per-position, so any change at a
  # real position could only come through the attention branch.
  hidden, _, mask = _inputs()
  perturbed = hidden.copy()
  perturbed[1, REAL_LENGTHS[1] :] = 50.0
  layer = ma.MixedAttention(HIDDEN, HEADS, kernel_size=1)
  layer(hidden, mask)
  _randomise(layer)
  real = slice(0, REAL_LENGTHS[1])
  np.testing.assert_allclose(
      layer(perturbed, mask)[1, real],
      layer(hidden, mask)[1, real],
      rtol=1e-5,
      atol=1e-5,
  )
  unmasked_gap = np.abs(layer(perturbed)[1, real] - layer(hidden)[1, real])
  assert unmasked_gap.max() > 1e-3, 'without the mask padding must leak'


def test_conv_branch_padding_leak_is_reference_behaviour_unless_masked():
  hidden, _, mask = _inputs()
  perturbed = hidden.copy()
  perturbed[1, REAL_LENGTHS[1] :] = 50.0
  real = slice(0, REAL_LENGTHS[1])
  gaps = {}
  for conv_mask_values in (False, True):
    layer = ma.MixedAttention(
        HIDDEN, HEADS, kernel_size=3, conv_mask_values=conv_mask_values
    )
    layer(hidden, mask)
    _randomise(layer)
    gaps[conv_mask_values] = np.abs(
        layer(perturbed, mask)[1, real] - layer(hidden, mask)[1, real]
    ).max()
  assert gaps[False] > 1e-3
  assert gaps[True] < 1e-5


@pytest.mark.parametrize('conv_only', [False, True])
def test_causal_block_ignores_future_tokens(conv_only):
  hidden, _, mask = _inputs()
  block = ma.ConvBertBlock(
      HIDDEN, HEADS, 32, kernel_size=3, causal=True, conv_only=conv_only
  )
  base = block([hidden, mask]).numpy()
  for t in range(SEQ - 1):
    perturbed = hidden.copy()
    perturbed[:, t + 1 :] += 2.0
    changed = np.abs(block([perturbed, mask]).numpy() - base).max(-1)
    assert changed[:, : t + 1].max() < 1e-5, f'position <= {t} saw future'
    assert changed[0, t + 1 :].min() > 1e-4


def test_causal_attention_probabilities_are_lower_triangular():
  hidden, _, mask = _inputs()
  layer = ma.MixedAttention(HIDDEN, HEADS, kernel_size=3, causal=True)
  _, probs = layer(hidden, mask, return_attention_scores=True)
  probs = probs.numpy()
  assert (
      probs[:, :, np.triu_indices(SEQ, 1)[0], np.triu_indices(SEQ, 1)[1]].max()
      < 1e-7
  )
  np.testing.assert_allclose(
      probs.sum(-1), np.ones(probs.shape[:-1]), rtol=1e-5
  )


def test_block_accepts_list_or_tensor_and_returns_scores():
  hidden, _, mask = _inputs()
  block = ma.ConvBertBlock(HIDDEN, HEADS, 32, kernel_size=3, num_groups=2)
  out = block(hidden)
  assert out.shape == (BATCH, SEQ, HIDDEN)
  full_mask = np.ones((BATCH, SEQ, SEQ), np.float32)
  np.testing.assert_allclose(
      block([hidden, full_mask]), out, rtol=1e-5, atol=1e-5
  )
  np.testing.assert_allclose(block([hidden]), out, rtol=1e-5, atol=1e-5)
  out_masked, probs = block([hidden, mask], return_attention_scores=True)
  assert probs.shape == (BATCH, HEADS // 2, SEQ, SEQ)
  np.testing.assert_allclose(
      out_masked, block([hidden, mask]), rtol=1e-5, atol=1e-5
  )
  # Post-LN: every output vector is normalised (LayerNorm gamma=1, beta=0).
  np.testing.assert_allclose(out.numpy().mean(-1), 0.0, atol=1e-5)
  np.testing.assert_allclose(out.numpy().std(-1), 1.0, rtol=1e-3)


def _layer_norm(x, eps=1e-12):
  return (x - x.mean(-1, keepdims=True)) / np.sqrt(
      x.var(-1, keepdims=True) + eps
  )


def _grouped(x, kernel, bias):
  groups, group_in, _ = kernel.shape
  pieces = [
      x[..., g * group_in : (g + 1) * group_in] @ kernel[g]
      for g in range(groups)
  ]
  return np.concatenate(pieces, -1) + bias


def test_block_is_post_ln_composition_of_its_parts():
  hidden, _, mask = _inputs()
  block = ma.ConvBertBlock(
      HIDDEN, HEADS, 32, kernel_size=3, num_groups=2, activation='relu'
  )
  block([hidden, mask])
  weights = {w.name.split('/', 1)[1][:-2]: w.numpy() for w in block.weights}
  attention = block.attention_layer(hidden, mask).numpy()
  after_attention = _layer_norm(hidden + attention)
  intermediate = np.maximum(
      _grouped(
          after_attention,
          weights['intermediate/kernel'],
          weights['intermediate/bias'],
      ),
      0.0,
  )
  expected = _layer_norm(
      after_attention
      + _grouped(intermediate, weights['output/kernel'], weights['output/bias'])
  )
  np.testing.assert_allclose(
      block([hidden, mask]), expected, rtol=1e-4, atol=1e-4
  )


def test_grouped_block_parameter_count():
  block = ma.ConvBertBlock(HIDDEN, HEADS, 32, kernel_size=3, num_groups=2)
  block(tf.zeros([1, SEQ, HIDDEN]))
  attention = block.attention_layer.count_params()
  assert attention == _expected_mixed_params(HIDDEN, HEADS, 2, 3)
  grouped_ffn = HIDDEN * 32 // 2 + 32 + 32 * HIDDEN // 2 + HIDDEN
  layer_norms = 2 * 2 * HIDDEN
  assert block.count_params() == attention + grouped_ffn + layer_norms


@pytest.mark.parametrize('conv_only', [False, True])
def test_block_trains_two_sgd_steps(conv_only):
  hidden, _, mask = _inputs()
  target = np.random.default_rng(5).normal(size=hidden.shape).astype(np.float32)
  block = ma.ConvBertBlock(
      HIDDEN,
      HEADS,
      32,
      kernel_size=3,
      num_groups=2,
      conv_only=conv_only,
      dropout_rate=0.1,
      attention_dropout_rate=0.1,
  )
  optimizer = tf_keras.optimizers.SGD(learning_rate=0.05)
  losses = []
  for _ in range(3):
    with tf.GradientTape() as tape:
      output = block([hidden, mask], training=True)
      loss = tf.reduce_mean(tf.square(output - target))
    grads = tape.gradient(loss, block.trainable_variables)
    assert all(g is not None for g in grads)
    optimizer.apply_gradients(zip(grads, block.trainable_variables))
    losses.append(float(loss))
  assert np.all(np.isfinite(losses))
  assert losses[-1] < losses[0], losses


@pytest.mark.parametrize(
    'kwargs,pattern',
    [
        ({'hidden_size': 18}, r'hidden_size=18 .*num_attention_heads=4'),
        (
            {'num_groups': 3, 'intermediate_size': 33},
            r'hidden_size=16 .*num_groups=3',
        ),
        (
            {'num_groups': 2, 'intermediate_size': 33},
            r'intermediate_size=33 .*num_groups=2',
        ),
        ({'kernel_size': 4}, r'odd.*kernel_size=4'),
        ({'head_ratio': 0}, r'head_ratio=0'),
        ({'num_groups': 0}, r'num_groups=0'),
    ],
)
def test_bad_block_configuration_raises(kwargs, pattern):
  args = {
      'hidden_size': HIDDEN,
      'num_attention_heads': HEADS,
      'intermediate_size': 32,
      **kwargs,
  }
  with pytest.raises(ValueError, match=pattern):
    ma.ConvBertBlock(**args)


def test_bad_attention_configuration_raises():
  with pytest.raises(ValueError, match=r'hidden_size=10 .*heads=4'):
    ma.MixedAttention(10, 4)
  with pytest.raises(ValueError, match=r'kernel_size=2'):
    ma.MixedAttention(HIDDEN, HEADS, kernel_size=2)
  layer = ma.MixedAttention(HIDDEN, HEADS, conv_only=True)
  with pytest.raises(ValueError, match='conv_only=True'):
    layer(tf.zeros([1, 3, HIDDEN]), return_attention_scores=True)
  block = ma.ConvBertBlock(HIDDEN, HEADS, 32)
  with pytest.raises(ValueError, match='got 3 inputs'):
    block([tf.zeros([1, 3, HIDDEN])] * 3)


@pytest.mark.parametrize(
    'layer_fn',
    [
        lambda: ma.MixedAttention(
            HIDDEN,
            HEADS,
            head_ratio=4,
            kernel_size=5,
            causal=True,
            conv_mask_values=True,
            attention_dropout=0.2,
            name='mixed',
        ),
        lambda: ma.MixedAttention(HIDDEN, HEADS, conv_only=True),
        lambda: ma.ConvBertBlock(
            HIDDEN,
            HEADS,
            32,
            head_ratio=1,
            kernel_size=5,
            num_groups=4,
            causal=True,
            activation='relu',
            dropout_rate=0.1,
            attention_dropout_rate=0.2,
            name='block',
        ),
    ],
)
def test_get_config_round_trip(layer_fn):
  layer = layer_fn()
  hidden, _, mask = _inputs()
  call = (
      (lambda layer: layer(hidden, mask))
      if isinstance(layer, ma.MixedAttention)
      else (lambda layer: layer([hidden, mask]))
  )
  expected = call(layer)
  config = layer.get_config()
  restored = type(layer).from_config(config)
  assert restored.get_config() == config
  call(restored)
  restored.set_weights(layer.get_weights())
  np.testing.assert_allclose(call(restored), expected, rtol=1e-5, atol=1e-5)
  revived = tf_keras.layers.deserialize(tf_keras.layers.serialize(layer))
  assert type(revived) is type(layer)
  assert revived.get_config() == config
