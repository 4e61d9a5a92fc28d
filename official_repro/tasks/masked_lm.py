"""BERT masked-LM (optionally + next-sentence) pretraining task.

The BERT baseline of paper 001 (Table V, BERT_small). Losses, metrics and the
train/validation steps are Model Garden's `MaskedLMTask`; this subclass only
swaps in our input pipeline (static or dynamic masking with record checks) and
builds the encoder from a backbone-agnostic `EncoderConfig`, so BERT, ALBERT and
any later backbone can be pretrained with masked LM by a gin change.
"""

import dataclasses
from typing import List, Optional

import gin
import tf_keras

from official.core import task_factory
from official.modeling import tf_utils
from official.modeling.hyperparams import base_config
from official.nlp.configs import bert
from official.nlp.modeling import layers
from official.nlp.modeling import models
from official.nlp.tasks import masked_lm
from official_repro.data import pretrain_dataloader
from official_repro.modeling.networks import encoders


@dataclasses.dataclass
class MaskedLMModelConfig(base_config.Config):
  """A masked-LM pretrainer on any backbone of `encoders`."""
  encoder: encoders.EncoderConfig = dataclasses.field(
      default_factory=encoders.EncoderConfig)
  cls_heads: List[bert.ClsHeadConfig] = dataclasses.field(
      default_factory=list)
  mlm_activation: str = 'gelu'
  mlm_initializer_range: float = 0.02


@dataclasses.dataclass
class MaskedLMPretrainConfig(masked_lm.MaskedLMConfig):
  """Masked-LM pretraining on our record format.

  `scale_loss` is on: each replica's loss is divided by the number of replicas
  so that the summed all-reduce yields the mean gradient, which keeps gradient
  clipping and the learning rate independent of the replica count.
  """
  scale_loss: bool = True
  model: MaskedLMModelConfig = dataclasses.field(
      default_factory=MaskedLMModelConfig)
  train_data: pretrain_dataloader.PretrainDataConfig = dataclasses.field(
      default_factory=pretrain_dataloader.PretrainDataConfig)
  validation_data: pretrain_dataloader.PretrainDataConfig = dataclasses.field(
      default_factory=pretrain_dataloader.PretrainDataConfig)


@task_factory.register_task_cls(MaskedLMPretrainConfig)
class MaskedLMPretrainTask(masked_lm.MaskedLMTask):
  """Model Garden's masked-LM task reading `official_repro` records."""

  def build_model(self, params: Optional[MaskedLMModelConfig] = None
                  ) -> tf_keras.Model:
    """Model Garden's `BertPretrainerV2` on an `encoders` backbone."""
    config = params or self.task_config.model
    return models.BertPretrainerV2(
        encoder_network=encoders.build_encoder(config.encoder),
        mlm_activation=tf_utils.get_activation(config.mlm_activation),
        mlm_initializer=tf_keras.initializers.TruncatedNormal(
            stddev=config.mlm_initializer_range),
        classification_heads=[
            layers.ClassificationHead(**head.as_dict())
            for head in config.cls_heads])


@gin.configurable('masked_lm')
def masked_lm_task_config(
    next_sentence_prediction: bool = False,
    mlm_activation: str = 'gelu',
    mlm_initializer_range: float = 0.02,
    encoder: Optional[encoders.EncoderConfig] = None,
) -> MaskedLMPretrainConfig:
  """Builds the task config from the gin-bound encoder and data settings.

  Args:
    next_sentence_prediction: add BERT's next-sentence head and loss.
    mlm_activation: activation of the MLM transform layer.
    mlm_initializer_range: stddev of the MLM head initializer.
    encoder: the backbone; defaults to the gin-bound `encoder`.

  Returns:
    The task config, with the encoder's vocabulary size taken from (and
    checked against) the training records.
  """
  train_data, validation_data = pretrain_dataloader.pretraining_data_configs(
      use_next_sentence_label=next_sentence_prediction)
  encoder = pretrain_dataloader.resolve_vocab_size(
      encoder or encoders.encoder_config(), train_data)
  cls_heads = []
  if next_sentence_prediction:
    cls_heads.append(bert.ClsHeadConfig(
        inner_dim=encoder.hidden_size, num_classes=2,
        dropout_rate=encoder.dropout_rate, name='next_sentence'))
  return MaskedLMPretrainConfig(
      model=MaskedLMModelConfig(
          encoder=encoder,
          cls_heads=cls_heads,
          mlm_activation=mlm_activation,
          mlm_initializer_range=mlm_initializer_range),
      train_data=train_data,
      validation_data=validation_data)
