"""GLUE fine-tuning: sentence(-pair) classification and STS-B regression.

Model Garden's `BertClassifier` with `glue.head`: 'encoder_pooler' (the
encoder's pooled [CLS]), 'head_pooler' (the head's own, as Model Garden's
sentence-prediction task) or 'first_token' (the original ELECTRA/ConvBERT
head). STS-B is trained with mean squared error; 'dev' is every labelled dev
file (MNLI's two scored separately). Options of google-research/electra:
`double_unordered` (MRPC, STS-B pairs again swapped, after the originals) and
`scale_stsb_targets` (scores / 5).
"""

import dataclasses
from typing import Dict, Mapping

import numpy as np
import tensorflow as tf
import tf_keras

from official.nlp.modeling import models
from official_repro.common import cli
from official_repro.data import glue as glue_data
from official_repro.metrics import glue_metrics
from official_repro.modeling.heads import first_token
from official_repro.tasks import finetuning_base
from official_repro.tasks import finetuning_registry

DEV_SPLIT = 'dev'
TRAIN_SPLIT = 'train'
# The pair tasks `double_unordered` swaps, as the original code does.
UNORDERED_PAIR_TASKS = ('mrpc', 'stsb')
# STS-B's score range, [0, 5]; `scale_stsb_targets` maps it to [0, 1].
STSB_MAX_SCORE = 5.0
# `glue.head` (module docstring).
HEADS = ('encoder_pooler', 'head_pooler', 'first_token')
# Index of each example's dev file (MNLI: 0 matched, 1 mismatched).
EVAL_SPLIT_KEY = 'eval_split'


@dataclasses.dataclass
class GlueTaskConfig(finetuning_base.FinetuneTaskConfig):
  """GLUE settings beyond the shared ones (`stsb_metric`: `run_protocol`'s)."""

  stsb_metric: str = 'spearman'
  double_unordered: bool = False
  scale_stsb_targets: bool = False
  head: str = 'encoder_pooler'

  def __post_init__(self, *args):
    super().__post_init__(*args)
    if self.head not in HEADS:
      raise cli.UserError(
          f'glue.head must be one of {HEADS}, got {self.head!r}.'
      )


@finetuning_registry.register(
    glue_data.GLUE_TASK_NAMES,
    GlueTaskConfig,
    'glue',
    protocol_fields=('stsb_metric',),
    group='glue',
    single_segment=glue_data.SINGLE_SENTENCE_TASK_NAMES,
)
class GlueTask(
    finetuning_base.AccuracyMetricMixin, finetuning_base.FinetuneTask
):
  """One GLUE task (see module docstring)."""

  eval_output_keys = ('logits',)
  eval_label_keys = ('label_ids', EVAL_SPLIT_KEY)

  @property
  def spec(self) -> glue_data.GlueTaskSpec:
    return glue_data.get_task_spec(self.task_config.task)

  def feature_options(self):
    config = self.task_config
    return (config.double_unordered, config.scale_stsb_targets)

  def read_features(self, split: str):
    """Features of `split`; 'dev' concatenates all of the task's dev files."""
    config = self.task_config
    files = self.spec.dev_splits if split == DEV_SPLIT else (split,)
    parts = []
    for index, file_split in enumerate(files):
      examples, _ = glue_data.read_examples(
          config.data_dir, config.task, file_split
      )
      if (
          config.double_unordered
          and split == TRAIN_SPLIT
          and config.task in UNORDERED_PAIR_TASKS
      ):
        examples = list(examples) + [
            dataclasses.replace(e, text_a=e.text_b, text_b=e.text_a)
            for e in examples
        ]
      features, _ = glue_data.convert_examples_to_features(
          examples, self.tokenizer, config.max_seq_length
      )
      if config.scale_stsb_targets and self.spec.is_regression:
        features['label_ids'] = features['label_ids'] / STSB_MAX_SCORE
      features[EVAL_SPLIT_KEY] = np.full(len(examples), index, np.int32)
      parts.append(features)
    features = {
        key: np.concatenate([part[key] for part in parts]) for key in parts[0]
    }
    return features, files

  def build_head(self, encoder: tf_keras.Model) -> tf_keras.Model:
    num_outputs = 1 if self.spec.is_regression else len(self.spec.label_list)
    if self.task_config.head == 'first_token':
      return models.BertClassifier(
          network=encoder,
          num_classes=num_outputs,
          use_encoder_pooler=False,
          cls_head=first_token.FirstTokenHead(
              num_outputs,
              dropout_rate=self.task_config.head_dropout_rate,
              name='sentence_prediction',
          ),
      )
    return models.BertClassifier(
        network=encoder,
        num_classes=num_outputs,
        initializer=self.head_initializer(),
        dropout_rate=self.task_config.head_dropout_rate,
        use_encoder_pooler=self.task_config.head == 'encoder_pooler',
    )

  def build_losses(self, labels, model_outputs, aux_losses=None) -> tf.Tensor:
    if not self.spec.is_regression:
      return finetuning_base.softmax_cross_entropy(
          labels['label_ids'], model_outputs, aux_losses
      )
    loss = tf.reduce_mean(
        tf.square(
            tf.cast(model_outputs, tf.float32)[:, 0]
            - tf.cast(labels['label_ids'], tf.float32)
        )
    )
    return finetuning_base.plus_aux_losses(loss, aux_losses)

  def build_metrics(self, training=None):
    return [] if self.spec.is_regression else super().build_metrics(training)

  def compute_metrics(
      self, outputs: Mapping[str, np.ndarray]
  ) -> Dict[str, float]:
    """`glue_metrics.task_metrics` per dev file (later files prefixed)."""
    logits = outputs['logits']
    predictions = (
        logits[:, 0] if self.spec.is_regression else np.argmax(logits, axis=-1)
    )
    results = {}
    for index, name in enumerate(self.spec.dev_splits):
      selected = outputs[EVAL_SPLIT_KEY] == index
      scores = glue_metrics.task_metrics(
          self.task_config.task,
          predictions[selected],
          outputs['label_ids'][selected],
      )
      prefix = '' if index == 0 else f'{name}/'
      results.update({prefix + key: value for key, value in scores.items()})
    results['score'] = glue_metrics.headline_score(
        self.task_config.task, results, stsb_metric=self.task_config.stsb_metric
    )
    return results

  def headline_metric(self) -> str:
    return 'score'
