"""Compute accounting: ELECTRA's FLOPs formula and independent counts.

1. ELECTRA's published formula (`flops_computation.py`), term by term: a
   matmul costs 2mn, embeddings are one-hot matmuls, backward = forward,
   dropout/LayerNorm/GELU/softmax cost 4/5/8/5 per element; a shared ALBERT
   block costs every application; train FLOPs = 2 * batch * steps * seq *
   forward FLOPs per token.
2. The TF profiler's count (`--profile`): embedding gathers are free there,
   and only einsums without an ellipsis count.
3. XLA's dot and convolution count (`xla_matmul_flops`), checking
   `matmul_flops` and `BlockFlops.compiled_extra_flops`.

Block terms belong to the backbones (`Backbone.flops_block`): a new block
subclasses `BlockFlops` beside its backbone, without editing this module.
"""

import dataclasses
import math
import re
from typing import Any, Callable, ClassVar, Dict, FrozenSet, List

import tensorflow as tf

# Registers Model Garden's Einsum statistics (see profiled_forward_flops).
from official.core import train_utils  # noqa: F401
from official_repro.modeling import activations

# Private module: TF has no public convert_variables_to_constants_v2.
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
    'query key_value attention_scores attention_context attention_output'
    ' ffn_intermediate ffn_output'.split()
)


def query_terms(hidden: int, width: int) -> Dict[str, float]:
  """The query projection of `width` columns and its bias, per token."""
  return dict(query=2 * hidden * width, query_bias=width)


def self_attention_terms(
    hidden: int, heads: int, head_size: int, seq_length: int
) -> Dict[str, float]:
  """Self-attention but its query and output bias, per token."""
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
  """The block after its attention output dense (FFN in `groups`), per token."""
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
  """ELECTRA's BERT block; `matmul_terms` name its matrix products."""

  matmul_terms: ClassVar[FrozenSet[str]] = MATMUL_TERMS

  def validate(self, net: 'NetworkShape') -> None:
    """Raises `ValueError` when the block does not fit `net`'s sizes."""
    del net  # ELECTRA's block fits every shape NetworkShape accepts.

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
  """The sizes the formula needs for one network (`layers` = applications)."""

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


def block_terms(net: NetworkShape) -> Dict[str, float]:
  """Forward FLOPs per token of one block, by term name (`net.block`)."""
  return net.block.terms(net)


def compiled_matmul_flops(net: NetworkShape) -> float:
  """FLOPs of the dots one block compiles to for one sequence (XLA's count)."""
  return float(
      net.seq_length * matmul_flops(net) + net.block.compiled_extra_flops(net)
  )


def block_flops(net: NetworkShape) -> float:
  """Forward FLOPs per token of one transformer block."""
  return float(sum(block_terms(net).values()))


def matmul_flops(net: NetworkShape) -> float:
  """Forward FLOPs per token of the block's matrix products only."""
  terms = block_terms(net).items()
  return float(sum(v for name, v in terms if name in net.block.matmul_terms))


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


def _output_head_flops(
    net: NetworkShape, output_fraction: float, outputs: int
) -> float:
  """MLM-style head: transform H -> E, then logits, softmax, loss."""
  e, h = net.embedding, net.hidden
  return output_fraction * (
      2 * h * e
      + e
      + (ACTIVATION_FLOPS + LAYER_NORM_FLOPS) * e  # transform
      + (2 * e + SOFTMAX_FLOPS + 2) * outputs  # logits, softmax and loss
  )


def mlm_head_flops(
    net: NetworkShape, output_fraction: float = ELECTRA_OUTPUT_FRACTION
) -> float:
  """Forward FLOPs per token of the MLM head (run on a fraction of tokens)."""
  return _output_head_flops(net, output_fraction, net.vocab_size)


def rtd_head_flops(net: NetworkShape) -> float:
  """Forward FLOPs per token of ELECTRA's discriminator head."""
  h = net.hidden
  return 2 * h * h + h + ACTIVATION_FLOPS * h + 2 * h


def mws_head_flops(
    net: NetworkShape, output_fraction: float, num_candidates: int
) -> float:
  """Forward FLOPs per token of TEAMS' head: MLM's over C candidates, not V."""
  return _output_head_flops(net, output_fraction, num_candidates)


def feed_forward_flops(net: NetworkShape) -> float:
  """Forward FLOPs per token of a block's feed-forward sublayer alone."""
  terms = block_terms(net).items()
  return float(sum(v for name, v in terms if name.startswith('ffn_')))


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
  """Float operations of one frozen forward pass, by the TF profiler."""
  with activations.unfused():
    concrete = tf.function(
        lambda inputs: model(inputs, training=False)
    ).get_concrete_function(specs)
  # Freezing inlines nested function calls, whose ops the profiler misses.
  frozen = convert_to_constants.convert_variables_to_constants_v2(concrete)
  options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
  options['output'] = 'none'
  profile = tf.compat.v1.profiler.profile(
      graph=frozen.graph, run_meta=tf.compat.v1.RunMetadata(), options=options
  )
  return int(profile.total_float_ops)


_HLO_SHAPE = r'\w+\[([\d,]*)\]\S*'
_HLO_MATMUL = re.compile(
    rf'= {_HLO_SHAPE} (dot|convolution)\({_HLO_SHAPE} %\S+, {_HLO_SHAPE}'
    r' %[^,)]+\)(.*)'
)


def _dims(text: str) -> List[int]:
  return [int(d) for d in text.split(',') if d]


def hlo_matmul_flops(hlo_text: str) -> int:
  """FLOPs of the dots and convolutions of unoptimized HLO text.

  A dot costs 2 * outputs * lhs contracting sizes; a convolution 2 * outputs
  * kernel elements / output features (grouped and depthwise too). Raises
  ValueError on an instruction without inline operand shapes.
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
  """Matrix-product FLOPs of `function(*args)` in XLA's HLO (not compiled)."""
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
      masked_lm_weights=tf.TensorSpec(predictions.shape, tf.float32),
  )


def count_parameters(variables) -> int:
  """The total number of elements of `variables`."""
  return int(sum(v.shape.num_elements() for v in variables))


def parameter_breakdown(
    encoder: tf.keras.Model, others: Dict[str, tf.keras.Model]
) -> Dict[str, int]:
  """Encoder parameters and each other network's `_only`/`_shared`/`_total`."""
  encoder_ids = {id(v) for v in encoder.trainable_variables}
  result = dict(encoder=count_parameters(encoder.trainable_variables))
  for name, network in others.items():
    total = count_parameters(network.trainable_variables)
    shared = count_parameters(
        [v for v in network.trainable_variables if id(v) in encoder_ids]
    )
    result[f'{name}_only'] = total - shared
    result[f'{name}_shared'] = shared
    result[f'{name}_total'] = total
  return result


@dataclasses.dataclass(frozen=True)
class NetworkCost:
  """One network of a pretraining model: sizes, backbone name, head FLOPs."""

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
    forward = self.per_token_forward(one_hot_embeddings)
    return train_flops(forward, self.batch_size, 1, self.seq_length)

  def total_train_flops(self) -> float:
    return self.train_flops_per_step() * self.train_steps
