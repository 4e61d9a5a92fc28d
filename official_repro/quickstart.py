r"""The no-download first run: corpus -> vocab -> records -> pretrain -> eval.

  python -m official_repro.quickstart [--work_dir=runs/quickstart]

Writes an English corpus from text shipped with Python (pydoc topics and
docstrings), learns a WordPiece vocabulary, writes masked records, pretrains
`gin/quickstart.gin`'s small BERT (minutes on 2 CPU cores), and evaluates
masked-LM accuracy in order and word-shuffled, each beside the context-free
ceiling (`training.word_order`). Running it again resumes the same run.
"""

import os
import time

from absl import flags
from absl import logging
import gin
import tensorflow as tf

from official_repro.common import cli
from official_repro.common import json_files
from official_repro.data import builtin_corpus
from official_repro.data import create_pretraining_data
from official_repro.data import records
from official_repro.data import vocab as vocab_lib
from official_repro.training import distribute
from official_repro.training import experiment
from official_repro.training import gin_utils
from official_repro.training import word_order

FLAGS = flags.FLAGS
flags.DEFINE_string(
    'work_dir', 'runs/quickstart', 'Corpus, records and model go here.'
)
flags.DEFINE_integer(
    'vocab_size',
    2000,
    'WordPiece vocabulary size, more than the special tokens.',
    lower_bound=len(vocab_lib.SPECIAL_TOKENS) + 1,
)
flags.DEFINE_multi_string(
    'gin_param', [], 'Extra gin bindings on top of gin/quickstart.gin.'
)
flags.DEFINE_enum(
    'strategy',
    'one_device',
    list(distribute.STRATEGIES),
    'Distribution strategy.',
)

QUICKSTART_GIN = os.path.join(gin_utils.REPO_ROOT, 'gin', 'quickstart.gin')


def prepare_records(work_dir: str, vocab_size: int, max_seq_length: int) -> str:
  """Builds the corpus and records once; returns the record directory."""
  record_dir = os.path.join(work_dir, 'records')
  if tf.io.gfile.exists(os.path.join(record_dir, records.METADATA_FILENAME)):
    logging.info('Reusing records in %s', record_dir)
    return record_dir
  corpus_dir = os.path.join(work_dir, 'corpus')
  builtin_corpus.write_builtin_corpus(corpus_dir)
  metadata = create_pretraining_data.prepare_pretraining_data(
      [corpus_dir],
      record_dir,
      vocab_size=vocab_size,
      max_seq_length=max_seq_length,
      masking='dynamic',
      eval_fraction=0.1,
      num_shards=2,
      seed=1,
  )
  print(create_pretraining_data.format_report(metadata))
  return record_dir


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  started = time.perf_counter()
  record_dir = os.path.join(FLAGS.work_dir, 'records')
  gin_utils.parse_config(
      [QUICKSTART_GIN],
      [f'pretrain_data.input_path = {record_dir!r}'] + FLAGS.gin_param,
  )
  prepare_records(
      FLAGS.work_dir,
      FLAGS.vocab_size,
      gin.query_parameter('pretrain_data.max_seq_length'),
  )
  data_seconds = time.perf_counter() - started

  strategy = distribute.get_strategy(FLAGS.strategy)
  with gin.unlock_config():
    params, settings = experiment.experiment_config()
  model_dir = os.path.join(FLAGS.work_dir, 'model')
  train_started = time.perf_counter()
  result = experiment.run(
      params, settings, strategy, model_dir, mode='train_and_eval'
  )
  train_seconds = time.perf_counter() - train_started
  context = word_order.word_order(model_dir, record_dir, steps=-1)
  metadata = records.load_metadata(record_dir)
  print(
      format_summary(
          result, metadata, params, data_seconds, train_seconds, context
      )
  )
  json_files.write_json(
      os.path.join(model_dir, 'quickstart_summary.json'),
      dict(
          result,
          data_seconds=data_seconds,
          train_seconds=train_seconds,
          seconds=time.perf_counter() - started,
          word_order=context,
      ),
      sort_keys=False,
  )


def format_summary(
    result, metadata, params, data_seconds, train_seconds, context
):
  """The human-readable end-of-run summary."""
  batch = params.task.train_data.global_batch_size
  in_order, shuffled = context['in_order'], context['shuffled']
  train_examples = metadata['splits']['train']['num_examples']
  eval_examples = metadata['splits']['eval']['num_examples']
  lines = [
      '',
      '=== official_repro quickstart: masked-LM pretraining ===',
      f'data:        {train_examples} train / {eval_examples} held-out '
      f'sequences of {metadata["max_seq_length"]} tokens, vocab '
      f'{metadata["vocab_size"]} ({data_seconds:.0f} s to build)',
      f'model:       BERT, {result["num_params"] / 1e6:.2f}M parameters',
      f'training:    {result["global_step"]} steps of batch {batch} in '
      f'{train_seconds:.0f} s (incl. tracing, compiling and evaluation)',
      (
          f'throughput:  {result["train"]["examples_per_second"]:.1f} '
          'examples/s over the last training loop'
          if result['train'].get('examples_per_second')
          else 'throughput:  none measured (no steps left to train: resumed '
          'from the finished run)'
      ),
      f'held-out:    masked-LM accuracy {in_order["accuracy"]:.4f} on '
      f'{in_order["slots"]} masked slots, {in_order["mask_token_accuracy"]:.4f}'
      f' on the {in_order["mask_token_slots"]} shown as [MASK]',
      f'no context:  {in_order["context_free"]:.4f} and '
      f'{in_order["mask_token_context_free"]:.4f}, the best a model that '
      'ignores context scores on these slots (copy the shown token; behind '
      '[MASK], the most frequent training token)',
      f'shuffled:    {shuffled["accuracy"]:.4f} and '
      f'{shuffled["mask_token_accuracy"]:.4f} with the words of each segment '
      'shuffled (the same masks)',
      f'context:     {in_order["accuracy"] - in_order["context_free"]:+.4f} '
      'over no context, '
      f'{in_order["accuracy"] - shuffled["accuracy"]:+.4f} over shuffled '
      f'(loss {in_order["lm_example_loss"]:.3f} in order, '
      f'{shuffled["lm_example_loss"]:.3f} shuffled)',
      f'checkpoint:  {result["checkpoint"]}',
      f'logs:        tensorboard --logdir {result["model_dir"]}',
      f'gin config:  {result["operative_config"]}',
  ]
  return '\n'.join(lines)


if __name__ == '__main__':
  cli.run(main)
