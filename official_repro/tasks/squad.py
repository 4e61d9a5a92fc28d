"""SQuAD 1.1 and 2.0 extractive question answering.

`<data_dir>/{train,dev}-v1.1.json` ('squad11') or `-v2.0.json` ('squad20'),
cut into windows; Model Garden's `BertSpanLabeler` scores start and end,
trained with the mean of the two cross-entropies ([CLS] when no answer).
The best span per question is scored by the official evaluators; for 2.0
`best_exact`/`best_f1` at the dev-chosen null threshold are reported.
"""

import dataclasses
import os
from typing import Dict, Mapping, Tuple

import numpy as np
import tensorflow as tf
import tf_keras

from official.nlp.modeling import models
from official_repro.data import squad as squad_data
from official_repro.metrics import squad_metrics
from official_repro.tasks import finetuning_base
from official_repro.tasks import finetuning_registry

VERSIONS = {'squad11': ('v1.1', False), 'squad20': ('v2.0', True)}
FEATURE_INDEX_KEY = 'feature_index'


@dataclasses.dataclass
class SquadTaskConfig(finetuning_base.FinetuneTaskConfig):
  """SQuAD settings beyond the shared ones (lengths in wordpieces).

  `doc_stride`: between adjacent context windows; `n_best_size`: start and
  end candidates tried per window.
  """

  doc_stride: int = 128
  max_query_length: int = 64
  n_best_size: int = 20
  max_answer_length: int = 30


@finetuning_registry.register(tuple(VERSIONS), SquadTaskConfig, 'squad')
class SquadTask(finetuning_base.FinetuneTask):
  """SQuAD fine-tuning (see module docstring)."""

  eval_output_keys = ('start_logits', 'end_logits')
  eval_label_keys = (FEATURE_INDEX_KEY,)

  @property
  def version_2_with_negative(self) -> bool:
    return VERSIONS[self.task_config.task][1]

  def data_file(self, split: str) -> str:
    version = VERSIONS[self.task_config.task][0]
    return os.path.join(self.task_config.data_dir, f'{split}-{version}.json')

  def feature_options(self):
    config = self.task_config
    return (config.doc_stride, config.max_query_length)

  def label_keys(self) -> Tuple[str, ...]:
    return ('start_positions', 'end_positions', FEATURE_INDEX_KEY)

  def read_features(self, split: str):
    """Windows of `split`; metadata is (examples, window metadata)."""
    config = self.task_config
    is_training = split == 'train'
    examples, _ = squad_data.read_examples(
        self.data_file(split), self.version_2_with_negative, is_training
    )
    features, metadata = squad_data.convert_to_features(
        examples,
        self.tokenizer,
        config.max_seq_length,
        config.doc_stride,
        config.max_query_length,
        is_training,
    )
    num_windows = len(features['input_word_ids'])
    features[FEATURE_INDEX_KEY] = np.arange(num_windows, dtype=np.int32)
    if not is_training:  # Positions are unused for dev; keep one layout.
      features['start_positions'] = np.zeros(num_windows, np.int32)
      features['end_positions'] = np.zeros(num_windows, np.int32)
    return features, (examples, metadata)

  def build_head(self, encoder: tf_keras.Model) -> tf_keras.Model:
    """`BertSpanLabeler` with its two outputs named."""
    labeler = models.BertSpanLabeler(
        network=encoder, initializer=self.head_initializer()
    )
    start_logits, end_logits = labeler.outputs
    return tf_keras.Model(
        inputs=labeler.inputs,
        outputs=dict(start_logits=start_logits, end_logits=end_logits),
    )

  def build_losses(self, labels, model_outputs, aux_losses=None) -> tf.Tensor:
    losses = []
    for side in ('start', 'end'):
      losses.append(
          tf.reduce_mean(
              tf_keras.losses.sparse_categorical_crossentropy(
                  labels[f'{side}_positions'],
                  tf.cast(model_outputs[f'{side}_logits'], tf.float32),
                  from_logits=True,
              )
          )
      )
    loss = (losses[0] + losses[1]) / 2.0
    return finetuning_base.plus_aux_losses(loss, aux_losses)

  def compute_metrics(
      self, outputs: Mapping[str, np.ndarray]
  ) -> Dict[str, float]:
    """Official EM/F1 (percent) over the dev questions."""
    config = self.task_config
    examples, metadata = self.load_features('dev')[1]
    order = np.argsort(outputs[FEATURE_INDEX_KEY])
    predictions, null_score_diffs = squad_data.extract_answers(
        examples,
        metadata,
        outputs['start_logits'][order],
        outputs['end_logits'][order],
        n_best_size=config.n_best_size,
        max_answer_length=config.max_answer_length,
        version_2_with_negative=self.version_2_with_negative,
        do_lower_case=config.lower_case,
    )
    dev_file = self.data_file('dev')
    if not self.version_2_with_negative:
      scores = squad_metrics.evaluate_v1(dev_file, predictions)
    else:
      scores = squad_metrics.evaluate_v2(
          dev_file, predictions, null_score_diffs
      )
      scores['exact_at_threshold_0'] = scores.pop('exact')
      scores['f1_at_threshold_0'] = scores['f1']
      scores['exact_match'] = scores['best_exact']
      scores['f1'] = scores['best_f1']
    return {key: float(value) for key, value in scores.items()}

  def headline_metric(self) -> str:
    return 'f1'
