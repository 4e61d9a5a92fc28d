r"""Pretrains or evaluates a model described by gin files.

  python -m official_repro.train \
    --gin_file=gin/papers/001_ale/bert_small.gin \
    --gin_param="pretrain_data.input_path='/data/records'" \
    --model_dir=/tmp/bert_small --mode=train_and_eval --strategy=one_device

A run resumes from the latest checkpoint in --model_dir; Ctrl-C or SIGTERM
saves a checkpoint and exits with 130 or 143 (`preemption.EXIT_STOPPED`).
The run writes its configs into --model_dir and prints its results and the
operative gin config. Several hosts: the same command on each with
--strategy=multi_worker_mirrored and its `TF_CONFIG`.
"""

import dataclasses
import json
from typing import Any, Dict, Optional, Sequence

from absl import app
from absl import flags
from absl import logging
import gin
import tensorflow as tf

from official_repro.common import cli
from official_repro.tasks import objectives
from official_repro.training import distribute
from official_repro.training import experiment
from official_repro.training import gin_utils
from official_repro.training import precision
from official_repro.training import preemption
from official_repro.training import warm_start

FLAGS = flags.FLAGS

flags.DEFINE_multi_string('gin_file', [], 'Gin config files, in order.')
flags.DEFINE_multi_string(
    'gin_param', [], 'Gin bindings applied after the files.'
)
flags.DEFINE_string('model_dir', None, 'Checkpoints, summaries and configs.')
flags.DEFINE_enum(
    'mode', 'train_and_eval', list(experiment.MODES), 'What to run.'
)
flags.DEFINE_string(
    'init_checkpoint',
    None,
    'Start the encoder (and an MLM head on it) from this: an export, a '
    'pretraining run, or a release (Hugging Face folder, TF1 ELECTRA or '
    'ConvBERT, Model Garden TEAMS); ignored once the run has a checkpoint.',
)
flags.DEFINE_boolean(
    'check_config',
    False,
    'Only parse the gin config (names, values, the objective) and exit; '
    'reads no data (run_tpu.sh runs this locally before it creates a VM).',
)
distribute.define_flags()
precision.define_flags()


def run(
    strategy,
    gin_files: Sequence[str],
    gin_params: Sequence[str],
    model_dir: str,
    mode: str,
    mixed_precision: str = 'auto',
    init_checkpoint: Optional[str] = None,
) -> Dict[str, Any]:
  """Parses the gin config and runs its experiment (`experiment.run`)."""
  gin_utils.parse_config(gin_files, gin_params)
  with gin.unlock_config():
    params, settings = experiment.experiment_config()
  settings = dataclasses.replace(
      settings, mixed_precision=precision.resolve(mixed_precision, strategy)
  )
  if init_checkpoint:
    params.task.init_checkpoint = warm_start.check(params, init_checkpoint)
  # Model Garden's on-demand checkpoint would replace preemption's handler
  # under multi_worker_mirrored and keep training after its save.
  params.trainer.preemption_on_demand_checkpoint = False
  return experiment.run(params, settings, strategy, model_dir, mode)


def check_config(gin_files: Sequence[str], gin_params: Sequence[str]) -> str:
  """Parses the gin config; the name of the known objective it selects."""
  gin_utils.parse_config(gin_files, gin_params)
  try:
    name = gin.query_parameter('experiment.objective')
  except ValueError:
    raise cli.UserError(
        'the gin config sets no experiment.objective; '
        'include a gin/pretrain/<objective>.gin file.'
    ) from None
  objectives.get(name)
  return name


def validate(
    gin_files: Sequence[str],
    gin_params: Sequence[str],
    model_dir: str,
    mode: str,
) -> None:
  """Checks the gin config, its records and an eval checkpoint up front."""
  check_config(gin_files, gin_params)
  try:
    with gin.unlock_config():
      experiment.experiment_config()
  finally:
    gin.clear_config()
  if mode == 'eval' and not tf.train.latest_checkpoint(model_dir):
    raise cli.UserError(
        f'--mode=eval: --model_dir {model_dir} holds no checkpoint '
        '(ckpt-<step>) to evaluate; train first, or give the directory of a '
        'trained run.'
    )


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  if FLAGS.check_config:
    objective = check_config(FLAGS.gin_file, FLAGS.gin_param)
    print(f'gin config parses; objective {objective!r}.')
    return
  if not FLAGS.model_dir:
    raise app.UsageError('--model_dir is required.')
  validate(FLAGS.gin_file, FLAGS.gin_param, FLAGS.model_dir, FLAGS.mode)
  strategy = distribute.strategy_from_flags()
  try:
    result = run(
        strategy,
        FLAGS.gin_file,
        FLAGS.gin_param,
        FLAGS.model_dir,
        FLAGS.mode,
        FLAGS.mixed_precision,
        FLAGS.init_checkpoint,
    )
  except preemption.TrainingStopped as stopped:
    stop = dict(
        stopped_by=stopped.signal_name,
        global_step=stopped.step,
        checkpoint=stopped.checkpoint,
    )
    print(json.dumps(stop, indent=2))
    raise
  logging.info('Result: %s', result)
  print(json.dumps(result, indent=2, sort_keys=True))
  print('Operative gin config:')
  print(gin.operative_config_str())


if __name__ == '__main__':
  cli.require_flags('gin_file')
  cli.run(main)
