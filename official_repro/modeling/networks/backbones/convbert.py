"""ConvBERT backbone (Jiang et al. 2020; paper 002 is its rebuttal).

Every block is a post-LN `ConvBertBlock` (mixed attention with N' =
max(1, N // head_ratio) heads, the reference's rule, plus span-based dynamic
convolution heads; grouped feed-forward). Unlike BERT: attention scores are
`[B, N', T, T]`; the convolution ignores the padding mask, as the reference
does; the activation is the exact GELU; the pooler is not the reference's
(kept for Model Garden's fine-tuning models). Initialisation follows the TF1
original. Ablations of 002: `conv_only` and `attention_only` (Table 4
"+BNK,+GL").

`ConvBertFlops` lives here because backbones own their FLOPs terms
(`metrics/flops.py` keeps ELECTRA's BERT block). It extends ELECTRA's
formula in its conventions (2mn per matmul, its per-element constants) and
equals `BlockFlops` without convolution heads at head_ratio 1;
`compiled_extra_flops` adds the banded contraction XLA counts.
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

  `head_ratio` >= 1 (N' = max(1, N // head_ratio) attention heads of size
  H / N), odd `kernel_size` k, `num_groups` G of the feed-forward (dividing
  the widths), `conv_only` and `attention_only` (002's ablations).
  """

  head_ratio: int = 2
  kernel_size: int = 9
  num_groups: int = 1
  conv_only: bool = False
  attention_only: bool = False


def _validate(config: encoders.EncoderConfig, options: ConvBertOptions) -> None:
  encoders.check_positive_ints(
      options, ('head_ratio', 'kernel_size', 'num_groups'), 'options.'
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
  """The FLOPs terms of a ConvBERT block (options as `ConvBertOptions`)."""

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
    """(attention, convolution) heads: N' and N', 0 and 2N', or N' and 0."""
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
    """The banded k-tap contraction per sequence (see `span_dynamic_conv`)."""
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
