"""Does a pretrained masked LM use word order? Held-out text, then shuffled.

Evaluates a run twice on an eval split with the same masks: as written, and
with each segment's tokens shuffled (`data.word_shuffle`; markers, padding
and masked positions stay). A model that predicts from context loses
accuracy on shuffled text; beside each score is the best a context-free
model reaches on the same slots (`metrics.context_free`).
"""

import os
import tempfile
from typing import Dict, Optional

import numpy as np
import tensorflow as tf

from official_repro.data import records as records_lib
from official_repro.data import word_shuffle
from official_repro.metrics import context_free
from official_repro.training import saved_runs


def _special_ids(metadata) -> np.ndarray:
  return np.array(sorted(set(metadata['special_token_ids'].values())))


def shuffled_copy(record_dir: str, output_dir: str, seed: int = 0) -> str:
  """Writes the eval split of `record_dir` with each segment's tokens shuffled.

  Only dynamically masked records (stored masks name positions of the
  original order); the copy's train split is empty. Returns `output_dir`.
  """
  metadata = records_lib.load_metadata(record_dir)
  if metadata['masking'] != 'dynamic':
    raise ValueError(
        f'{record_dir}: word order is tested on dynamically '
        'masked records; these are statically masked.'
    )
  features = word_shuffle.shuffle_segments(
      records_lib.read_split(record_dir, 'eval'), _special_ids(metadata), seed
  )
  shuffled = features['input_ids']
  tf.io.gfile.makedirs(output_dir)
  files = records_lib.write_split(output_dir, 'eval', features, 1)
  tf.io.gfile.copy(
      os.path.join(record_dir, metadata['vocab_file']),
      os.path.join(output_dir, metadata['vocab_file']),
      overwrite=True,
  )
  copy = dict(
      metadata,
      splits=dict(
          train=dict(files=[], num_examples=0),
          eval=dict(files=files, num_examples=len(shuffled)),
      ),
      source=dict(shuffled_from=record_dir, seed=seed),
  )
  records_lib.write_metadata(output_dir, copy)
  return output_dir


def evaluate(
    model_dir: str,
    record_dir: str,
    steps: int,
    checkpoint: Optional[str] = None,
    ceiling_records: Optional[str] = None,
) -> Dict[str, float]:
  """A run's eval metrics on `steps` batches (-1: all), beside the ceiling.

  `ceiling_records` (default `record_dir`): whose training split fixes the
  context-free ceiling (`context_free.masked_lm_report`).
  """
  checkpoint = checkpoint or tf.train.latest_checkpoint(model_dir)
  if checkpoint is None:
    raise FileNotFoundError(f'--model_dir {model_dir} holds no checkpoint.')
  params, task = saved_runs.pretraining_task(model_dir, record_dir)
  model = task.build_model()
  dataset = task.build_inputs(params.task.validation_data)
  if steps > 0:
    dataset = dataset.take(steps)
  metrics = task.build_metrics(training=False)
  step = tf.function(lambda batch: task.validation_step(batch, model, metrics))
  logits = tf.function(lambda batch: model(batch, training=False)['mlm_logits'])
  restored = False
  batches, predictions = [], []
  for batch in dataset:
    if not restored:
      model(batch, training=False)
      tf.train.Checkpoint(model=model).read(
          checkpoint
      ).assert_existing_objects_matched().expect_partial()
      restored = True
    step(batch)
    batches.append({k: v.numpy() for k, v in batch.items()})
    predictions.append(np.argmax(logits(batch).numpy(), axis=-1))
  data = params.task.validation_data
  by_batch = iter(predictions)
  slots = context_free.masked_lm_report(
      lambda batch: next(by_batch),
      batches,
      context_free.ContextFreePredictor.from_records(
          ceiling_records or record_dir,
          data.mask_token_fraction,
          data.random_token_fraction,
      ),
  )
  return dict(
      {metric.name: float(metric.result()) for metric in metrics}, **slots
  )


def word_order(
    model_dir: str, record_dir: str, steps: int = 50, seed: int = 0
) -> Dict[str, object]:
  """A run's held-out metrics in order and shuffled, each with its ceiling."""
  with tempfile.TemporaryDirectory() as scratch:
    shuffled = shuffled_copy(
        record_dir, os.path.join(scratch, 'shuffled'), seed
    )
    return dict(
        model_dir=model_dir,
        records=record_dir,
        steps=steps,
        checkpoint=tf.train.latest_checkpoint(model_dir),
        in_order=evaluate(model_dir, record_dir, steps),
        shuffled=evaluate(
            model_dir, shuffled, steps, ceiling_records=record_dir
        ),
    )


def format_result(result: Dict[str, object]) -> str:
  """The accuracies in order and shuffled, each beside its ceiling."""
  lines = []
  for name, label in (('in_order', 'in order'), ('shuffled', 'shuffled')):
    scores = result[name]
    lines.append(
        f'held-out, {label}: masked-LM accuracy '
        f'{scores["masked_lm_accuracy"]:.4f} (without context at most '
        f'{scores["context_free"]:.4f}); on [MASK] slots '
        f'{scores["mask_token_accuracy"]:.4f} (without context at most '
        f'{scores["mask_token_context_free"]:.4f})'
    )
  return '\n'.join(lines)
