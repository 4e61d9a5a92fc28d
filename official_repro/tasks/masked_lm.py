"""BERT masked-LM (optionally + next-sentence) pretraining task.

Paper 001's BERT baseline: Model Garden's `MaskedLMTask` losses, metrics and
steps (through `pretraining.PretrainTask`) and its `BertPretrainerV2` on any
registered backbone. gin: `masked_lm.<field>`.
"""

import dataclasses
from typing import Dict, List

import tf_keras

from official.core import task_factory
from official.nlp.configs import bert
from official.nlp.modeling import layers
from official.nlp.modeling import models
from official.nlp.tasks import masked_lm as stock_masked_lm
from official.modeling.hyperparams import base_config
from official_repro.metrics import flops
from official_repro.modeling import activations
from official_repro.modeling.networks import encoders
from official_repro.tasks import objectives
from official_repro.tasks import pretraining

# The name of the next-sentence head (Model Garden's `MaskedLMTask` reads it).
NEXT_SENTENCE_HEAD = 'next_sentence'


@dataclasses.dataclass
class MaskedLMModelConfig(base_config.Config):
  """A masked-LM pretrainer on any registered backbone (gin `encoder`).

  `cls_heads` derive from `next_sentence_prediction` (records with
  next-sentence labels) when built from gin.
  """

  encoder: encoders.EncoderConfig = dataclasses.field(
      default_factory=encoders.EncoderConfig
  )
  next_sentence_prediction: bool = False
  cls_heads: List[bert.ClsHeadConfig] = dataclasses.field(default_factory=list)
  mlm_activation: str = 'gelu_tanh'
  mlm_initializer_range: float = 0.02


@dataclasses.dataclass
class MaskedLMPretrainConfig(pretraining.PretrainTaskConfig):
  """Masked-LM pretraining on our record format."""

  model: MaskedLMModelConfig = dataclasses.field(
      default_factory=MaskedLMModelConfig
  )


@task_factory.register_task_cls(MaskedLMPretrainConfig)
class MaskedLMPretrainTask(pretraining.PretrainTask):
  """Model Garden's masked-LM task reading `official_repro` records."""

  def build_model(self, params: MaskedLMModelConfig = None) -> tf_keras.Model:
    """Model Garden's `BertPretrainerV2` on an `encoders` backbone."""
    config = params or self.task_config.model
    return models.BertPretrainerV2(
        encoder_network=encoders.build_encoder(config.encoder),
        mlm_activation=activations.get(config.mlm_activation),
        mlm_initializer=tf_keras.initializers.TruncatedNormal(
            stddev=config.mlm_initializer_range
        ),
        classification_heads=[
            layers.ClassificationHead(**head.as_dict())
            for head in config.cls_heads
        ],
    )


def _finalize(task_config: MaskedLMPretrainConfig) -> MaskedLMPretrainConfig:
  """Next-sentence prediction: its head and the records' labels."""
  model = task_config.model
  if not model.next_sentence_prediction:
    return task_config
  head = bert.ClsHeadConfig(
      inner_dim=model.encoder.hidden_size,
      num_classes=2,
      dropout_rate=model.encoder.dropout_rate,
      name=NEXT_SENTENCE_HEAD,
  )
  return task_config.replace(
      model=dict(cls_heads=[head.as_dict()]),
      train_data=dict(use_next_sentence_label=True),
      validation_data=dict(use_next_sentence_label=True),
  )


def _flops(
    task_config: MaskedLMPretrainConfig, seq_length: int, max_predictions: int
) -> Dict[str, flops.NetworkCost]:
  """One encoder with its MLM head (not the next-sentence head, as ELECTRA)."""
  return dict(
      encoder=objectives.masked_lm_cost(
          task_config.model.encoder, seq_length, max_predictions / seq_length
      )
  )


def _stock_task_config(
    task_config: MaskedLMPretrainConfig, train_data, max_predictions: int
):
  """Model Garden's own `MaskedLMTask` on the same encoder."""
  del max_predictions
  model = task_config.model
  return stock_masked_lm.MaskedLMConfig(
      model=bert.PretrainerConfig(
          encoder=encoders.to_model_garden_config(model.encoder),
          cls_heads=model.cls_heads,
          mlm_activation=activations.model_garden_name(model.mlm_activation),
          mlm_initializer_range=model.mlm_initializer_range,
      ),
      train_data=train_data,
  )


OBJECTIVE = objectives.register(
    objectives.Objective(
        name='masked_lm',
        task_config_cls=MaskedLMPretrainConfig,
        model_config_cls=MaskedLMModelConfig,
        encoder_field='encoder',
        derived=('cls_heads',),
        finalize=_finalize,
        flops=_flops,
        stock_task_config=_stock_task_config,
    )
)
