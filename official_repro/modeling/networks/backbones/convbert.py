"""ConvBERT backbone (Jiang et al. 2020; paper 002 is its rebuttal).

Every block is a `ConvBertBlock`, post-LN:
    x1 = LayerNorm(x + Dropout(MixedAttention(x, mask)))
    x2 = LayerNorm(x1 + Dropout(GL(act(GL(x1)))))
where mixed attention keeps N' = max(1, N // head_ratio) self-attention
heads of size H / N ("bottleneck", BNK; the ConvBERT reference's rule) and
adds N' span-based dynamic convolution heads (kernel k) sharing their query,
and GL is the grouped linear layer with G groups (a plain dense at G = 1).
Embeddings and pooler are `TransformerEncoder`'s (Model Garden `BertEncoder`'s).

How it differs from a BERT encoder besides the block:
  * the self-attention branch is N'H wide, so attention scores are
    `[B, N', T, T]`;
  * the convolution branch ignores the padding mask, as the reference does:
    the content of padding positions reaches real tokens up to k // 2
    positions away in each block (`attention_only` has no such leak);
  * the feed-forward activation is the exact (erf) GELU of the reference;
  * the pooler is not part of the reference ConvBERT (its classifier reads
    the [CLS] state directly); it is kept for Model Garden's fine-tuning
    models and receives no gradient during ELECTRA pretraining.

Initialisation follows the TF1 original (yitu-opensource/ConvBert): embedding
tables and dense kernels truncated normal with stddev `initializer_range`,
the depthwise convolution kernel truncated normal with stddev 1/k, biases
zero. The ablations of 002 are options: `conv_only` (convolution heads only)
and `attention_only` (the bottleneck self-attention alone, the "+BNK,+GL"
rows of 002 Table 4).

**FLOPs** (`ConvBertFlops`). ConvBERT's block terms live here, with the
backbone, rather than in `metrics/flops.py`: backbones own their FLOPs terms,
so the formula's module keeps only ELECTRA's BERT block, the basis every
backbone shares, and a new block shape is one backbone module. ELECTRA's
formula has no convolution; this is our extension in its conventions (2mn per
matmul, the per-element constants of `metrics.flops`, biases and residuals 1
per element, the attention LayerNorm charged 5 as ELECTRA does). Per token,
with hidden h, N configured heads of size H = h / N, N' = max(1, N //
head_ratio) (the ConvBERT reference's rule; N need not be divisible by
head_ratio), attention width A = N'H, sequence s, window k, FFN width i and G
feed-forward groups; the mixed layer has N' attention and N' convolution heads
(conv width C = A), `conv_only` 2N' convolution heads (C = 2N'H, A = 0),
`attention_only` none (C = 0); Q is the query width (C when `conv_only`, else
A):

    query                     2hQ + Q              (bias)
    key, value                4hA + 2A             (bias)
    attention scores          2As
    softmax, dropout, scale   (5 + 4 + 1) s N'
    attention context         2As
    depthwise conv            2kh                  (k taps per channel)
    pointwise conv            2hC + C              (bias)
    Ks * Q                    C
    kernel generator          2C(C/H)k + (C/H)k    (C/H conv heads, bias)
    kernel softmax            5 (C/H) k
    conv value projection     2hC + C              (bias)
    k-tap weighted sum        2kC
    output dense              2(A + C)h + h        (bias; input concat(A, C))
    dropout, residual, LN     4h + h + 5
    feed-forward              2hi/G + 8i + i + 2hi/G + h + 4h + h + 5h

Without the convolution terms (C = 0) and at head_ratio 1 (A = Q = h) this
is exactly ELECTRA's BERT block (`metrics.flops.BlockFlops`). The depthwise
convolution has no bias (Keras `SeparableConv1D` adds one after the
pointwise map). In the terms the output dense is split into
`attention_output` (2Ah) and `conv_output` (2Ch), the columns each branch
feeds. The compiled block also has the banded contraction that computes the
k-tap sum (`compiled_extra_flops`), an element-wise term in the formula.
"""

import dataclasses
from typing import Dict, Tuple

from official.modeling import tf_utils
from official_repro.metrics import flops
from official_repro.modeling import activations
from official_repro.modeling.layers import mixed_attention
from official_repro.modeling.layers import span_dynamic_conv
from official_repro.modeling.networks import encoders


@dataclasses.dataclass
class ConvBertOptions:
  """ConvBERT's own settings (`EncoderConfig.options` of a ConvBERT encoder).

  Attributes:
    head_ratio: the bottleneck ratio (>= 1); the self-attention branch keeps
      N' = max(1, num_attention_heads // head_ratio) heads of size
      hidden_size / num_attention_heads (the reference's rule, so the head
      count need not be divisible by it, and a 1-head generator keeps one).
    kernel_size: the span-based dynamic convolution window k (odd).
    num_groups: groups G of the grouped feed-forward matrices; divides
      hidden_size and intermediate_size.
    conv_only: convolution heads only (002's convolution-only ablation).
    attention_only: the bottleneck self-attention without convolution heads.
  """

  head_ratio: int = 2
  kernel_size: int = 9
  num_groups: int = 1
  conv_only: bool = False
  attention_only: bool = False


def _validate(config: encoders.EncoderConfig, options: ConvBertOptions) -> None:
  for field in ('head_ratio', 'kernel_size', 'num_groups'):
    value = getattr(options, field)
    if not isinstance(value, int) or value <= 0:
      raise encoders.config_error(
          lambda name: f'{name("options." + field)} must be a positive int, '
          f'got {value!r}.'
      )
  if options.kernel_size % 2 == 0:
    raise encoders.config_error(
        lambda name: f'{name("options.kernel_size")}={options.kernel_size} '
        'must be odd.'
    )
  for field in ('hidden_size', 'intermediate_size'):
    if getattr(config, field) % options.num_groups:
      raise encoders.config_error(
          lambda name: f'{name(field)}={getattr(config, field)} is not '
          f'divisible by {name("options.num_groups")}={options.num_groups}.'
      )
  if options.conv_only and options.attention_only:
    raise encoders.config_error(
        lambda name: f'{name("options.conv_only")} and '
        f'{name("options.attention_only")} exclude each other; set at most '
        'one to True.'
    )


def _build_block(
    config: encoders.EncoderConfig,
    options: ConvBertOptions,
    index: int,
    return_attention_scores: bool,
) -> mixed_attention.ConvBertBlock:
  if return_attention_scores and options.conv_only:
    raise ValueError(
        'return_attention_scores needs self-attention heads, but the ConvBERT '
        'options have conv_only=True (convolution heads only).'
    )
  return mixed_attention.ConvBertBlock(
      hidden_size=config.hidden_size,
      num_attention_heads=config.num_attention_heads,
      intermediate_size=config.intermediate_size,
      head_ratio=options.head_ratio,
      kernel_size=options.kernel_size,
      num_groups=options.num_groups,
      conv_only=options.conv_only,
      attention_only=options.attention_only,
      activation=activations.get(config.hidden_activation),
      dropout_rate=config.dropout_rate,
      attention_dropout_rate=config.attention_dropout_rate,
      kernel_initializer=tf_utils.clone_initializer(config.initializer()),
      return_attention_scores=return_attention_scores,
      name=f'transformer/layer_{index}',
  )


@dataclasses.dataclass(frozen=True)
class ConvBertFlops(flops.BlockFlops):
  """The FLOPs terms of a ConvBERT block (module docstring).

  Attributes:
    head_ratio: the bottleneck ratio, N' = max(1, heads // head_ratio)
      self-attention heads.
    kernel_size: the convolution window k.
    groups: the feed-forward groups G.
    conv_only: convolution heads only.
    attention_only: the bottleneck attention without convolution heads.
  """

  head_ratio: int = 2
  kernel_size: int = 9
  groups: int = 1
  conv_only: bool = False
  attention_only: bool = False

  matmul_terms = flops.MATMUL_TERMS | frozenset(
      (
          'conv_depthwise',
          'conv_pointwise',
          'conv_kernel_generator',
          'conv_value',
          'conv_output',
      )
  )

  def validate(self, net: flops.NetworkShape) -> None:
    if self.head_ratio < 1:
      raise ValueError(
          f'NetworkShape: head_ratio={self.head_ratio} must be >= 1.'
      )
    if self.kernel_size < 1 or self.kernel_size % 2 == 0:
      raise ValueError(
          f'NetworkShape: kernel_size={self.kernel_size} must be '
          'an odd integer >= 1.'
      )
    if (
        self.groups < 1
        or net.hidden % self.groups
        or net.intermediate % self.groups
    ):
      raise ValueError(
          f'NetworkShape: groups={self.groups} must be >= 1 and divide '
          f'hidden={net.hidden} and intermediate={net.intermediate}.'
      )
    if self.conv_only and self.attention_only:
      raise ValueError(
          'NetworkShape: conv_only and attention_only exclude each other.'
      )

  def heads(self, net: flops.NetworkShape) -> Tuple[int, int]:
    """N' attention and N' convolution heads (module docstring).

    `conv_only`: 2N' convolution heads; `attention_only`: none.
    """
    attention_heads = max(1, net.heads // self.head_ratio)
    if self.conv_only:
      return 0, 2 * attention_heads
    if self.attention_only:
      return attention_heads, 0
    return attention_heads, attention_heads

  def terms(self, net: flops.NetworkShape) -> Dict[str, float]:
    h, k = net.hidden, self.kernel_size
    head_size = h // net.heads
    attention_heads, conv_heads = self.heads(net)
    c = conv_heads * head_size
    terms = flops.query_terms(
        h, c if self.conv_only else attention_heads * head_size
    )
    if attention_heads:
      terms.update(
          flops.self_attention_terms(
              h, attention_heads, head_size, net.seq_length
          )
      )
    if conv_heads:
      terms.update(
          conv_depthwise=2 * k * h,
          conv_pointwise=2 * h * c,
          conv_pointwise_bias=c,
          conv_span_query_product=c,
          conv_kernel_generator=2 * c * conv_heads * k,
          conv_kernel_generator_bias=conv_heads * k,
          conv_kernel_softmax=flops.SOFTMAX_FLOPS * conv_heads * k,
          conv_value=2 * h * c,
          conv_value_bias=c,
          conv_weighted_sum=2 * k * c,
          conv_output=2 * c * h,
      )
    terms.update(flops.block_tail_terms(h, net.intermediate, self.groups))
    return terms

  def compiled_extra_flops(self, net: flops.NetworkShape) -> float:
    """The convolution heads' banded k-tap contraction, per sequence.

    See `span_dynamic_conv.window_contraction_flops`.
    """
    _, conv_heads = self.heads(net)
    if not conv_heads:
      return 0.0
    return float(
        span_dynamic_conv.window_contraction_flops(
            net.seq_length,
            conv_heads,
            net.hidden // net.heads,
            self.kernel_size,
        )
    )

  def describe(self) -> str:
    variant = (
        'conv_only '
        if self.conv_only
        else 'attention_only '
        if self.attention_only
        else ''
    )
    return (
        f'{variant}head_ratio={self.head_ratio} k={self.kernel_size} '
        f'G={self.groups}'
    )


def _flops_block(
    config: encoders.EncoderConfig, options: ConvBertOptions
) -> ConvBertFlops:
  del config  # The sizes are NetworkShape's.
  return ConvBertFlops(
      head_ratio=options.head_ratio,
      kernel_size=options.kernel_size,
      groups=options.num_groups,
      conv_only=options.conv_only,
      attention_only=options.attention_only,
  )


BACKBONE = encoders.register_backbone(
    encoders.Backbone(
        name='convbert',
        build_block=_build_block,
        options_cls=ConvBertOptions,
        default_activation='gelu_erf',
        validate_options=_validate,
        flops_block=_flops_block,
    )
)
