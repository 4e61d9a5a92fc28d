"""Compute accounting: the FLOPs formulas and independent counts.

The command that reports a pretraining config's parameters and FLOPs is
`official_repro.count_flops`; the objectives declare their networks' terms
(`NetworkCost`) with the functions here. Two independent counts:

1. **ELECTRA's published formula** (google-research/electra
   `flops_computation.py`), implemented term by term below: a matmul costs
   2mn, embeddings are one-hot matmuls, the backward pass costs as much as the
   forward one, and dropout/LayerNorm/GELU/softmax cost 4/5/8/5 FLOPs per
   element. Train FLOPs = 2 * batch * steps * seq * (per-token forward FLOPs of
   every network). It reproduces ELECTRA's own numbers: ELECTRA-small
   1.294e18, BERT-small 1.419e18, BERT-base 6.428e19, ELECTRA-base 6.425e19
   (`tests/metrics/test_flops.py`).
2. **The TF profiler's count** of the model's frozen forward graph
   (`--profile`), scaled by the same 2 * batch * steps convention, and the
   ratio of the two.
   The profiler counts an embedding gather as free where the formula charges a
   one-hot matmul (2 * E * V per token, which dominates small models), so the
   tool also prints the formula without those terms.

How sharing is counted: ALBERT's one shared block is applied `num_layers`
times and costs `num_layers` blocks of compute (it saves parameters, not
FLOPs); tied generator/discriminator embeddings are one parameter set but each
network computes its own embedding. The next-sentence head, if any, is not in
the formula (as in ELECTRA's).

**Per-backbone blocks.** The block terms belong to the backbones, so that a
backbone with a new block is still one module that does not edit this one: a
`NetworkShape` holds the sizes every transformer network has and a
`BlockFlops`, which its backbone provides (`Backbone.flops_block`).
`BlockFlops` itself is ELECTRA's BERT block, per token, with hidden h, N heads,
sequence s and FFN width i:

    query, key, value         6h^2 + 3h            (bias)
    attention scores          2hs
    softmax, dropout, scale   (5 + 4 + 1) s N
    attention context         2hs
    output dense              2h^2 + h             (bias)
    dropout, residual, LN     4h + h + 5           (ELECTRA charges this LN 5)
    feed-forward              2hi + 8i + i + 2hi + h + 4h + h + 5h

A block of another shape subclasses it next to its backbone (ConvBERT's in
`modeling/networks/backbones/convbert.py`), built from the sublayer terms
here (`query_terms`, `self_attention_terms`, `block_tail_terms`).

**XLA's count** (`xla_matmul_flops`): the dot and convolution instructions
of the HLO module XLA compiles a function to, 2 FLOPs per multiply-add. It
checks the formula's matmul terms (`matmul_flops`) independently of how the
Python code is written, plus the dots a block compiles to beyond them
(`BlockFlops.compiled_extra_flops`, e.g. ConvBERT's banded contraction that
computes the k-tap sum; `compiled_matmul_flops`); the ConvBERT tests and
`experiments/convbert_speed.py` use it. The TF profiler (`--profile`) counts
a graph's float operations instead, element-wise ones included, and only
einsum equations without an ellipsis (Model Garden's Einsum statistics);
`GroupedDense` writes its einsum without one so that the profiler counts it.
"""

import dataclasses
import math
import re
from typing import Any, Callable, ClassVar, Dict, FrozenSet, List, Tuple

import tensorflow as tf

# Registers Model Garden's Einsum statistics (see profiled_forward_flops).
from official.core import train_utils  # noqa: F401
from official_repro.modeling import activations
from tensorflow.python.framework import convert_to_constants  # pylint: disable=g-direct-tensorflow-import

# ELECTRA's per-element costs of the non-matmul operations.
DROPOUT_FLOPS = 4
LAYER_NORM_FLOPS = 5
ACTIVATION_FLOPS = 8
SOFTMAX_FLOPS = 5

# ELECTRA's default fraction of tokens the MLM output layer runs on (20/128).
ELECTRA_OUTPUT_FRACTION = 0.15625


# The terms of ELECTRA's block that are matrix products (dense layers,
# attention einsums): what XLA's dot/convolution count measures.
MATMUL_TERMS = frozenset(
    (
        'query',
        'key_value',
        'attention_scores',
        'attention_context',
        'attention_output',
        'ffn_intermediate',
        'ffn_output',
    )
)


def query_terms(hidden: int, width: int) -> Dict[str, float]:
  """The query projection of `width` columns and its bias, per token."""
  return dict(query=2 * hidden * width, query_bias=width)


def self_attention_terms(
    hidden: int, heads: int, head_size: int, seq_length: int
) -> Dict[str, float]:
  """Self-attention of `heads` heads of `head_size` but its query, per token.

  The key and value projections, scores, softmax, dropout, scaling, context
  and the output dense from the heads' width A back to `hidden` (its bias is
  in `block_tail_terms`).
  """
  h, s, a = hidden, seq_length, heads * head_size
  return dict(
      key_value=2 * 2 * h * a,
      key_value_bias=2 * a,
      attention_scores=2 * a * s,
      attention_softmax=SOFTMAX_FLOPS * s * heads,
      attention_dropout=DROPOUT_FLOPS * s * heads,
      attention_scaling=s * heads,
      attention_context=2 * a * s,
      attention_output=2 * a * h,
  )


def block_tail_terms(
    hidden: int, intermediate: int, groups: int = 1
) -> Dict[str, float]:
  """The block after its attention output dense, per token.

  The output dense's bias, dropout, residual and LayerNorm, then the
  feed-forward sublayer (its two matrices in `groups` groups).
  """
  h, i = hidden, intermediate
  return dict(
      attention_output_bias=h,
      attention_output_dropout=DROPOUT_FLOPS * h,
      attention_residual=h,
      # ELECTRA charges this LayerNorm 5 in all, not 5 per element.
      attention_layer_norm=LAYER_NORM_FLOPS,
      ffn_intermediate=2 * h * i // groups,
      ffn_activation=ACTIVATION_FLOPS * i,
      ffn_intermediate_bias=i,
      ffn_output=2 * h * i // groups,
      ffn_output_bias=h,
      ffn_dropout=DROPOUT_FLOPS * h,
      ffn_residual=h,
      ffn_layer_norm=LAYER_NORM_FLOPS * h,
  )


@dataclasses.dataclass(frozen=True)
class BlockFlops:
  """ELECTRA's BERT block; a backbone with another block subclasses it.

  Attributes:
    matmul_terms: the names of `terms` that are matrix products.
  """

  matmul_terms: ClassVar[FrozenSet[str]] = MATMUL_TERMS

  def validate(self, net: 'NetworkShape') -> None:
    """Raises `ValueError` when the block does not fit `net`'s sizes."""
    del net  # ELECTRA's block fits every shape NetworkShape accepts.

  def heads(self, net: 'NetworkShape') -> Tuple[int, int]:
    """(attention heads, convolution heads) of one block."""
    return net.heads, 0

  def terms(self, net: 'NetworkShape') -> Dict[str, float]:
    """Forward FLOPs per token of one block, term by term."""
    h = net.hidden
    return {
        **query_terms(h, h),
        **self_attention_terms(h, net.heads, h // net.heads, net.seq_length),
        **block_tail_terms(h, net.intermediate),
    }

  def compiled_extra_flops(self, net: 'NetworkShape') -> float:
    """Compiled dot FLOPs per sequence that `terms` has no matmul term for."""
    del net  # Every dot of ELECTRA's block is a matmul term.
    return 0.0

  def describe(self) -> str:
    """The block's settings for reports ('' for ELECTRA's block)."""
    return ''


@dataclasses.dataclass(frozen=True)
class NetworkShape:
  """The sizes the formula needs for one transformer network.

  Attributes:
    hidden: H.
    layers: L (applications of a block; ALBERT's shared block counts L times).
    embedding: E.
    intermediate: feed-forward width.
    heads: configured attention heads N (they set the head size hidden / N).
    seq_length: tokens per sequence.
    vocab_size: V.
    block: the block's terms, from the network's backbone
      (`Backbone.flops_block`); ELECTRA's BERT block by default.
  """

  hidden: int
  layers: int
  embedding: int
  intermediate: int
  heads: int
  seq_length: int
  vocab_size: int
  block: BlockFlops = BlockFlops()

  def __post_init__(self):
    if self.hidden % self.heads:
      raise ValueError(
          f'NetworkShape: hidden={self.hidden} must be divisible '
          f'by heads={self.heads}.'
      )
    self.block.validate(self)


def block_heads(net: NetworkShape) -> Tuple[int, int]:
  """(attention heads, convolution heads) of one block of `net`."""
  return net.block.heads(net)


def block_terms(net: NetworkShape) -> Dict[str, float]:
  """Forward FLOPs per token of one block, term by term (`net.block`).

  Args:
    net: the network's sizes.

  Returns:
    Term name -> FLOPs; terms that a block does not have are absent.
  """
  return net.block.terms(net)


def compiled_matmul_flops(net: NetworkShape) -> float:
  """FLOPs of the dots one block compiles to, for one sequence.

  FLOPs of the dots one block compiles to, for one sequence of
  `net.seq_length` tokens: the formula's matmul terms, plus the dots the
  block has no matmul term for (`BlockFlops.compiled_extra_flops`, e.g.
  ConvBERT's banded k-tap contraction). What `xla_matmul_flops` counts for
  the block.
  """
  return float(
      net.seq_length * matmul_flops(net) + net.block.compiled_extra_flops(net)
  )


def block_flops(net: NetworkShape) -> float:
  """Forward FLOPs per token of one transformer block."""
  return float(sum(block_terms(net).values()))


def matmul_flops(net: NetworkShape) -> float:
  """Forward FLOPs per token of the block's matrix products only."""
  return float(
      sum(
          value
          for name, value in block_terms(net).items()
          if name in net.block.matmul_terms
      )
  )


def embedding_flops(net: NetworkShape, one_hot: bool = True) -> float:
  """Forward FLOPs per token of the input embedding (one-hot matmuls)."""
  e, h = net.embedding, net.hidden
  flops = 0.0
  if one_hot:
    flops += 2 * e * net.vocab_size  # token one-hot matmul
    flops += 2 * e * (net.seq_length + 2)  # position and type one-hot matmuls
  flops += 2 * e  # adding the three embeddings
  flops += LAYER_NORM_FLOPS * e + DROPOUT_FLOPS * e
  if e != h:
    flops += 2 * h * e + h  # projection E -> H and its bias
  return flops


def mlm_head_flops(
    net: NetworkShape, output_fraction: float = ELECTRA_OUTPUT_FRACTION
) -> float:
  """Forward FLOPs per token of the MLM head (run on a fraction of tokens)."""
  e, h, v = net.embedding, net.hidden, net.vocab_size
  return output_fraction * (
      2 * h * e
      + e  # transform dense and bias
      + ACTIVATION_FLOPS * e  # GELU
      + LAYER_NORM_FLOPS * e  # layer norm
      + 2 * e * v  # logits against the embedding table
      + SOFTMAX_FLOPS * v
      + 2 * v
  )  # softmax and loss


def rtd_head_flops(net: NetworkShape) -> float:
  """Forward FLOPs per token of ELECTRA's discriminator head."""
  h = net.hidden
  return 2 * h * h + h + ACTIVATION_FLOPS * h + 2 * h


def mws_head_flops(
    net: NetworkShape, output_fraction: float, num_candidates: int
) -> float:
  """Forward FLOPs per token of TEAMS' multi-word selection head.

  Run at the masked fraction of tokens: the MLM head's transform (dense
  H -> E, GELU, LayerNorm), then C dot products of width E with the
  candidates' embedding rows and a softmax over the C candidates, instead
  of the MLM head's V.
  """
  e, h = net.embedding, net.hidden
  return output_fraction * (
      2 * h * e
      + e
      + ACTIVATION_FLOPS * e
      + LAYER_NORM_FLOPS * e
      + 2 * e * num_candidates
      + SOFTMAX_FLOPS * num_candidates
      + 2 * num_candidates
  )


def feed_forward_flops(net: NetworkShape) -> float:
  """Forward FLOPs per token of a block's feed-forward sublayer alone.

  Forward FLOPs per token of a block's feed-forward sublayer alone (a
  per-token task head: `ffn_*` terms of `block_terms`).
  """
  return float(
      sum(
          value
          for name, value in block_terms(net).items()
          if name.startswith('ffn_')
      )
  )


def network_flops(
    net: NetworkShape,
    head: str,
    output_fraction: float = ELECTRA_OUTPUT_FRACTION,
    one_hot_embeddings: bool = True,
) -> float:
  """Forward FLOPs per token of embeddings + blocks + one head.

  Args:
    net: the network's sizes.
    head: 'mlm' or 'rtd'.
    output_fraction: share of tokens the MLM head runs on.
    one_hot_embeddings: count embedding lookups as one-hot matmuls (the
      formula) or as free gathers (what the profiler sees).
  """
  heads = dict(
      mlm=lambda: mlm_head_flops(net, output_fraction),
      rtd=lambda: rtd_head_flops(net),
  )
  if head not in heads:
    raise ValueError(f'head must be mlm or rtd, got {head!r}.')
  return (
      net.layers * block_flops(net)
      + embedding_flops(net, one_hot_embeddings)
      + heads[head]()
  )


def train_flops(
    per_token_forward: float, batch_size: int, steps: float, seq_length: int
) -> float:
  """ELECTRA's convention: forward + an equally expensive backward pass."""
  return 2.0 * batch_size * steps * seq_length * per_token_forward


def steps_for_budget(
    budget: float, per_token_forward: float, batch_size: int, seq_length: int
) -> float:
  """Training steps that spend `budget` FLOPs."""
  return budget / (2.0 * batch_size * seq_length * per_token_forward)


def profiled_forward_flops(
    model: tf.keras.Model, specs: Dict[str, tf.TensorSpec]
) -> int:
  """Float operations of one forward pass, counted by the TF profiler.

  The model's forward graph is frozen and `tf.compat.v1.profiler` counts its
  float operations (2 per multiply-add), with the GELUs traced unfused
  (`activations.unfused`). Importing `official.core.train_utils`
  registers Model Garden's Einsum statistics, without which attention
  einsums would count zero.

  Args:
    model: a Keras model taking a dict of inputs.
    specs: the input signature (fix the batch size, e.g. to 1).

  Returns:
    The float-operation count.
  """
  with activations.unfused():
    concrete = tf.function(
        lambda inputs: model(inputs, training=False)
    ).get_concrete_function(specs)
  frozen = convert_to_constants.convert_variables_to_constants_v2(concrete)
  options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
  options['output'] = 'none'
  profile = tf.compat.v1.profiler.profile(
      graph=frozen.graph, run_meta=tf.compat.v1.RunMetadata(), options=options
  )
  return int(profile.total_float_ops)


_HLO_SHAPE = r'\w+\[([\d,]*)\]\S*'
_HLO_MATMUL = re.compile(
    r'= '
    + _HLO_SHAPE
    + r' (dot|convolution)\('
    + _HLO_SHAPE
    + r' %\S+, '
    + _HLO_SHAPE
    + r' %[^,)]+\)(.*)'
)


def _dims(text: str) -> List[int]:
  return [int(d) for d in text.split(',') if d]


def hlo_matmul_flops(hlo_text: str) -> int:
  """FLOPs of the dot and convolution instructions of an HLO module's text.

  A dot costs 2 * (output elements) * (product of the lhs contracting
  dimensions); a convolution 2 * (output elements) * (kernel elements /
  output features), which covers grouped and depthwise convolutions.

  Args:
    hlo_text: unoptimized HLO text (operand shapes printed inline), as
      `experimental_get_compiler_ir(...)(stage='hlo')` returns it.

  Returns:
    The FLOPs of all matrix products in the module.

  Raises:
    ValueError: on a dot or convolution instruction in a form this parser
      does not read (e.g. optimized HLO without operand shapes).
  """
  total = 0
  for line in hlo_text.splitlines():
    if ' dot(' not in line and ' convolution(' not in line:
      continue
    match = _HLO_MATMUL.search(line)
    if not match:
      raise ValueError(
          f'Cannot read the operand shapes of this HLO '
          f'instruction (use stage="hlo"): {line.strip()[:200]}'
      )
    output, op, lhs, rhs, attributes = match.groups()
    outputs = math.prod(_dims(output))
    if op == 'dot':
      contracting = re.search(r'lhs_contracting_dims=\{([\d,]*)\}', attributes)
      lhs_dims = _dims(lhs)
      reduced = math.prod(lhs_dims[d] for d in _dims(contracting.group(1)))
    else:
      labels = re.search(r'dim_labels=\w+_(\w+)->', attributes).group(1)
      kernel = _dims(rhs)
      reduced = math.prod(kernel) // kernel[labels.index('o')]
    total += 2 * outputs * reduced
  return total


def xla_matmul_flops(function: Callable[..., Any], *args) -> int:
  """Matrix-product FLOPs of `function(*args)` as XLA compiles it.

  The function is lowered with `tf.function(jit_compile=True)` (no machine
  code is generated) and `hlo_matmul_flops` counts its HLO.

  Args:
    function: a TensorFlow-traceable callable.
    *args: example tensors (their shapes and dtypes fix the count).

  Returns:
    The FLOPs of the dot and convolution instructions.
  """
  compiled = tf.function(function, jit_compile=True)
  hlo_text = compiled.experimental_get_compiler_ir(*args)(stage='hlo')
  return hlo_matmul_flops(hlo_text)


def pretraining_input_specs(
    seq_length: int, max_predictions: int, batch_size: int = 1
) -> Dict[str, tf.TensorSpec]:
  """The input signature of the pretraining models."""
  sequence = tf.TensorSpec([batch_size, seq_length], tf.int32)
  predictions = tf.TensorSpec([batch_size, max_predictions], tf.int32)
  return dict(
      input_word_ids=sequence,
      input_mask=sequence,
      input_type_ids=sequence,
      masked_lm_positions=predictions,
      masked_lm_ids=predictions,
      masked_lm_weights=tf.TensorSpec(
          [batch_size, max_predictions], tf.float32
      ),
  )


def count_parameters(variables) -> int:
  """The total number of elements of `variables`."""
  return int(sum(v.shape.num_elements() for v in variables))


def parameter_breakdown(
    encoder: tf.keras.Model, others: Dict[str, tf.keras.Model]
) -> Dict[str, int]:
  """Parameters of a pretraining model's networks, shared ones counted once.

  Args:
    encoder: the network kept for fine-tuning, counted in full (embeddings
      included, how 001 reports 13.5M / 4.8M).
    others: the other networks by name (e.g. ELECTRA's `generator`).

  Returns:
    `encoder`: the encoder's count; for each other network `<name>_only`
    (variables the encoder does not have), `<name>_shared` (those it has)
    and `<name>_total`.
  """
  encoder_ids = {id(v) for v in encoder.trainable_variables}
  result = dict(encoder=count_parameters(encoder.trainable_variables))
  for name, network in others.items():
    variables = network.trainable_variables
    result[f'{name}_only'] = count_parameters(
        [v for v in variables if id(v) not in encoder_ids]
    )
    result[f'{name}_shared'] = count_parameters(
        [v for v in variables if id(v) in encoder_ids]
    )
    result[f'{name}_total'] = count_parameters(variables)
  return result


@dataclasses.dataclass(frozen=True)
class NetworkCost:
  """One network of a pretraining model, for the formula.

  Attributes:
    shape: its sizes (embeddings and blocks).
    backbone: its backbone name (for reports).
    heads: per-token forward FLOPs of each head on its output, by name
      (e.g. `mlm_head_flops(...)`, `rtd_head_flops(...)`).
  """

  shape: NetworkShape
  backbone: str
  heads: Dict[str, float]

  def per_token_forward(self, one_hot_embeddings: bool = True) -> float:
    return (
        self.shape.layers * block_flops(self.shape)
        + embedding_flops(self.shape, one_hot_embeddings)
        + sum(self.heads.values())
    )


@dataclasses.dataclass
class ComputeReport:
  """Parameters and FLOPs of one pretraining configuration."""

  objective: str
  seq_length: int
  batch_size: int
  train_steps: int
  max_predictions: int
  networks: Dict[str, NetworkCost]

  def per_token_forward(self, one_hot_embeddings: bool = True) -> float:
    return sum(
        network.per_token_forward(one_hot_embeddings)
        for network in self.networks.values()
    )

  def train_flops_per_step(self, one_hot_embeddings: bool = True) -> float:
    return train_flops(
        self.per_token_forward(one_hot_embeddings),
        self.batch_size,
        1,
        self.seq_length,
    )

  def total_train_flops(self) -> float:
    return self.train_flops_per_step() * self.train_steps
