"""Does a pretrained masked LM use word order? Held-out text, then shuffled.

Evaluates a run's checkpoint on the eval split of a record directory twice,
with the same dynamic masks: as written, and with the tokens of each segment
shuffled (`official_repro.data.word_shuffle`: the [CLS]/[SEP] markers,
padding and segment lengths stay in place, so the masked positions are the
same). A model that predicts from context loses accuracy on the shuffled
text; one that has learned only which tokens are frequent (or which occur
together, whatever their order) scores the same on both. Beside each it
gives the accuracy on the slots shown as [MASK] alone, and the best a model
that ignores context scores on those very slots
(`official_repro.metrics.context_free`: copy the shown token, and behind
[MASK] the most frequent training token).

The quickstart prints this after training; `experiments/word_order.py` runs
it on any pretraining run.
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

  Args:
    record_dir: a dynamically masked record directory.
    output_dir: where the copy goes (its train split is empty).
    seed: seeds the permutations.

  Returns:
    `output_dir`.

  Raises:
    ValueError: for statically masked records (their stored masks name
      positions of the original order).
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
  """A pretraining run's metrics on an eval split, beside the ceiling.

  Args:
    model_dir: the run (its `config.gin` says what model it trained).
    record_dir: records with the run's vocabulary and sequence length.
    steps: eval batches (-1: the whole split).
    checkpoint: the checkpoint prefix (default: the run's latest).
    ceiling_records: the records whose training split fixes the context-free
      ceiling (default: `record_dir`).

  Returns:
    {metric: value}: the run's own evaluation metrics, and those of
    `context_free.masked_lm_report` on the same masked slots.
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
  """A pretraining run's held-out metrics in order and shuffled.

  Each with the context-free ceiling of its slots (`evaluate`).
  """
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
