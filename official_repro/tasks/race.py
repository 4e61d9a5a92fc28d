"""RACE multiple-choice reading comprehension (001 Table III).

Reads the released layout (`<data_dir>/{train,dev,test}/{middle,high}/*.txt`),
scores the four options with `MultipleChoiceModel` and a softmax over them,
and reports accuracy on RACE-middle, RACE-high and all questions. 001 trains
and evaluates on RACE-middle only: `race.levels = ('middle',)` in its gin.
"""

import dataclasses
from typing import Dict, Mapping, Optional, Tuple

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras

from official_repro.data import race as race_data
from official_repro.modeling.models import multiple_choice
from official_repro.tasks import finetuning_base
from official_repro.tasks import finetuning_registry


@dataclasses.dataclass
class RaceTaskConfig(finetuning_base.FinetuneTaskConfig):
  """RACE settings beyond the shared ones.

  `levels`: of 'middle' and 'high'; `fill_blank`: a cloze question's '_'
  replaced by the option (XLNet's preprocessing).
  """

  levels: Tuple[str, ...] = race_data.LEVELS
  max_query_length: Optional[int] = None
  fill_blank: bool = False


@finetuning_registry.register(('race',), RaceTaskConfig, 'race')
class RaceTask(
    finetuning_base.AccuracyMetricMixin, finetuning_base.FinetuneTask
):
  """RACE fine-tuning (see module docstring)."""

  eval_output_keys = ('logits',)
  eval_label_keys = ('label_ids', 'level_ids')

  def feature_options(self):
    config = self.task_config
    return (tuple(config.levels), config.max_query_length, config.fill_blank)

  def read_features(self, split: str):
    config = self.task_config
    examples, _ = race_data.read_examples(
        config.data_dir, split, levels=config.levels
    )
    features, conversion = race_data.convert_to_features(
        examples,
        self.tokenizer,
        config.max_seq_length,
        max_query_length=config.max_query_length,
        fill_blank=config.fill_blank,
    )
    logging.info('RACE %s features: %s', split, conversion.as_dict())
    return features, None

  def build_head(self, encoder: tf_keras.Model) -> tf_keras.Model:
    return multiple_choice.MultipleChoiceModel(
        encoder,
        dropout_rate=self.task_config.head_dropout_rate,
        initializer=self.head_initializer(),
    )

  def build_losses(self, labels, model_outputs, aux_losses=None) -> tf.Tensor:
    return finetuning_base.softmax_cross_entropy(
        labels['label_ids'], model_outputs, aux_losses
    )

  def compute_metrics(
      self, outputs: Mapping[str, np.ndarray]
  ) -> Dict[str, float]:
    """Accuracy on 'middle', 'high' and 'all' (levels present only)."""
    scores = race_data.accuracy_by_level(
        np.argmax(outputs['logits'], axis=-1),
        outputs['label_ids'],
        outputs['level_ids'],
    )
    return {f'accuracy_{level}': value for level, value in scores.items()}

  def headline_metric(self) -> str:
    return 'accuracy_all'
