"""Part-of-speech tagging on the Penn Treebank (001 Table III).

`<data_dir>/{train,dev,test}.txt` hold `word TAG` lines or treebank
`word/TAG` tokens. As in 001, a word's first wordpiece carries its tag, the
others '##', specials and padding 'PAD'; loss and accuracy count
word-initial pieces only. `pos.use_crf` puts a CRF over each sequence.
"""

import dataclasses
import os
from typing import Dict, Mapping, Tuple

import numpy as np
import tensorflow as tf
import tf_keras

from official_repro.data import pos_tagging as pos_data
from official_repro.modeling.models import tagger
from official_repro.tasks import finetuning_base
from official_repro.tasks import finetuning_registry

TRAIN_SPLIT = 'train'


@dataclasses.dataclass
class TaggingTaskConfig(finetuning_base.FinetuneTaskConfig):
  """POS-tagging settings beyond the shared ones.

  `file_format`: 'auto', 'conll' or 'treebank'; `conll_tag_column`: the
  tag's field in 'conll' lines (-1: the last; 1 for CoNLL-2000/2003).
  """

  use_crf: bool = False
  file_format: str = 'auto'
  conll_tag_column: int = -1


@finetuning_registry.register(
    ('pos',), TaggingTaskConfig, 'pos', single_segment=('pos',)
)
class TaggingTask(finetuning_base.FinetuneTask):
  """POS tagging (see module docstring)."""

  eval_output_keys = ('predicted_ids',)
  eval_label_keys = ('label_ids', 'label_weights')

  def feature_options(self):
    return (self.task_config.file_format, self.task_config.conll_tag_column)

  def _sentences(self, split: str):
    path = os.path.join(self.task_config.data_dir, f'{split}.txt')
    sentences, _ = pos_data.read_tagged_sentences(
        path,
        file_format=self.task_config.file_format,
        conll_tag_column=self.task_config.conll_tag_column,
    )
    return sentences

  def label_list(self) -> Tuple[str, ...]:
    """The training file's tags plus '##' and 'PAD'."""
    return self.load_features(TRAIN_SPLIT)[1]

  def read_features(self, split: str):
    """Features of `split`; metadata is the label list (from train)."""
    labels = (
        pos_data.build_label_list(self._sentences(TRAIN_SPLIT))
        if split == TRAIN_SPLIT
        else self.label_list()
    )
    features, _ = pos_data.convert_to_features(
        self._sentences(split),
        self.tokenizer,
        labels,
        self.task_config.max_seq_length,
    )
    return features, labels

  def build_head(self, encoder: tf_keras.Model) -> tf_keras.Model:
    # Kept for the CRF likelihood in `build_losses`.
    self._tagger = tagger.Tagger(
        encoder,
        num_tags=len(self.label_list()),
        dropout_rate=self.task_config.head_dropout_rate,
        initializer=self.head_initializer(),
        use_crf=self.task_config.use_crf,
    )
    return self._tagger

  def build_losses(self, labels, model_outputs, aux_losses=None) -> tf.Tensor:
    """Softmax: CE over word-initial pieces; CRF: -log p(tags | tokens)."""
    logits = tf.cast(model_outputs['logits'], tf.float32)
    if self.task_config.use_crf:
      loss = -tf.reduce_mean(
          self._tagger.log_likelihood(
              logits, labels['label_ids'], model_outputs['mask']
          )
      )
    else:
      losses = tf_keras.losses.sparse_categorical_crossentropy(
          labels['label_ids'], logits, from_logits=True
      )
      loss = finetuning_base.masked_mean(losses, labels['label_weights'])
    return finetuning_base.plus_aux_losses(loss, aux_losses)

  def loss_terms(self, labels) -> tf.Tensor:
    """Sentences (CRF) or labelled pieces (softmax) `build_losses` averages."""
    if self.task_config.use_crf:
      return super().loss_terms(labels)
    return tf.maximum(
        tf.reduce_sum(tf.cast(labels['label_weights'], tf.float32)), 1.0
    )

  def compute_metrics(
      self, outputs: Mapping[str, np.ndarray]
  ) -> Dict[str, float]:
    return dict(
        accuracy=pos_data.tagging_accuracy(
            outputs['predicted_ids'],
            outputs['label_ids'],
            outputs['label_weights'],
        )
    )

  def headline_metric(self) -> str:
    return 'accuracy'
