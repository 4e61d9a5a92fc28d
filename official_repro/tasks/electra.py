"""ELECTRA / ALE pretraining task (paper 001, Table V).

Loss = generator_loss_weight * MLM + discriminator_loss_weight * RTD, with
the MLM loss averaged over masked positions and the RTD loss (sigmoid
cross-entropy) averaged over real, non-padding tokens, as in ELECTRA. Which
backbone the two networks use (BERT: ELECTRA; ALBERT: ALE) is the encoder
config's business, not this task's.
"""

import dataclasses
from typing import Dict, List, Optional

import gin
import tensorflow as tf
import tf_keras

from official.core import base_task
from official.core import task_factory
from official.modeling.hyperparams import base_config
from official.core import config_definitions as cfg
from official_repro.data import pretrain_dataloader
from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import electra


@dataclasses.dataclass
class ElectraModelConfig(base_config.Config):
  """The ELECTRA pretrainer.

  Attributes:
    discriminator: the discriminator's encoder (the generator is scaled from
      it by `generator_size`).
    generator_size: generator hidden/heads/FFN as a fraction of the
      discriminator's (001 Table V: 0.25).
    temperature: sampling temperature of the generator's softmax.
    disallow_original: never sample the original token.
    tie_embeddings: one word-embedding table for both networks.
    mlm_activation: activation of the MLM and RTD heads.
    initializer_range: stddev of the heads' initializers.
  """
  discriminator: encoders.EncoderConfig = dataclasses.field(
      default_factory=encoders.EncoderConfig)
  generator_size: float = 0.25
  temperature: float = 1.0
  disallow_original: bool = False
  tie_embeddings: bool = True
  mlm_activation: str = 'gelu'
  initializer_range: float = 0.02


@dataclasses.dataclass
class ElectraPretrainConfig(cfg.TaskConfig):
  """ELECTRA pretraining task config."""
  model: ElectraModelConfig = dataclasses.field(
      default_factory=ElectraModelConfig)
  generator_loss_weight: float = 1.0
  discriminator_loss_weight: float = 50.0
  scale_loss: bool = True
  train_data: pretrain_dataloader.PretrainDataConfig = dataclasses.field(
      default_factory=pretrain_dataloader.PretrainDataConfig)
  validation_data: pretrain_dataloader.PretrainDataConfig = dataclasses.field(
      default_factory=pretrain_dataloader.PretrainDataConfig)


@task_factory.register_task_cls(ElectraPretrainConfig)
class ElectraPretrainTask(base_task.Task):
  """Replaced-token-detection pretraining."""

  def build_model(self, params: Optional[ElectraModelConfig] = None
                  ) -> electra.ElectraPretrainer:
    config = params or self.task_config.model
    networks = electra.build_networks(config.discriminator,
                                      config.generator_size,
                                      config.tie_embeddings)
    return electra.ElectraPretrainer(
        generator=networks.generator,
        discriminator=networks.discriminator,
        discriminator_hidden_size=config.discriminator.hidden_size,
        temperature=config.temperature,
        disallow_original=config.disallow_original,
        mlm_activation=config.mlm_activation,
        initializer_range=config.initializer_range)

  def build_inputs(self, params: pretrain_dataloader.PretrainDataConfig,
                   input_context: Optional[tf.distribute.InputContext] = None
                   ) -> tf.data.Dataset:
    return pretrain_dataloader.PretrainDataLoader(params).load(input_context)

  def build_metrics(self, training: Optional[bool] = None
                    ) -> List[tf_keras.metrics.Metric]:
    del training
    return [
        tf_keras.metrics.SparseCategoricalAccuracy(name='masked_lm_accuracy'),
        tf_keras.metrics.Mean(name='lm_example_loss'),
        tf_keras.metrics.Mean(name='discriminator_loss'),
        tf_keras.metrics.BinaryAccuracy(name='discriminator_accuracy',
                                        threshold=0.0),
        tf_keras.metrics.Precision(name='discriminator_precision',
                                   thresholds=0.5),
        tf_keras.metrics.Recall(name='discriminator_recall', thresholds=0.5),
        tf_keras.metrics.AUC(name='discriminator_auc', from_logits=True),
        tf_keras.metrics.Mean(name='replaced_fraction'),
    ]

  def build_losses(self, labels: Dict[str, tf.Tensor],
                   model_outputs: Dict[str, tf.Tensor],
                   metrics: List[tf_keras.metrics.Metric],
                   aux_losses=None) -> tf.Tensor:
    """Weighted MLM + RTD loss; updates the two loss metrics."""
    metrics = {metric.name: metric for metric in metrics}
    weights = tf.cast(labels['masked_lm_weights'], tf.float32)
    mlm_losses = tf_keras.losses.sparse_categorical_crossentropy(
        labels['masked_lm_ids'],
        tf.cast(model_outputs['mlm_logits'], tf.float32), from_logits=True)
    mlm_loss = tf.math.divide_no_nan(tf.reduce_sum(mlm_losses * weights),
                                     tf.reduce_sum(weights))
    real = tf.cast(labels['input_mask'], tf.float32)
    rtd_losses = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(model_outputs['rtd_labels'], tf.float32),
        logits=tf.cast(model_outputs['rtd_logits'], tf.float32))
    rtd_loss = tf.math.divide_no_nan(tf.reduce_sum(rtd_losses * real),
                                     tf.reduce_sum(real))
    metrics['lm_example_loss'].update_state(mlm_loss)
    metrics['discriminator_loss'].update_state(rtd_loss)
    total = (self.task_config.generator_loss_weight * mlm_loss +
             self.task_config.discriminator_loss_weight * rtd_loss)
    if aux_losses:
      total += tf.add_n(aux_losses)
    return total

  def process_metrics(self, metrics, labels, model_outputs):
    metrics = {metric.name: metric for metric in metrics}
    weights = tf.cast(labels['masked_lm_weights'], tf.float32)
    metrics['masked_lm_accuracy'].update_state(
        labels['masked_lm_ids'], model_outputs['mlm_logits'], weights)
    real = tf.cast(labels['input_mask'], tf.float32)
    rtd_labels = model_outputs['rtd_labels']
    rtd_logits = tf.cast(model_outputs['rtd_logits'], tf.float32)
    metrics['discriminator_accuracy'].update_state(rtd_labels, rtd_logits,
                                                   real)
    probabilities = tf.sigmoid(rtd_logits)
    for name in ('discriminator_precision', 'discriminator_recall'):
      metrics[name].update_state(rtd_labels, probabilities, real)
    metrics['discriminator_auc'].update_state(rtd_labels, rtd_logits, real)
    replaced_at_masked = tf.gather(rtd_labels, labels['masked_lm_positions'],
                                   batch_dims=1)
    metrics['replaced_fraction'].update_state(
        tf.cast(replaced_at_masked, tf.float32), weights)

  def train_step(self, inputs, model: tf_keras.Model,
                 optimizer: tf_keras.optimizers.Optimizer, metrics):
    with tf.GradientTape() as tape:
      outputs = model(inputs, training=True)
      loss = self.build_losses(inputs, outputs, metrics, model.losses)
      scaled_loss = loss
      if self.task_config.scale_loss:
        scaled_loss = loss / tf.distribute.get_strategy().num_replicas_in_sync
    variables = model.trainable_variables
    gradients = tape.gradient(scaled_loss, variables)
    optimizer.apply_gradients(list(zip(gradients, variables)))
    self.process_metrics(metrics, inputs, outputs)
    return {self.loss: loss}

  def validation_step(self, inputs, model: tf_keras.Model, metrics):
    outputs = model(inputs, training=False)
    loss = self.build_losses(inputs, outputs, metrics, model.losses)
    self.process_metrics(metrics, inputs, outputs)
    return {self.loss: loss}


@gin.configurable('electra')
def electra_task_config(
    generator_size: float = gin.REQUIRED,
    temperature: float = 1.0,
    disallow_original: bool = False,
    tie_embeddings: bool = True,
    generator_loss_weight: float = 1.0,
    discriminator_loss_weight: float = 50.0,
    mlm_activation: str = 'gelu',
    initializer_range: float = 0.02,
    discriminator: Optional[encoders.EncoderConfig] = None,
) -> ElectraPretrainConfig:
  """Builds the task config from the gin-bound encoder and data settings.

  The gin-bound `encoder` is the discriminator; the generator is scaled from
  it (see `ElectraModelConfig` for the arguments).
  """
  train_data, validation_data = pretrain_dataloader.pretraining_data_configs()
  discriminator = pretrain_dataloader.resolve_vocab_size(
      discriminator or encoders.encoder_config(), train_data)
  return ElectraPretrainConfig(
      model=ElectraModelConfig(
          discriminator=discriminator, generator_size=generator_size,
          temperature=temperature, disallow_original=disallow_original,
          tie_embeddings=tie_embeddings, mlm_activation=mlm_activation,
          initializer_range=initializer_range),
      generator_loss_weight=generator_loss_weight,
      discriminator_loss_weight=discriminator_loss_weight,
      train_data=train_data,
      validation_data=validation_data)
