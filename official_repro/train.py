r"""Pretrains or evaluates a model described by gin files.

Usage:
  python -m official_repro.train \
    --gin_file=gin/papers/001_ale/bert_small.gin \
    --gin_param="pretrain_data.input_path='/data/records'" \
    --model_dir=/tmp/bert_small --mode=train_and_eval --strategy=one_device

A killed run resumes from the latest checkpoint in --model_dir. On SIGTERM
(a Spot VM or a scheduler taking the host away) the run saves a checkpoint at
the end of the current training loop and exits with status 143
(`EXIT_STOPPED`); rerunning the same command continues from that checkpoint.
The run writes `config.gin`, `operative_config.gin`, `params.yaml` and
`model_config.json` into --model_dir and prints its results followed by the
operative gin config.

Several hosts: run the same command on every host with
--strategy=multi_worker_mirrored and each host's `TF_CONFIG`
(`{"cluster": {"worker": [...]}, "task": {"type": "worker", "index": i}}`).
"""

import json
import os
import sys

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')

# pylint: disable=g-import-not-at-top,wrong-import-position
from absl import app
from absl import flags
from absl import logging
import gin

from official_repro.training import distribute
from official_repro.training import experiment
from official_repro.training import gin_utils
from official_repro.training import trainer as trainer_lib

FLAGS = flags.FLAGS

flags.DEFINE_multi_string('gin_file', [], 'Gin config files, in order.')
flags.DEFINE_multi_string('gin_param', [],
                          'Gin bindings applied after the files.')
flags.DEFINE_string('model_dir', None, 'Checkpoints, summaries and configs.')
flags.DEFINE_enum('mode', 'train_and_eval', list(experiment.MODES),
                  'What to run.')
distribute.define_flags()

# Exit status of a run stopped by a signal after saving its checkpoint: 128 +
# SIGTERM, what a shell reports for a process SIGTERM ended; run_tpu.sh's
# supervisor relaunches a run that ended with it.
EXIT_STOPPED = 128 + 15


def main(argv):
  del argv
  if not FLAGS.model_dir:
    raise app.UsageError('--model_dir is required.')
  if not FLAGS.gin_file:
    raise app.UsageError('--gin_file is required (see gin/).')
  strategy = distribute.strategy_from_flags()
  gin_utils.parse_config(FLAGS.gin_file, FLAGS.gin_param)
  with gin.unlock_config():
    params, settings = experiment.experiment_config()
  # The trainer checkpoints and stops on SIGTERM under every strategy
  # (trainer.stop_on_signal); Model Garden's on-demand preemption checkpoint
  # would replace that handler under multi_worker_mirrored and keep training
  # after its save (see trainer.py's module docstring).
  params.trainer.preemption_on_demand_checkpoint = False
  try:
    with trainer_lib.stop_on_signal():
      result = experiment.run(params, settings, strategy, FLAGS.model_dir,
                              FLAGS.mode)
  except trainer_lib.TrainingStopped as stopped:
    logging.warning('%s', stopped)
    print(json.dumps(dict(stopped_by=stopped.signal_name,
                          global_step=stopped.step,
                          checkpoint=stopped.checkpoint), indent=2))
    sys.exit(EXIT_STOPPED)
  logging.info('Result: %s', result)
  print(json.dumps(result, indent=2, sort_keys=True))
  print('Operative gin config:')
  print(gin.operative_config_str())


if __name__ == '__main__':
  app.run(main)
