r"""Compute accounting: parameters and training FLOPs of a pretraining config.

  python -m official_repro.metrics.flops --gin_file=gin/papers/001_ale/ale_small.gin \
      [--flops_budget=1.294e18 | --budget_gin_file=gin/papers/001_ale/electra_small.gin] \
      [--profile]

Two independent counts:

1. **ELECTRA's published formula** (google-research/electra
   `flops_computation.py`), implemented term by term below: a matmul costs
   2mn, embeddings are one-hot matmuls, the backward pass costs as much as the
   forward one, and dropout/LayerNorm/GELU/softmax cost 4/5/8/5 FLOPs per
   element. Train FLOPs = 2 * batch * steps * seq * (per-token forward FLOPs of
   every network). It reproduces ELECTRA's own numbers: ELECTRA-small
   1.294e18, BERT-small 1.419e18, BERT-base 6.428e19, ELECTRA-base 6.425e19
   (`tests/metrics/test_flops.py`).
2. **The TF profiler's count** of the model's frozen forward graph (`--profile`),
   scaled by the same 2 * batch * steps convention, and the ratio of the two.
   The profiler counts an embedding gather as free where the formula charges a
   one-hot matmul (2 * E * V per token, which dominates small models), so the
   tool also prints the formula without those terms.

How sharing is counted: ALBERT's one shared block is applied `num_layers`
times and costs `num_layers` blocks of compute (it saves parameters, not
FLOPs); tied generator/discriminator embeddings are one parameter set but each
network computes its own embedding. The next-sentence head, if any, is not in
the formula (as in ELECTRA's).
"""

import dataclasses
import os
from typing import Dict, Optional

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app
from absl import flags
import gin
import tensorflow as tf

from official.core import train_utils  # pylint: disable=unused-import
from official_repro.data import masking
from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import electra
from official_repro.tasks import electra as electra_task
from official_repro.tasks import masked_lm
from official_repro.training import gin_utils
from tensorflow.python.framework import convert_to_constants  # pylint: disable=g-direct-tensorflow-import

# ELECTRA's per-element costs of the non-matmul operations.
DROPOUT_FLOPS = 4
LAYER_NORM_FLOPS = 5
ACTIVATION_FLOPS = 8
SOFTMAX_FLOPS = 5

# ELECTRA's default fraction of tokens the MLM output layer runs on (20/128).
ELECTRA_OUTPUT_FRACTION = 0.15625


@dataclasses.dataclass(frozen=True)
class NetworkShape:
  """The sizes the formula needs for one transformer network.

  Attributes:
    hidden: H.
    layers: L (applications of a block; ALBERT's shared block counts L times).
    embedding: E.
    intermediate: feed-forward width.
    heads: attention heads.
    seq_length: tokens per sequence.
    vocab_size: V.
  """
  hidden: int
  layers: int
  embedding: int
  intermediate: int
  heads: int
  seq_length: int
  vocab_size: int

  @classmethod
  def from_encoder(cls, config: encoders.EncoderConfig, seq_length: int
                   ) -> 'NetworkShape':
    return cls(hidden=config.hidden_size, layers=config.num_layers,
               embedding=config.embedding_width,
               intermediate=config.intermediate_size,
               heads=config.num_attention_heads, seq_length=seq_length,
               vocab_size=config.vocab_size)


def block_flops(net: NetworkShape) -> float:
  """Forward FLOPs per token of one transformer block."""
  h, i, s, n = net.hidden, net.intermediate, net.seq_length, net.heads
  kqv = h
  attention = (
      3 * 2 * h * kqv            # query, key, value projections
      + 3 * kqv                  # their biases
      + 2 * kqv * s              # attention scores
      + SOFTMAX_FLOPS * s * n    # softmax
      + DROPOUT_FLOPS * s * n    # attention dropout
      + s * n                    # score scaling
      + 2 * h * s                # weighted sum of values
      + 2 * h * h                # output projection
      + h                        # its bias
      + DROPOUT_FLOPS * h        # output dropout
      + h                        # residual
      + LAYER_NORM_FLOPS)        # layer norm (ELECTRA counts 5, not 5h, here)
  feed_forward = (
      2 * h * i                  # intermediate matmul
      + ACTIVATION_FLOPS * i     # GELU
      + i                        # bias
      + 2 * h * i                # output matmul
      + h                        # bias
      + DROPOUT_FLOPS * h        # dropout
      + h                        # residual
      + LAYER_NORM_FLOPS * h)    # layer norm
  return attention + feed_forward


def embedding_flops(net: NetworkShape, one_hot: bool = True) -> float:
  """Forward FLOPs per token of the input embedding (one-hot matmuls)."""
  e, h = net.embedding, net.hidden
  flops = 0.0
  if one_hot:
    flops += 2 * e * net.vocab_size        # token one-hot matmul
    flops += 2 * e * (net.seq_length + 2)  # position and type one-hot matmuls
  flops += 2 * e                           # adding the three embeddings
  flops += LAYER_NORM_FLOPS * e + DROPOUT_FLOPS * e
  if e != h:
    flops += 2 * h * e + h                 # projection E -> H and its bias
  return flops


def mlm_head_flops(net: NetworkShape,
                   output_fraction: float = ELECTRA_OUTPUT_FRACTION) -> float:
  """Forward FLOPs per token of the MLM head (run on a fraction of tokens)."""
  e, h, v = net.embedding, net.hidden, net.vocab_size
  return output_fraction * (
      2 * h * e + e                  # transform dense and bias
      + ACTIVATION_FLOPS * e         # GELU
      + LAYER_NORM_FLOPS * e         # layer norm
      + 2 * e * v                    # logits against the embedding table
      + SOFTMAX_FLOPS * v + 2 * v)   # softmax and loss


def rtd_head_flops(net: NetworkShape) -> float:
  """Forward FLOPs per token of ELECTRA's discriminator head."""
  h = net.hidden
  return 2 * h * h + h + ACTIVATION_FLOPS * h + 2 * h


def network_flops(net: NetworkShape, head: str,
                  output_fraction: float = ELECTRA_OUTPUT_FRACTION,
                  one_hot_embeddings: bool = True) -> float:
  """Forward FLOPs per token of embeddings + blocks + one head.

  Args:
    net: the network's sizes.
    head: 'mlm' or 'rtd'.
    output_fraction: share of tokens the MLM head runs on.
    one_hot_embeddings: count embedding lookups as one-hot matmuls (the
      formula) or as free gathers (what the profiler sees).
  """
  heads = dict(mlm=lambda: mlm_head_flops(net, output_fraction),
               rtd=lambda: rtd_head_flops(net))
  if head not in heads:
    raise ValueError(f'head must be mlm or rtd, got {head!r}.')
  return (net.layers * block_flops(net) +
          embedding_flops(net, one_hot_embeddings) + heads[head]())


def train_flops(per_token_forward: float, batch_size: int, steps: float,
                seq_length: int) -> float:
  """ELECTRA's convention: forward + an equally expensive backward pass."""
  return 2.0 * batch_size * steps * seq_length * per_token_forward


def steps_for_budget(budget: float, per_token_forward: float, batch_size: int,
                     seq_length: int) -> float:
  """Training steps that spend `budget` FLOPs."""
  return budget / (2.0 * batch_size * seq_length * per_token_forward)


def profiled_forward_flops(model: tf.keras.Model,
                           specs: Dict[str, tf.TensorSpec]) -> int:
  """Float operations of one forward pass, counted by the TF profiler.

  The model's forward graph is frozen and `tf.compat.v1.profiler` counts its
  float operations (2 per multiply-add). Importing `official.core.train_utils`
  registers Model Garden's Einsum statistics, without which attention
  einsums would count zero.

  Args:
    model: a Keras model taking a dict of inputs.
    specs: the input signature (fix the batch size, e.g. to 1).

  Returns:
    The float-operation count.
  """
  concrete = tf.function(
      lambda inputs: model(inputs, training=False)).get_concrete_function(
          specs)
  frozen = convert_to_constants.convert_variables_to_constants_v2(concrete)
  options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
  options['output'] = 'none'
  profile = tf.compat.v1.profiler.profile(
      graph=frozen.graph, run_meta=tf.compat.v1.RunMetadata(),
      options=options)
  return int(profile.total_float_ops)


def pretraining_input_specs(seq_length: int, max_predictions: int,
                            batch_size: int = 1) -> Dict[str, tf.TensorSpec]:
  """The input signature of the pretraining models."""
  sequence = tf.TensorSpec([batch_size, seq_length], tf.int32)
  predictions = tf.TensorSpec([batch_size, max_predictions], tf.int32)
  return dict(
      input_word_ids=sequence, input_mask=sequence, input_type_ids=sequence,
      masked_lm_positions=predictions, masked_lm_ids=predictions,
      masked_lm_weights=tf.TensorSpec([batch_size, max_predictions],
                                      tf.float32))


def count_parameters(variables) -> int:
  return int(sum(v.shape.num_elements() for v in variables))


def parameter_breakdown(generator: Optional[tf.keras.Model],
                        discriminator: tf.keras.Model) -> Dict[str, int]:
  """Parameters of the encoders: generator-only, discriminator, shared.

  `discriminator` counts every variable of the discriminator encoder,
  embeddings included (how 001 reports 13.5M / 4.8M); `generator_only`
  excludes what the generator shares with it.
  """
  discriminator_ids = {id(v) for v in discriminator.trainable_variables}
  result = dict(discriminator=count_parameters(
      discriminator.trainable_variables))
  if generator is not None:
    shared = [v for v in generator.trainable_variables
              if id(v) in discriminator_ids]
    own = [v for v in generator.trainable_variables
           if id(v) not in discriminator_ids]
    result.update(generator_only=count_parameters(own),
                  shared=count_parameters(shared),
                  generator_total=count_parameters(
                      generator.trainable_variables))
  return result


@dataclasses.dataclass
class ComputeReport:
  """Parameters and FLOPs of one pretraining configuration."""
  objective: str
  seq_length: int
  batch_size: int
  train_steps: int
  max_predictions: int
  networks: Dict[str, NetworkShape]
  heads: Dict[str, str]
  encoder_configs: Dict[str, encoders.EncoderConfig]

  @property
  def output_fraction(self) -> float:
    return self.max_predictions / self.seq_length

  def per_token_forward(self, one_hot_embeddings: bool = True) -> float:
    return sum(network_flops(self.networks[name], self.heads[name],
                             self.output_fraction, one_hot_embeddings)
               for name in self.networks)

  def train_flops_per_step(self, one_hot_embeddings: bool = True) -> float:
    return train_flops(self.per_token_forward(one_hot_embeddings),
                       self.batch_size, 1, self.seq_length)

  def total_train_flops(self) -> float:
    return self.train_flops_per_step() * self.train_steps


def report_from_gin(vocab_size: int) -> ComputeReport:
  """The compute report of the parsed gin config.

  Args:
    vocab_size: vocabulary size when the config does not bind
      `encoder.vocab_size` (it normally comes from the records).
  """
  objective = gin.query_parameter('experiment.task_config').selector
  discriminator = encoders.encoder_config()
  if discriminator.vocab_size is None:
    discriminator = discriminator.replace(vocab_size=vocab_size)
  seq_length = gin.query_parameter('pretrain_data.max_seq_length')
  bindings = gin.get_bindings('pretrain_data')
  max_predictions = bindings.get('max_predictions_per_seq') or (
      masking.default_max_predictions(seq_length,
                                      bindings.get('mask_rate', 0.15)))
  configs = dict(discriminator=discriminator)
  heads = dict(discriminator='mlm')
  if objective == 'electra':
    heads['discriminator'] = 'rtd'
    configs['generator'] = electra.scale_generator(
        discriminator, gin.query_parameter('electra.generator_size'))
    heads['generator'] = 'mlm'
  elif objective != 'masked_lm':
    raise ValueError(f'No FLOPs model for objective {objective!r}.')
  return ComputeReport(
      objective=objective, seq_length=seq_length,
      batch_size=gin.query_parameter('pretrain_data.train_batch_size'),
      train_steps=gin.query_parameter('experiment.train_steps'),
      max_predictions=max_predictions,
      networks={name: NetworkShape.from_encoder(config, seq_length)
                for name, config in configs.items()},
      heads=heads, encoder_configs=configs)


def build_pretrainer(report: ComputeReport) -> tf.keras.Model:
  """The Keras pretraining model of a report (for parameters and profiling)."""
  discriminator = report.encoder_configs['discriminator']
  if report.objective == 'electra':
    config = electra_task.ElectraModelConfig(
        discriminator=discriminator,
        generator_size=gin.query_parameter('electra.generator_size'))
    return electra_task.ElectraPretrainTask(
        electra_task.ElectraPretrainConfig(model=config)).build_model()
  config = masked_lm.MaskedLMModelConfig(encoder=discriminator)
  return masked_lm.MaskedLMPretrainTask(
      masked_lm.MaskedLMPretrainConfig(model=config)).build_model()


def model_parameters(model: tf.keras.Model) -> Dict[str, int]:
  items = model.checkpoint_items
  return parameter_breakdown(items.get('generator'), items['encoder'])


def main(argv):
  del argv
  flag_values = flags.FLAGS
  gin_utils.parse_config(flag_values.gin_file, flag_values.gin_param)
  report = report_from_gin(flag_values.vocab_size)
  model = build_pretrainer(report)
  print(format_report(report, model_parameters(model)))
  budget = flag_values.flops_budget
  if flag_values.budget_gin_file:
    gin.clear_config()
    gin_utils.parse_config([flag_values.budget_gin_file], [])
    budget = report_from_gin(flag_values.vocab_size).total_train_flops()
  if budget:
    steps = steps_for_budget(budget, report.per_token_forward(),
                             report.batch_size, report.seq_length)
    print(f'steps for a budget of {budget:.4g} FLOPs: {steps:,.0f} '
          f'(config: {report.train_steps:,})')
  if flag_values.profile:
    specs = pretraining_input_specs(report.seq_length, report.max_predictions)
    profiled = profiled_forward_flops(model, specs)
    formula = report.per_token_forward() * report.seq_length
    gathers = report.per_token_forward(one_hot_embeddings=False) * (
        report.seq_length)
    print(f'forward FLOPs per sequence: profiler {profiled:.4g}; formula '
          f'{formula:.4g} (profiler/formula {profiled / formula:.3f}); '
          f'formula with embeddings as gathers {gathers:.4g} '
          f'(profiler/that {profiled / gathers:.3f})')


def format_report(report: ComputeReport, parameters: Dict[str, int]) -> str:
  """Human-readable parameters and FLOPs."""
  lines = [f'objective: {report.objective}; seq {report.seq_length}, batch '
           f'{report.batch_size}, {report.train_steps:,} steps, '
           f'{report.max_predictions} predictions per sequence']
  for name, net in report.networks.items():
    lines.append(
        f'{name}: {report.encoder_configs[name].backbone} H={net.hidden} '
        f'L={net.layers} E={net.embedding} FFN={net.intermediate} '
        f'heads={net.heads} V={net.vocab_size}; forward FLOPs/token '
        f'{network_flops(net, report.heads[name], report.output_fraction):.4g}')
  lines.append('parameters (encoders, embeddings included): ' + ', '.join(
      f'{name} {count / 1e6:.2f}M' for name, count in parameters.items()))
  lines.append(f'train FLOPs (ELECTRA formula): {report.train_flops_per_step():.4g}'
               f' per step, {report.total_train_flops():.4g} in total')
  lines.append('shared ALBERT layers are counted once per application (they '
               'cost compute, not parameters); tied embeddings are one '
               'parameter set but each network computes its own embedding.')
  return '\n'.join(lines)


def define_flags():
  """The CLI's flags; defined on demand because other entry points import
  this module and define flags of the same names."""
  flags.DEFINE_multi_string('gin_file', [], 'Gin files of the configuration.')
  flags.DEFINE_multi_string('gin_param', [], 'Extra gin bindings.')
  flags.DEFINE_integer('vocab_size', 30522,
                       'Vocabulary size when encoder.vocab_size is unbound '
                       '(default: BERT uncased).')
  flags.DEFINE_float('flops_budget', None,
                     'Print the steps this config can train for this many '
                     'FLOPs.')
  flags.DEFINE_string('budget_gin_file', None,
                      'Use the total train FLOPs of this config as budget.')
  flags.DEFINE_boolean('profile', False,
                       'Also count forward FLOPs with the TF profiler.')


if __name__ == '__main__':
  define_flags()
  app.run(main)
