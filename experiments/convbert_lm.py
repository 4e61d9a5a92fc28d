r"""002 rebuttal Table 3: causal LM, transformer vs mixed attention.

  python -m experiments.convbert_lm \
    --train_file=wiki.train.tokens --valid_file=wiki.valid.tokens \
    --architectures=transformer,mixed --output_dir=/tmp/convbert_lm

(or `--valid_fraction=0.1` instead of `--valid_file`). Each architecture is a
run of the library's experiment runner on `official_repro.tasks.causal_lm` in
`<output_dir>/<architecture>/`, with the same data order, steps and optimizer,
scored on non-overlapping `--seq_length` windows. The output bias starts at
the log unigram probabilities (from zeros a short run stays at the unigram
perplexity). `--match_parameters` widens the mixed model to the transformer's
parameter count. Writes `results.json` (after each model) and `table.md`; a
killed run resumes with the same flags (`settings.json`; others are refused).
"""

import contextlib
import bisect
import dataclasses
import functools
import json
import math
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import flags
from absl import logging
import gin
import tensorflow as tf

from official_repro.common import cli
from official_repro.common import dataclass_flags
from experiments import paper_tables
from official_repro.common import json_files
from official_repro.common import markdown
from official_repro.data import wikitext
from official_repro.modeling.models import causal_lm
from official_repro.tasks import causal_lm as causal_lm_task
from official_repro.training import experiment
from official_repro.training import gin_utils
from official_repro.training import reproducibility

FLAGS = flags.FLAGS

# 002 rebuttal, Table 3 ("Result on WikiText-103"): per architecture, our
# label and the table's row; the perplexities are read from
# `experiments.paper_tables` (`published_perplexity`).
PUBLISHED = {
    'transformer': ('Transformer', 'Transformer'),
    'mixed': ('Ours (mixed attention)', 'Ours'),
}
PUBLISHED_SIZES = (
    '002 gives no sizes for Table 3; its text says the '
    'transformer is "of similar size as small BERT" and the '
    'mixed-attention model "of similar size as small ConvBERT" '
    '(small: hidden 256, 12 layers, embedding 128), and that '
    'the mixed model was not fully tuned.'
)


def published_perplexity(architecture: str) -> float:
  """002 Table 3's perplexity for `architecture` ('transformer', 'mixed')."""
  return (
      paper_tables.load('002')
      .cell('3', PUBLISHED[architecture][1], 'Perplexity')
      .value
  )


_flag = dataclass_flags.option
_REQUIRED = dataclasses.MISSING


@dataclasses.dataclass(frozen=True)
class Settings:
  """Everything one run depends on; each field is a flag of `define_flags`."""

  train_file: str = _flag(_REQUIRED, 'WikiText-format training file.')
  output_dir: str = _flag(_REQUIRED, 'Where results.json and table.md go.')
  valid_file: Optional[str] = _flag(
      None, 'Validation file; exclusive with --valid_fraction.'
  )
  valid_fraction: Optional[float] = _flag(
      None,
      'Hold out this tail of --train_file for validation (cut at an '
      'article title).',
  )
  test_file: Optional[str] = _flag(None, 'Also report perplexity on this.')
  max_vocab_size: Optional[int] = _flag(
      None,
      'Keep the most frequent words (specials included); the rest become '
      '<unk>.',
  )
  architectures: Tuple[str, ...] = _flag(
      causal_lm.ARCHITECTURES,
      f'Models to train, from {causal_lm.ARCHITECTURES}.',
      listed=True,
  )
  hidden_size: int = _flag(128, 'Block width H.')
  num_layers: int = _flag(4, 'Blocks L.')
  num_attention_heads: int = _flag(
      4,
      'Heads N (mixed: max(1, N // head_ratio) attention heads and as many '
      'convolution heads).',
  )
  intermediate_size: int = _flag(512, 'Feed-forward width.')
  embedding_width: int = _flag(
      128, 'Embedding width E (tied input/output table).'
  )
  head_ratio: int = _flag(2, 'Mixed: attention-head reduction (ConvBERT: 2).')
  kernel_size: int = _flag(9, 'Mixed: convolution window (ConvBERT: 9).')
  num_groups: int = _flag(1, 'Mixed: grouped feed-forward groups.')
  match_parameters: bool = _flag(
      False, "Widen the mixed model to the transformer's parameters."
  )
  unigram_output_bias: bool = _flag(
      True,
      'Start the output bias at the log unigram probabilities of the '
      'training data (else zeros).',
  )
  dropout_rate: float = _flag(
      0.1, 'Dropout on embeddings, block outputs, attention.'
  )
  seq_length: int = _flag(64, 'Window length T.')
  batch_size: int = _flag(32, 'Windows per batch.')
  train_steps: int = _flag(300, 'Optimizer steps per model.')
  optimizer: str = _flag(
      'adam', 'Model Garden optimizer.', choices=('adam', 'adamw', 'lamb')
  )
  learning_rate: float = _flag(
      1e-3, 'Peak learning rate (linear warmup, linear decay to 0).'
  )
  warmup_steps: int = _flag(30, 'Warmup steps.')
  weight_decay_rate: float = _flag(0.0, 'Decoupled weight decay (adamw, lamb).')
  global_clipnorm: Optional[float] = _flag(
      1.0, 'Clip gradients to this global norm (0: no clipping).'
  )
  log_every: int = _flag(
      50,
      'Log and summarize the mean training loss every this many steps '
      '(one Orbit loop).',
  )
  checkpoint_every: int = _flag(
      100,
      'Save a resumable checkpoint every this many steps (a multiple of '
      '--log_every; the runner also saves after the first loop and the '
      'last step).',
  )
  seed: int = _flag(1, 'Seed of initialization and data order.')

  def __post_init__(self):
    unknown = set(self.architectures) - set(causal_lm.ARCHITECTURES)
    if not self.architectures or unknown:
      raise ValueError(
          f'--architectures must be a non-empty list of '
          f'{causal_lm.ARCHITECTURES}, got {self.architectures}.'
      )
    if min(self.train_steps, self.log_every, self.checkpoint_every) < 1:
      raise ValueError(
          f'--train_steps={self.train_steps}, --log_every='
          f'{self.log_every} and --checkpoint_every='
          f'{self.checkpoint_every} must be >= 1.'
      )
    if self.checkpoint_every % self.log_every:
      raise ValueError(
          f'--checkpoint_every={self.checkpoint_every} must be a multiple of '
          f'--log_every={self.log_every}: checkpoints are saved at the end '
          'of a logged loop.'
      )
    if not 0 <= self.warmup_steps <= self.train_steps:
      raise ValueError(
          f'--warmup_steps={self.warmup_steps} must be in '
          f'[0, --train_steps={self.train_steps}].'
      )


def define_flags():
  """Defines the command-line flags (defaults from `Settings`)."""
  dataclass_flags.define_flags(Settings)
  cli.require_flags('train_file', 'output_dir')


def settings_from_flags() -> Settings:
  """The run's `Settings` from the command-line flags."""
  values = dataclass_flags.flag_values_of(Settings)
  values['global_clipnorm'] = values['global_clipnorm'] or None
  return Settings(**values)


_SIZE_NAMES = (
    'hidden_size',
    'num_layers',
    'num_attention_heads',
    'intermediate_size',
    'embedding_width',
)
_DATA_NAMES = (
    'train_file',
    'valid_file',
    'valid_fraction',
    'test_file',
    'max_vocab_size',
)


def _values(settings: Settings, names: Sequence[str]) -> Dict[str, Any]:
  """{name: the settings' value} of `names`."""
  return {name: getattr(settings, name) for name in names}


def _model_fields(
    settings: Settings, architecture: str, sizes: Dict[str, int]
) -> Dict[str, Any]:
  """`CausalLMModelConfig` fields (gin `causal_lm.*`) of `architecture`."""
  names = ('head_ratio', 'kernel_size', 'num_groups', 'unigram_output_bias')
  return dict(
      _values(settings, names),
      architecture=architecture,
      **sizes,
      dropout_rate=settings.dropout_rate,
      attention_dropout_rate=settings.dropout_rate,
  )


def parameter_count(
    settings: Settings,
    architecture: str,
    vocab_size: int,
    sizes: Dict[str, int],
) -> int:
  """Weights of the model of `architecture` at `sizes` (built to count)."""
  config = causal_lm_task.CausalLMModelConfig(
      vocab_size=vocab_size,
      max_seq_length=settings.seq_length,
      **_model_fields(settings, architecture, sizes),
  )
  return causal_lm_task.build_causal_lm(config).count_params()


def matched_mixed_sizes(
    settings: Settings, vocab_size: int, target_parameters: int
) -> Dict[str, int]:
  """Mixed-model sizes whose parameter count is closest to the target.

  Binary search on the hidden size in steps of lcm(heads, groups), the
  feed-forward width in proportion; heads and depth stay fixed.
  """
  step = math.lcm(settings.num_attention_heads, settings.num_groups)
  ratio = settings.intermediate_size / settings.hidden_size

  def sizes_at(multiple):
    hidden = multiple * step
    groups = settings.num_groups
    return dict(
        _values(settings, _SIZE_NAMES),
        hidden_size=hidden,
        intermediate_size=max(groups, round(hidden * ratio / groups) * groups),
    )

  @functools.cache
  def count(multiple):
    return parameter_count(settings, 'mixed', vocab_size, sizes_at(multiple))

  low = max(1, settings.hidden_size // step)
  high = 2 * low
  while count(high) < target_parameters:
    low, high = high, 2 * high
  # The first multiple above `low` reaching the target, and the one below it.
  high = bisect.bisect_left(
      range(high + 1), target_parameters, lo=low + 1, key=count
  )
  best = min((high - 1, high), key=lambda m: abs(count(m) - target_parameters))
  return sizes_at(best)


def gin_bindings(
    settings: Settings, architecture: str, sizes: Dict[str, int]
) -> List[str]:
  """The gin bindings of one model's run (`causal_lm_task`, `optimization`)."""
  optimization = ('optimizer', 'learning_rate', 'warmup_steps')
  optimization += ('weight_decay_rate', 'global_clipnorm')
  configurables = dict(
      causal_lm_data=dict(
          _values(settings, _DATA_NAMES + ('seq_length',)),
          train_batch_size=settings.batch_size,
      ),
      causal_lm=_model_fields(settings, architecture, sizes),
      optimization=_values(settings, optimization),
      causal_lm_experiment=dict(
          train_steps=settings.train_steps,
          steps_per_loop=settings.log_every,
          checkpoint_interval=settings.checkpoint_every,
          seed=settings.seed,
          # Dropout streams are checkpointed, so a resumed run ends as the
          # uninterrupted one.
          deterministic=True,
      ),
  )
  return [
      f'{configurable}.{name} = {value!r}'
      for configurable, values in configurables.items()
      for name, value in values.items()
  ]


def training_stats(settings: Settings, model_dir: str) -> Dict[str, Any]:
  """Losses and throughput of a run, from Orbit's per-loop summaries.

  `loss_history` is `(step, mean loss of the loop)`; `train_seconds` adds up
  the loops of every process; tokens/s leaves out the first (tracing) loop.
  """
  history, loops, previous = [], [], 0
  for step, values in causal_lm_task.train_summaries(model_dir).items():
    if 'training_loss' not in values:
      continue
    history.append((step, values['training_loss']))
    rate = values.get('steps_per_second') or 0.0
    loops.append((step - previous, (step - previous) / rate if rate else 0.0))
    previous = step
  timed_steps = sum(steps for steps, _ in loops[1:])
  timed_seconds = sum(seconds for _, seconds in loops[1:])
  tokens_per_step = settings.batch_size * settings.seq_length
  return dict(
      loss_history=history,
      final_train_loss=history[-1][1],
      train_seconds=sum(seconds for _, seconds in loops),
      train_tokens_per_second=(
          timed_steps * tokens_per_step / timed_seconds
          if timed_seconds > 0
          else None
      ),
  )


def train_and_evaluate(
    settings: Settings, architecture: str, sizes: Dict[str, int]
) -> Dict[str, Any]:
  """One model's `results.json` entry but its `sizes`, trained and scored.

  Runs in `<output_dir>/<architecture>`, resuming from a checkpoint there.
  """
  model_dir = os.path.join(settings.output_dir, architecture)
  resumed_from = 0
  if tf.train.get_checkpoint_state(model_dir) is not None:
    _, resumed_from = reproducibility.latest_readable_checkpoint(
        model_dir, repoint=False
    )
  gin.clear_config()
  try:
    gin_utils.parse_config([], gin_bindings(settings, architecture, sizes))
    with gin.unlock_config():
      params, run_settings = causal_lm_task.experiment_config()
    # Orbit prints its progress lines; this command's stdout is the table.
    with contextlib.redirect_stdout(sys.stderr):
      result = experiment.run(
          params,
          run_settings,
          tf.distribute.get_strategy(),
          model_dir,
          'train_and_eval',
      )
  finally:
    gin.clear_config()
  model = params.task.model
  embedding = model.vocab_size * (model.embedding_width or model.hidden_size)
  entry = dict(
      parameters=result['num_params'],
      non_embedding_parameters=result['num_params'] - embedding,
      model_dir=model_dir,
      resumed_from_step=resumed_from,
  )
  entry.update(training_stats(settings, model_dir))
  for name in params.task.validation_data.streams:
    entry[name] = dict(
        nll=result['eval'][f'{name}_nll'],
        perplexity=result['eval'][f'{name}_perplexity'],
        tokens=int(result['eval'][f'{name}_tokens']),
    )
  return entry


def _check_output_dir(settings: Settings) -> Dict[str, Any]:
  """Records the settings; returns the finished models of an earlier run.

  Raises:
    ValueError: `--output_dir` holds a run with other settings.
  """
  tf.io.gfile.makedirs(settings.output_dir)
  settings_path = os.path.join(settings.output_dir, 'settings.json')
  current = json.loads(json.dumps(dataclasses.asdict(settings)))
  if tf.io.gfile.exists(settings_path):
    saved = json_files.read_json(settings_path)
    differences = sorted(
        k for k in set(saved) | set(current) if saved.get(k) != current.get(k)
    )
    if differences:
      raise ValueError(
          f'--output_dir {settings.output_dir} holds a run with other '
          'settings ('
          + ', '.join(
              f'--{k}: {saved.get(k)!r} there, {current.get(k)!r} now'
              for k in differences
          )
          + '); use a new --output_dir.'
      )
  else:
    json_files.write_json(settings_path, current, sort_keys=False)
  results_path = os.path.join(settings.output_dir, 'results.json')
  return json_files.read_json(results_path, default=dict(models={}))['models']


def _data_stats(settings: Settings, corpus) -> Dict[str, Any]:
  """The corpus's counts, its split and the training windows and epochs."""
  train_stats = wikitext.window_stats(
      len(corpus.train), settings.seq_length, settings.batch_size, training=True
  )
  return dict(
      corpus.stats,
      split=corpus.split_note,
      train_windows=dataclasses.asdict(train_stats),
      epochs=(
          settings.train_steps * settings.batch_size / train_stats.windows
          if train_stats.windows
          else None
      ),
  )


def _train_model(
    settings: Settings,
    architecture: str,
    vocab_size: int,
    transformer_parameters: Optional[int],
) -> Dict[str, Any]:
  """One architecture's `results.json` entry, trained and scored now."""
  sizes = _values(settings, _SIZE_NAMES)
  if architecture == 'mixed' and settings.match_parameters:
    if transformer_parameters is None:
      transformer_parameters = parameter_count(
          settings, 'transformer', vocab_size, sizes
      )
    sizes = matched_mixed_sizes(settings, vocab_size, transformer_parameters)
  logging.info('%s: %s.', architecture, sizes)
  entry = dict(sizes=sizes, **train_and_evaluate(settings, architecture, sizes))
  for name in ('valid', 'test'):
    if name in entry:
      logging.info(
          '%s %s perplexity %.2f',
          architecture,
          name,
          entry[name]['perplexity'],
      )
  return entry


def run(settings: Settings) -> Dict[str, Any]:
  """Trains and scores every architecture; writes results.json as it goes."""
  # The task reads the same corpus (one read per process).
  corpus = causal_lm_task.load_corpus(
      causal_lm_task.CausalLMDataConfig(**_values(settings, _DATA_NAMES))
  )
  results = dict(
      settings=dataclasses.asdict(settings),
      data=_data_stats(settings, corpus),
      models={},
      published=dict(
          table='002 rebuttal Table 3 (WikiText-103)',
          perplexity={k: published_perplexity(k) for k in PUBLISHED},
          sizes=PUBLISHED_SIZES,
      ),
  )
  finished = _check_output_dir(settings)
  transformer_parameters = None
  for architecture in settings.architectures:
    if architecture in finished:
      logging.info('%s: finished in an earlier run; read back.', architecture)
      entry = finished[architecture]
    else:
      entry = _train_model(
          settings, architecture, len(corpus.vocab), transformer_parameters
      )
    if architecture == 'transformer':
      transformer_parameters = entry['parameters']
    results['models'][architecture] = entry
    if architecture not in finished:
      json_files.write_json(
          os.path.join(settings.output_dir, 'results.json'),
          results,
          sort_keys=False,
      )
  return results


def _table_row(
    architecture: str, entry: Dict[str, Any], settings, has_test: bool
) -> List[str]:
  """One model's row of `format_table`."""
  sizes = entry['sizes']
  heads = settings['num_attention_heads']
  if architecture == 'mixed':
    kept = max(1, heads // settings['head_ratio'])
    heads = f'{kept} attn + {kept} conv'
  row = [
      PUBLISHED[architecture][0],
      f'{sizes["hidden_size"]} x {sizes["num_layers"]} ({heads})',
      f'{entry["parameters"] / 1e6:.3f}M',
      f'{entry["non_embedding_parameters"] / 1e6:.3f}M',
      f'{entry["valid"]["perplexity"]:.2f}',
  ]
  if has_test:
    row.append(f'{entry["test"]["perplexity"]:.2f}' if 'test' in entry else '-')
  tokens_per_second = entry['train_tokens_per_second']
  return row + [
      f'{tokens_per_second:,.0f}' if tokens_per_second else '-',
      f'{published_perplexity(architecture):.2f}',
  ]


def _table_notes(results: Dict[str, Any]) -> List[str]:
  """The data and training lines under the table."""
  data, settings = results['data'], results['settings']
  valid = data['valid']['encoding']
  bias = 'log unigram' if settings['unigram_output_bias'] else 'zero'
  return [
      f'Data: {data["split"]} Vocabulary {data["vocab"]["size"]:,} '
      f'(cap removed {data["vocab"]["capped_types"]:,} word types); train '
      f'{data["train"]["encoding"]["tokens"]:,} tokens '
      f'({data["epochs"]:.2f} epochs), valid {valid["tokens"]:,} tokens '
      f'({valid["oov_tokens"]:,} not in the vocabulary -> <unk>).',
      f'Post-LN blocks, {bias} initial output bias; '
      f'{settings["train_steps"]} steps of '
      f'{settings["batch_size"]} x {settings["seq_length"]} tokens, '
      f'{settings["optimizer"]} at {settings["learning_rate"]:g}.',
      f'Published sizes: {results["published"]["sizes"]}',
      'Our corpus, vocabulary and training are far smaller than '
      "WikiText-103's: compare the ratio, not the perplexities.",
  ]


def format_table(results: Dict[str, Any]) -> str:
  """The markdown table of our perplexities beside 002's Table 3."""
  models = results['models']
  has_test = any('test' in entry for entry in models.values())
  header = (
      'model|H x L (heads)|params|non-embedding params|valid ppl (ours)'
      + ('|test ppl (ours)' if has_test else '')
      + '|train tokens/s|ppl (002 Table 3, WikiText-103)'
  ).split('|')
  rows = [
      _table_row(architecture, entry, results['settings'], has_test)
      for architecture, entry in models.items()
  ]
  lines = markdown.table(header, rows)
  if {'transformer', 'mixed'} <= set(models):
    ours = (
        models['mixed']['valid']['perplexity']
        / models['transformer']['valid']['perplexity']
    )
    paper = published_perplexity('mixed') / published_perplexity('transformer')
    lines.append(
        f'\nmixed / transformer perplexity: ours {ours:.3f}, '
        f'002 {paper:.3f}.'
    )
  return '\n'.join(lines + _table_notes(results))


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  settings = settings_from_flags()
  results = run(settings)
  table = format_table(results)
  json_files.write_text(
      os.path.join(settings.output_dir, 'table.md'), table + '\n'
  )
  print(table)


if __name__ == '__main__':
  define_flags()
  cli.run(main)
