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
"""

import dataclasses
from typing import Any, Dict

from official.modeling import tf_utils
from official_repro.modeling import activations
from official_repro.modeling.layers import mixed_attention
from official_repro.modeling.networks import encoders


@dataclasses.dataclass
class ConvBertOptions:
  """ConvBERT's own settings (gin: `convbert.<field>`).

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


def _validate(
    config: encoders.EncoderConfig, options: ConvBertOptions, name: str
) -> None:
  scope = config.backbone
  for field in ('head_ratio', 'kernel_size', 'num_groups'):
    value = getattr(options, field)
    if not isinstance(value, int) or value <= 0:
      raise ValueError(
          f'{scope}.{field} must be a positive int, got ' f'{value!r}.'
      )
  if options.kernel_size % 2 == 0:
    raise ValueError(f'{scope}.kernel_size={options.kernel_size} must be odd.')
  for field in ('hidden_size', 'intermediate_size'):
    if getattr(config, field) % options.num_groups:
      raise ValueError(
          f'{name}.{field}={getattr(config, field)} is not divisible by '
          f'{scope}.num_groups={options.num_groups}.'
      )
  if options.conv_only and options.attention_only:
    raise ValueError(
        f'{scope}.conv_only and {scope}.attention_only exclude '
        'each other; set at most one to True.'
    )


def _build_block(
    config: encoders.EncoderConfig,
    options: ConvBertOptions,
    index: int,
    return_attention_scores: bool,
) -> mixed_attention.ConvBertBlock:
  if return_attention_scores and options.conv_only:
    raise ValueError(
        'return_attention_scores needs self-attention heads, but '
        'convbert.conv_only=True (convolution heads only).'
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


def _flops_shape(
    config: encoders.EncoderConfig, options: ConvBertOptions
) -> Dict[str, Any]:
  return dict(
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
        flops_shape=_flops_shape,
    )
)
