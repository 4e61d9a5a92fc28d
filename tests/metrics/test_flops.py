"""Tests of the FLOPs formulas.

ELECTRA's FLOPs formula reproduces its published values; budgets; the
ConvBERT block terms against hand counts, ELECTRA's block and XLA.
"""

import pytest
import tensorflow as tf

from official.nlp.modeling import layers as nlp_layers
from official_repro.metrics import flops
from official_repro.modeling.layers import grouped_dense
from official_repro.modeling.layers import mixed_attention
from official_repro.modeling.networks.backbones import convbert as convbert_lib

V = 30522


def _net(hidden, layers, embedding, seq_length):
  return flops.NetworkShape(
      hidden=hidden,
      layers=layers,
      embedding=embedding,
      intermediate=4 * hidden,
      heads=max(1, hidden // 64),
      seq_length=seq_length,
      vocab_size=V,
  )


def _network_flops(net, head):
  """Forward FLOPs per token of embeddings + blocks + an 'mlm' or 'rtd' head."""
  if head == 'mlm':
    head_flops = flops.mlm_head_flops(net)
  else:
    head_flops = flops.rtd_head_flops(net)
  return flops.NetworkCost(net, '', {head: head_flops}).per_token_forward()


def _electra(hidden, generator_hidden, embedding, seq_length):
  return _network_flops(
      _net(hidden, 12, embedding, seq_length), 'rtd'
  ) + _network_flops(_net(generator_hidden, 12, embedding, seq_length), 'mlm')


def _bert(hidden, embedding, seq_length):
  return _network_flops(_net(hidden, 12, embedding, seq_length), 'mlm')


# ELECTRA's flops_computation.py outputs (as quoted in its README/paper).
@pytest.mark.parametrize(
    'per_token, batch, steps, seq, published',
    [
        (lambda: _electra(256, 64, 128, 128), 128, 1e6, 128, 1.294e18),
        (lambda: _bert(256, 128, 128), 128, 1.45e6, 128, 1.419e18),
        (lambda: _bert(768, 768, 512), 256, 1e6, 512, 6.428e19),
        (lambda: _electra(768, 256, 768, 512), 256, 766e3, 512, 6.425e19),
    ],
)
def test_reproduces_published_values(per_token, batch, steps, seq, published):
  value = flops.train_flops(per_token(), batch, steps, seq)
  assert abs(value - published) / published < 0.005


def test_steps_for_budget_inverts_train_flops():
  per_token = _bert(256, 128, 128)
  budget = flops.train_flops(per_token, 1024, 163000, 128)
  assert flops.steps_for_budget(budget, per_token, 1024, 128) == (
      pytest.approx(163000)
  )


def test_albert_shared_block_costs_compute_like_bert():
  bert = _net(256, 12, 128, 128)
  assert _network_flops(bert, 'rtd') > 12 * flops.block_flops(bert)


# ConvBERT blocks (paper 002): our extension of the formula, declared by the
# ConvBERT backbone (`convbert.ConvBertFlops`).


def _block(hidden=256, heads=4, intermediate=1024, seq_length=128, **convbert):
  """A one-block shape: ELECTRA's BERT block, or ConvBERT's given settings."""
  return flops.NetworkShape(
      hidden=hidden,
      layers=1,
      embedding=hidden,
      intermediate=intermediate,
      heads=heads,
      seq_length=seq_length,
      vocab_size=V,
      block=(
          convbert_lib.ConvBertFlops(**convbert)
          if convbert
          else flops.BlockFlops()
      ),
  )


def _electra_bert_block(h, i, s, n):
  """ELECTRA's block as its flops_computation.py writes it (per token)."""
  attention = (
      6 * h * h
      + 3 * h
      + 2 * h * s
      + 10 * s * n
      + 2 * h * s
      + (2 * h * h + 6 * h + 5)
  )
  feed_forward = 2 * h * i + 8 * i + i + 2 * h * i + 6 * h + 5 * h
  return attention + feed_forward


@pytest.mark.parametrize(
    'h, n, i, s', [(256, 4, 1024, 128), (768, 12, 3072, 512), (8, 2, 16, 6)]
)
def test_convbert_without_convolution_at_ratio_one_is_electra_block(h, n, i, s):
  convbert = flops.block_terms(_block(h, n, i, s, head_ratio=1, groups=1))
  without_conv = sum(
      value for name, value in convbert.items() if not name.startswith('conv_')
  )
  assert without_conv == _electra_bert_block(h, i, s, n)
  assert flops.block_flops(_block(h, n, i, s)) == _electra_bert_block(
      h, i, s, n
  )
  # The convolution adds exactly its own terms.
  assert flops.block_flops(_block(h, n, i, s, head_ratio=1)) == sum(
      convbert.values()
  )


# Hand counts at hidden 8, 2 heads of 4 (N' = 1 at ratio 2), s = 6, k = 3,
# FFN 16 in 2 groups.
_SHARED_HAND_COUNT = dict(
    attention_output_bias=8,
    attention_output_dropout=4 * 8,
    attention_residual=8,
    attention_layer_norm=5,
    ffn_intermediate=2 * 8 * 16 // 2,
    ffn_activation=8 * 16,
    ffn_intermediate_bias=16,
    ffn_output=2 * 16 * 8 // 2,
    ffn_output_bias=8,
    ffn_dropout=4 * 8,
    ffn_residual=8,
    ffn_layer_norm=5 * 8,
)
_CONV_HAND_COUNT = dict(  # width C = 4, one conv head
    conv_depthwise=2 * 3 * 8,
    conv_pointwise=2 * 8 * 4,
    conv_pointwise_bias=4,
    conv_span_query_product=4,
    conv_kernel_generator=2 * 4 * 3,
    conv_kernel_generator_bias=3,
    conv_kernel_softmax=5 * 3,
    conv_value=2 * 8 * 4,
    conv_value_bias=4,
    conv_weighted_sum=3 * 2 * 4,
    conv_output=2 * 4 * 8,
)
_ATTENTION_HAND_COUNT = dict(  # width A = 4, one attention head
    query=2 * 8 * 4,
    query_bias=4,
    key_value=2 * 2 * 8 * 4,
    key_value_bias=8,
    attention_scores=2 * 6 * 4,
    attention_softmax=5 * 6,
    attention_dropout=4 * 6,
    attention_scaling=6,
    attention_context=2 * 6 * 4,
    attention_output=2 * 4 * 8,
)
_CONV_ONLY_HAND_COUNT = dict(  # width C = 8, two conv heads
    query=2 * 8 * 8,
    query_bias=8,
    conv_depthwise=2 * 3 * 8,
    conv_pointwise=2 * 8 * 8,
    conv_pointwise_bias=8,
    conv_span_query_product=8,
    conv_kernel_generator=2 * 8 * 2 * 3,
    conv_kernel_generator_bias=2 * 3,
    conv_kernel_softmax=5 * 2 * 3,
    conv_value=2 * 8 * 8,
    conv_value_bias=8,
    conv_weighted_sum=3 * 2 * 8,
    conv_output=2 * 8 * 8,
)


@pytest.mark.parametrize(
    'variant, expected',
    [
        (
            {},
            {**_ATTENTION_HAND_COUNT, **_CONV_HAND_COUNT, **_SHARED_HAND_COUNT},
        ),
        ({'conv_only': True}, {**_CONV_ONLY_HAND_COUNT, **_SHARED_HAND_COUNT}),
        (
            {'attention_only': True},
            {**_ATTENTION_HAND_COUNT, **_SHARED_HAND_COUNT},
        ),
    ],
)
def test_convbert_terms_match_hand_count(variant, expected):
  net = _block(8, 2, 16, 6, head_ratio=2, kernel_size=3, groups=2, **variant)
  assert flops.block_terms(net) == expected
  assert flops.matmul_flops(net) == sum(
      value
      for name, value in expected.items()
      if name in convbert_lib.ConvBertFlops.matmul_terms
  )


def test_convbert_base_is_cheaper_than_bert_base():
  for seq_length in (128, 512):
    bert = flops.block_flops(_block(768, 12, 3072, seq_length))
    convbert = flops.block_flops(
        _block(768, 12, 3072, seq_length, head_ratio=2)
    )
    assert convbert < bert


@pytest.mark.parametrize(
    'fields, message',
    [
        (dict(head_ratio=0), 'head_ratio=0 must be >= 1'),
        (dict(head_ratio=2, kernel_size=4), 'kernel_size=4 must be an odd'),
        (dict(head_ratio=2, groups=3), 'groups=3 must be >= 1 and divide'),
        (dict(head_ratio=2, conv_only=True, attention_only=True), 'exclude'),
    ],
)
def test_network_shape_rejects_bad_convbert_fields(fields, message):
  with pytest.raises(ValueError, match=message):
    _block(**fields)


def _xla_block_flops(layer, batch, seq_length, hidden):
  inputs = tf.random.normal([batch, seq_length, hidden])
  mask = tf.ones([batch, seq_length, seq_length])
  return flops.xla_matmul_flops(
      lambda x, m: layer([x, m], training=False), inputs, mask
  )


# Every matmul term is one dot or convolution of the compiled block, so XLA's
# count must equal the formula's matmul terms exactly, plus the banded
# contraction of the convolution heads' k-tap sum (tolerance: float rounding
# only). That contraction is written out here: T = 12 fits one block of 32
# positions reaching 32 + k - 1 = 36 values, per convolution head of size H.
# The second shape has N = 3 heads of 16 at ratio 2, which the reference's
# rule turns into N' = max(1, 3 // 2) = 1 attention head.
@pytest.mark.parametrize('hidden, heads', [(32, 4), (48, 3)])
@pytest.mark.parametrize(
    'variant',
    [
        dict(num_groups=1),
        dict(num_groups=2),
        dict(conv_only=True),
        dict(attention_only=True),
    ],
)
def test_xla_count_of_convbert_block_equals_formula_matmuls(
    variant, hidden, heads
):
  intermediate, batch, seq_length = 64, 2, 12
  layer = mixed_attention.ConvBertBlock(
      hidden_size=hidden,
      num_attention_heads=heads,
      intermediate_size=intermediate,
      head_ratio=2,
      kernel_size=5,
      **variant,
  )
  net = _block(
      hidden,
      heads,
      intermediate,
      seq_length,
      head_ratio=2,
      kernel_size=5,
      groups=variant.get('num_groups', 1),
      conv_only=variant.get('conv_only', False),
      attention_only=variant.get('attention_only', False),
  )
  counted = _xla_block_flops(layer, batch, seq_length, hidden)
  head_size = hidden // heads
  conv_heads = {(32, 4): 2, (48, 3): 1}[hidden, heads]
  if variant.get('conv_only'):
    conv_heads *= 2
  if variant.get('attention_only'):
    conv_heads = 0
  window_contraction = 2 * 32 * 36 * conv_heads * head_size
  assert counted == pytest.approx(
      batch * (seq_length * flops.matmul_flops(net) + window_contraction),
      rel=1e-12,
  )
  assert flops.compiled_matmul_flops(net) == (
      seq_length * flops.matmul_flops(net) + window_contraction
  )


def test_xla_count_of_model_garden_block_equals_bert_matmuls():
  hidden, heads, intermediate, batch, seq_length = 32, 4, 64, 2, 12
  layer = nlp_layers.TransformerEncoderBlock(
      num_attention_heads=heads, inner_dim=intermediate, inner_activation='gelu'
  )
  counted = _xla_block_flops(layer, batch, seq_length, hidden)
  net = _block(hidden, heads, intermediate, seq_length)
  assert counted == pytest.approx(
      batch * seq_length * flops.matmul_flops(net), rel=1e-12
  )
  assert flops.compiled_matmul_flops(net) == (
      seq_length * flops.matmul_flops(net)
  )


def test_hlo_count_rejects_instructions_without_operand_shapes():
  line = '%dot.1 = f32[2,3]{1,0} dot(%a, %b), lhs_contracting_dims={1}'
  with pytest.raises(ValueError, match='Cannot read the operand shapes'):
    flops.hlo_matmul_flops(line)


def test_profiler_counts_grouped_feed_forward():
  # `--profile` must see GroupedDense's einsum (2 FLOPs per multiply-add of
  # the block-diagonal product, plus the bias).
  class _Model(tf.keras.Model):

    def __init__(self):
      super().__init__()
      self.dense = grouped_dense.GroupedDense(128, groups=2)

    def call(self, inputs):
      return self.dense(inputs['x'])

  profiled = flops.profiled_forward_flops(
      _Model(), {'x': tf.TensorSpec([2, 16, 64])}
  )
  assert profiled == 2 * (2 * 16) * 64 * 128 // 2 + 2 * 16 * 128
