r"""One worker of the two-process MultiWorkerMirroredStrategy test.

Run by tests/training/test_multi_worker.py, once per worker, with that
worker's `TF_CONFIG`:

  python tests/training/multi_worker_main.py RECORDS MODEL_DIR OUT_JSON

Builds the strategy the way `--strategy=multi_worker_mirrored` does, records
which evaluation examples and first training batch this worker's input
pipeline yields (through the strategy's own `InputContext`), then trains the
tiny masked-LM config with `official_repro.train.run` and writes all of it,
with the run's summary, to OUT_JSON.
"""

import json
import os
import sys

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')

# The strategy must exist before the imports below start TensorFlow's runtime.
# pylint: disable=g-import-not-at-top,wrong-import-position
# ruff: noqa: E402
from official_repro.training import distribute

STRATEGY = distribute.get_strategy('multi_worker_mirrored')

import gin
import tensorflow as tf

from official_repro import train
from official_repro.data import pretrain_dataloader
from official_repro.training import experiment
from official_repro.training import gin_utils

GIN_FILES = ('gin/sizes/tiny.gin', 'gin/pretrain/masked_lm.gin')


def gin_params(records):
  return [
      f'pretrain_data.input_path = {records!r}',
      'pretrain_data.max_seq_length = 32',
      'pretrain_data.train_batch_size = 8',
      'pretrain_data.eval_batch_size = 4',
      'experiment.train_steps = 3',
      'experiment.steps_per_loop = 1',
      'experiment.checkpoint_interval = 1',
      'optimization.learning_rate = 1e-3',
  ]


def shard_of(config):
  """This worker's input context and the batches its pipeline yields."""
  seen = {}

  def dataset_fn(context):
    dataset = pretrain_dataloader.PretrainDataLoader(config).load(context)
    seen.update(
        pipeline_id=context.input_pipeline_id,
        num_pipelines=context.num_input_pipelines,
        per_replica_batch_size=context.get_per_replica_batch_size(
            config.global_batch_size
        ),
    )
    seen['dataset'] = dataset
    return dataset

  STRATEGY.distribute_datasets_from_function(dataset_fn)
  dataset = seen.pop('dataset')
  if config.is_training:
    dataset = dataset.take(1)
  batches = [batch['input_word_ids'].numpy().tolist() for batch in dataset]
  return seen, batches


def main(records, model_dir, out_path):
  gin_files = [os.path.join(gin_utils.REPO_ROOT, f) for f in GIN_FILES]
  gin_utils.parse_config(gin_files, gin_params(records))
  with gin.unlock_config():
    params, _ = experiment.experiment_config()
  gin.clear_config()
  train_context, train_batches = shard_of(params.task.train_data)
  eval_context, eval_batches = shard_of(params.task.validation_data)
  result = train.run(
      STRATEGY, gin_files, gin_params(records), model_dir, 'train'
  )
  with open(out_path, 'w') as f:
    json.dump(
        dict(
            task_id=STRATEGY.cluster_resolver.task_id,
            train_context=train_context,
            train_batches=train_batches,
            eval_context=eval_context,
            eval_batches=eval_batches,
            result=result,
        ),
        f,
    )


if __name__ == '__main__':
  tf.get_logger().setLevel('ERROR')
  main(*sys.argv[1:])
