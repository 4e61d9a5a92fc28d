r"""Parameters and training FLOPs of a pretraining config (any objective).

  python -m official_repro.count_flops \
      --gin_file=gin/papers/001_ale/ale_small.gin \
      [--flops_budget=1.294e18 |
       --budget_gin_file=gin/papers/001_ale/electra_small.gin] \
      [--profile]

Prints each network's sizes and forward FLOPs per token, the parameters and
the training FLOPs by ELECTRA's formula (`metrics.flops`); with a budget the
steps it buys (how 001 chose its step counts); with `--profile` the TF
profiler's count beside the formula's. FLOPs terms come from the objective's
registry entry, so a new objective needs no edit here.
"""

from typing import Dict, Tuple

from absl import flags
import gin
import tf_keras

from official.core import config_definitions as cfg
from official.core import task_factory
from official_repro.common import cli
from official_repro.data import masking
from official_repro.metrics import flops
from official_repro.tasks import objectives
from official_repro.training import gin_utils

FLAGS = flags.FLAGS


def _bind_if_unbound(name: str, value) -> None:
  try:
    gin.query_parameter(name)
  except ValueError:
    with gin.unlock_config():
      gin.bind_parameter(name, value)


def report_from_gin(
    vocab_size: int,
) -> Tuple[flops.ComputeReport, cfg.TaskConfig]:
  """The compute report and task config of the parsed gin config."""
  _bind_if_unbound('encoder.vocab_size', vocab_size)
  _bind_if_unbound('pretrain_data.input_path', '')
  try:
    name = gin.query_parameter('experiment.objective')
  except ValueError:
    raise cli.UserError(
        'the gin config sets no experiment.objective: count_flops counts a '
        'pretraining config (gin/papers/<paper>/*.gin, gin/pretrain/*.gin), '
        'not a fine-tuning one.'
    ) from None
  objective = objectives.get(name)
  if objective.flops is None:
    raise cli.UserError(
        f'Objective {name!r} declares no FLOPs terms (Objective.flops).'
    )
  task_config = objectives.task_config_from_gin(name)
  data = task_config.train_data
  max_predictions = data.max_predictions_per_seq or (
      masking.default_max_predictions(data.max_seq_length, data.mask_rate)
  )
  report = flops.ComputeReport(
      objective=name,
      seq_length=data.max_seq_length,
      batch_size=data.global_batch_size,
      train_steps=gin.query_parameter('experiment.train_steps'),
      max_predictions=max_predictions,
      networks=objective.flops(
          task_config, data.max_seq_length, max_predictions
      ),
  )
  return report, task_config


def build_pretrainer(task_config: cfg.TaskConfig) -> tf_keras.Model:
  """The Keras pretraining model of a task config."""
  return task_factory.get_task(task_config).build_model()


def model_parameters(model: tf_keras.Model) -> Dict[str, int]:
  """`flops.parameter_breakdown` of a pretrainer's `checkpoint_items`."""
  items = model.checkpoint_items
  others = {
      name: network
      for name, network in items.items()
      if name != 'encoder'
      and isinstance(network, tf_keras.Model)
      and hasattr(network, 'get_embedding_table')
  }
  return flops.parameter_breakdown(items['encoder'], others)


def format_report(
    report: flops.ComputeReport, parameters: Dict[str, int]
) -> str:
  """Human-readable parameters and FLOPs."""
  lines = [
      f'objective: {report.objective}; seq {report.seq_length}, batch '
      f'{report.batch_size}, {report.train_steps:,} steps, '
      f'{report.max_predictions} predictions per sequence'
  ]
  for name, network in report.networks.items():
    net = network.shape
    variant = net.block.describe()
    variant += ' ' if variant else ''
    lines.append(
        f'{name}: {network.backbone} H={net.hidden} L={net.layers} '
        f'E={net.embedding} FFN={net.intermediate} heads={net.heads} '
        f'{variant}V={net.vocab_size}; heads {"+".join(network.heads)}; '
        f'forward FLOPs/token {network.per_token_forward():.4g}'
    )
  counts = (f'{name} {n / 1e6:.2f}M' for name, n in parameters.items())
  lines += [
      f'parameters (encoders, embeddings included): {", ".join(counts)}',
      f'train FLOPs (ELECTRA formula): '
      f'{report.train_flops_per_step():.4g} per step, '
      f'{report.total_train_flops():.4g} in total',
      'shared blocks (ALBERT; generator blocks taken from the '
      'discriminator) are counted once per application: they cost '
      'compute, not parameters; tied embeddings are one parameter '
      'set but each network computes its own embedding.',
  ]
  return '\n'.join(lines)


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  if FLAGS.flops_budget == 0:
    raise cli.UserError('--flops_budget must be > 0.')
  gin_utils.parse_config(FLAGS.gin_file, FLAGS.gin_param)
  report, task_config = report_from_gin(FLAGS.vocab_size)
  model = build_pretrainer(task_config)
  print(format_report(report, model_parameters(model)))
  budget = FLAGS.flops_budget
  if FLAGS.budget_gin_file:
    gin.clear_config()
    gin_utils.parse_config([FLAGS.budget_gin_file], [])
    budget = report_from_gin(FLAGS.vocab_size)[0].total_train_flops()
  if budget:
    steps = flops.steps_for_budget(
        budget, report.per_token_forward(), report.batch_size, report.seq_length
    )
    print(
        f'steps for a budget of {budget:.4g} FLOPs: {steps:,.0f} '
        f'(config: {report.train_steps:,})'
    )
  if FLAGS.profile:
    specs = flops.pretraining_input_specs(
        report.seq_length, report.max_predictions
    )
    profiled = flops.profiled_forward_flops(model, specs)
    seq = report.seq_length
    formula = report.per_token_forward() * seq
    gathers = report.per_token_forward(one_hot_embeddings=False) * seq
    print(
        f'forward FLOPs per sequence: profiler {profiled:.4g}; formula '
        f'{formula:.4g} (profiler/formula {profiled / formula:.3f}); '
        f'formula with embeddings as gathers {gathers:.4g} '
        f'(profiler/that {profiled / gathers:.3f})'
    )


def define_flags():
  """Defines the CLI's flags (on demand: importers define the same names)."""
  flags.DEFINE_multi_string('gin_file', [], 'Gin files of the configuration.')
  flags.DEFINE_multi_string('gin_param', [], 'Extra gin bindings.')
  flags.DEFINE_integer(
      'vocab_size',
      30522,
      'Vocabulary size when encoder.vocab_size is unbound '
      '(default: BERT uncased).',
      lower_bound=1,
  )
  flags.DEFINE_float(
      'flops_budget',
      None,
      'Print the steps this config can train for this many FLOPs (> 0).',
      lower_bound=0.0,
  )
  flags.DEFINE_string(
      'budget_gin_file',
      None,
      'Use the total train FLOPs of this config as budget.',
  )
  flags.DEFINE_boolean(
      'profile', False, 'Also count forward FLOPs with the TF profiler.'
  )


if __name__ == '__main__':
  define_flags()
  cli.require_flags('gin_file')
  cli.run(main)
