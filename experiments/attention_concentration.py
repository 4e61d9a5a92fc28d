r"""002 (ConvBERT rebuttal) Table 1: diagonal concentration of attention.

  python -m experiments.attention_concentration \
    --init_checkpoint=/tmp/electra_small/encoder --label=BERT \
    --init_checkpoint=/tmp/convbert_small/encoder --label=ConvBERT \
    --glue_dir=/data/glue [--task=mrpc --split=dev --max_seq_length=128 \
    --batch_size=32 --max_examples=N --window=4 --output_file=table1.json]

The rebuttal's "average concentration" C (attention mass within 4 positions
of the diagonal over the mass beyond; `official_repro.metrics.
attention_concentration`) on MRPC. Each --init_checkpoint is an encoder
exported by `official_repro.train`, restored as fine-tuning does and run with
`return_attention_scores` over the split tokenized as GLUE fine-tuning. Prints
a markdown table beside the paper's values and writes it as JSON.
"""

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf
import tf_keras

from official_repro.common import cli
from official_repro.common import dataclass_flags
from experiments import paper_tables
from official.nlp.tools import tokenization
from official_repro.common import json_files
from official_repro.common import markdown
from official_repro.data import glue
from official_repro.data import read_report
from official_repro.metrics import attention_concentration
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import pretrained

# 002 rebuttal Table 1 (average concentration on MRPC): its row per backbone;
# the cells are read from `experiments.paper_tables`.
PAPER_ROWS = {'bert': 'BERT', 'convbert': 'ConvBERT'}
_PAPER_COLUMN = 'C (diagonal-concentration)'


def _paper_table() -> paper_tables.Table:
  """002 rebuttal Table 1."""
  return paper_tables.load('002').table('1')


def published() -> Dict[str, float]:
  """002 Table 1's average concentration, by backbone ('bert', ...)."""
  table = _paper_table()
  return {
      backbone: table.cell(row, _PAPER_COLUMN).value
      for backbone, row in PAPER_ROWS.items()
  }


_INPUT_KEYS = ('input_word_ids', 'input_mask', 'input_type_ids')


_option = dataclass_flags.option


@dataclasses.dataclass(frozen=True)
class Settings:
  """Everything one run depends on; each field is a flag of `define_flags`."""

  init_checkpoints: Tuple[str, ...] = _option(
      dataclasses.MISSING,
      'Exported encoder (pretraining model_dir, its encoder/ folder or a '
      'checkpoint prefix); repeat for several rows.',
      flag='init_checkpoint',
  )
  glue_dir: str = _option(
      dataclasses.MISSING, 'GLUE root (holding MRPC/, ...).'
  )
  labels: Tuple[str, ...] = _option(
      (),
      'Row name per --init_checkpoint, in order (none: the paths).',
      flag='label',
  )
  task: str = _option('mrpc', 'GLUE task.')
  split: str = _option('dev', 'Labelled split to read.')
  max_seq_length: int = _option(128, 'Tokens per example.')
  batch_size: int = _option(32, 'Examples per forward pass.')
  max_examples: Optional[int] = _option(
      None, 'Use only the first N examples (default: all).'
  )
  window: int = _option(
      attention_concentration.DEFAULT_WINDOW,
      'Largest |i - j| counted as near the diagonal.',
  )
  output_file: Optional[str] = _option(None, 'Also write the results as JSON.')

  def __post_init__(self):
    if not self.init_checkpoints:
      raise ValueError(
          '--init_checkpoint is required (repeat it for several encoders).'
      )
    if self.labels and len(self.labels) != len(self.init_checkpoints):
      raise ValueError(
          f'Got {len(self.labels)} --label for {len(self.init_checkpoints)} '
          '--init_checkpoint; give one per checkpoint, or none.'
      )
    if self.batch_size < 1:
      raise ValueError(f'--batch_size={self.batch_size} must be >= 1.')
    if self.max_examples is not None and self.max_examples < 1:
      raise ValueError(f'--max_examples={self.max_examples} must be >= 1.')


@dataclasses.dataclass(frozen=True)
class _Model:
  """A restored encoder and what produced it."""

  label: str
  init_checkpoint: str
  spec: pretrained.PretrainedEncoder
  encoder: tf_keras.Model


def _backbone(config: encoders.EncoderConfig) -> str:
  """The backbone's name, with its options that are True in parentheses."""
  variants = [
      name for name, value in config.options_dict().items() if value is True
  ]
  return config.backbone + (f' ({", ".join(variants)})' if variants else '')


def load_model(init_checkpoint: str, label: str, max_seq_length: int) -> _Model:
  """Resolves, builds (with attention scores) and restores one encoder.

  Raises:
    FileNotFoundError: no checkpoint or vocabulary where it points.
    ValueError: no exported config, no attention maps (ConvBERT `conv_only`)
      or fewer positions than `max_seq_length`.
  """
  try:
    spec = pretrained.resolve(init_checkpoint)
  except ValueError as error:
    raise ValueError(
        f'{error} (This command reads encoders exported by '
        'official_repro.train, whose folder holds '
        'encoder_config.json and vocab.txt.)'
    ) from error
  if spec.config.max_position_embeddings < max_seq_length:
    raise ValueError(
        f'--max_seq_length={max_seq_length} exceeds the '
        f'{spec.config.max_position_embeddings} positions of the encoder at '
        f'--init_checkpoint {init_checkpoint}.'
    )
  try:
    encoder = encoders.build_encoder(spec.config, return_attention_scores=True)
  except ValueError as error:
    raise ValueError(
        f'--init_checkpoint {init_checkpoint} (backbone '
        f'{spec.config.backbone!r}): {error}'
    ) from error
  pretrained.restore(encoder, spec.checkpoint_path)
  return _Model(label, init_checkpoint, spec, encoder)


def read_examples(
    settings: Settings,
) -> Tuple[List[glue.GlueExample], read_report.ReadReport]:
  """The split's examples (the first `max_examples`) and the read report."""
  try:
    glue.glue_file_path(settings.glue_dir, settings.task, settings.split)
  except ValueError as error:
    raise ValueError(
        f'--task={settings.task} --split={settings.split}: {error}'
    ) from error
  examples, report = glue.read_examples(
      settings.glue_dir, settings.task, settings.split
  )
  if not examples:
    raise ValueError(
        f'{report.path} holds no usable example ({report.summary()}).'
    )
  return examples[: settings.max_examples], report


def measure(
    model: _Model, examples: Sequence[glue.GlueExample], settings: Settings
) -> Dict[str, Any]:
  """The encoder's table row over the examples.

  The accumulator's `result()` plus label, checkpoint, backbone, paper value,
  truncations and `uniform_concentration` (C of uniform maps there).
  """
  tokenizer = tokenization.FullTokenizer(
      model.spec.vocab_file, do_lower_case=model.spec.lower_case
  )
  features, report = glue.convert_examples_to_features(
      examples, tokenizer, settings.max_seq_length
  )
  forward = tf.function(
      lambda inputs: model.encoder(inputs, training=False)['attention_scores'],
      reduce_retracing=True,
  )
  accumulator = attention_concentration.ConcentrationAccumulator(
      settings.window
  )
  uniform = attention_concentration.ConcentrationAccumulator(settings.window)
  for start in range(0, report.num_examples, settings.batch_size):
    inputs = {
        key: features[key][start : start + settings.batch_size]
        for key in _INPUT_KEYS
    }
    scores = forward(inputs)
    accumulator.update(
        [layer.numpy() for layer in scores], inputs['input_mask']
    )
    uniform.update(
        [attention_concentration.uniform_attention(inputs['input_mask'])],
        inputs['input_mask'],
    )
  return dict(
      label=model.label,
      init_checkpoint=model.init_checkpoint,
      checkpoint_path=model.spec.checkpoint_path,
      backbone=_backbone(model.spec.config),
      paper=published().get(_backbone(model.spec.config)),
      num_examples=report.num_examples,
      num_truncated=report.num_truncated,
      uniform_concentration=uniform.result()['mean_concentration'],
      **accumulator.result(),
  )


def run(settings: Settings) -> Dict[str, Any]:
  """{settings (with the read report), rows}: every checkpoint measured.

  All checkpoints and the data are checked before the first forward pass.
  """
  if settings.output_file:
    json_files.check_writable(settings.output_file, '--output_file')
  examples, report = read_examples(settings)
  labels = settings.labels or settings.init_checkpoints
  models = [
      load_model(path, label, settings.max_seq_length)
      for path, label in zip(settings.init_checkpoints, labels)
  ]
  results = dict(
      settings=dict(
          dataclasses.asdict(settings),
          data_file=report.path,
          rows_read=report.num_records,
          rows_skipped=report.num_malformed,
      ),
      rows=[measure(model, examples, settings) for model in models],
  )
  if settings.output_file:
    json_files.write_json(settings.output_file, results, sort_keys=False)
  return results


def _number(value: Optional[float]) -> str:
  """A figure to 3 decimals, '-' for None."""
  return '-' if value is None else f'{value:.3f}'


def format_table(results: Dict[str, Any]) -> str:
  """The results as a markdown table beside 002 Table 1."""
  settings = results['settings']
  table = _paper_table()
  paper = ', '.join(
      f'{row} {table.cell(row, _PAPER_COLUMN).printed}'
      for row in table.row_keys
  )
  header = (
      'model | backbone | layers x heads | examples | maps | excluded | '
      'average C | mass ratio | uniform C | paper'
  ).split(' | ')
  numbers = ('mean_concentration', 'mass_ratio', 'uniform_concentration')
  rows = [
      [row['label'], row['backbone']]
      + [f"{row['num_layers']} x {row['num_heads']}"]
      + [row[key] for key in ('num_examples', 'num_maps', 'num_excluded')]
      + [_number(row[key]) for key in numbers + ('paper',)]
      for row in results['rows']
  ]
  lines = [
      f"Attention concentration, window {settings['window']}, on "
      f"{settings['task']}/{settings['split']} ({settings['data_file']}); "
      f'paper: 002 rebuttal Table 1, MRPC ({paper}).',
      '',
      *markdown.table(header, rows),
      '',
      'uniform C: the same examples with attention spread evenly '
      'over the real tokens (no locality at all).',
  ]
  return '\n'.join(lines)


def define_flags():
  """Defines the CLI's flags (on demand: importing this module defines none)."""
  dataclass_flags.define_flags(Settings)
  cli.require_flags('glue_dir')


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  settings = dataclass_flags.from_flags(Settings)
  print(format_table(run(settings)))
  if settings.output_file:
    print(f'wrote {settings.output_file}')


if __name__ == '__main__':
  define_flags()
  cli.run(main)
