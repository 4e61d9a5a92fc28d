"""What every pretraining objective's task shares.

`PretrainTask` is Model Garden's `MaskedLMTask` reading our records; its steps
and masked-LM loss and metrics are objective-agnostic, so an objective
subclasses it and adds its own losses and metrics (registered in
`tasks.objectives`).
"""

import abc
import dataclasses
from typing import Dict, List, Optional

from absl import logging
import tensorflow as tf
import tf_keras

from official.core import config_definitions as cfg
from official.nlp.tasks import masked_lm
from official_repro.data import pretrain_dataloader
from official_repro.modeling import arguments
from official_repro.modeling.interchange import converted
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import pretrained
from official_repro.modeling.pretrainers import networks


@dataclasses.dataclass
class PretrainTaskConfig(cfg.TaskConfig):
  """The task-config fields every objective has; an objective adds `model`.

  `scale_loss`: each replica's loss is divided by the replica count, so that
  clipping and the learning rate do not depend on it.
  """

  scale_loss: bool = True
  train_data: pretrain_dataloader.PretrainDataConfig = dataclasses.field(
      default_factory=pretrain_dataloader.PretrainDataConfig
  )
  validation_data: pretrain_dataloader.PretrainDataConfig = dataclasses.field(
      default_factory=pretrain_dataloader.PretrainDataConfig
  )


@dataclasses.dataclass
class GeneratorShape:
  """A model config's generator, derived from its discriminator.

  The base of ELECTRA's and TEAMS's model configs (gin `encoder`: the
  discriminator).

  Attributes:
    generator_size: generator hidden/heads/FFN as a fraction of the
      discriminator's.
    generator_layer_fraction: generator depth as a fraction, in (0, 1].
    generator_num_layers: depth as a count instead (the fraction stays 1.0).
    layer_sharing: 'none', 'partial' (the bottom half) or 'full'.
  """

  discriminator: encoders.EncoderConfig = dataclasses.field(
      default_factory=encoders.EncoderConfig
  )
  generator_size: float = 1.0
  generator_layer_fraction: float = 1.0
  generator_num_layers: Optional[int] = None
  layer_sharing: str = 'none'

  def generator(self) -> encoders.EncoderConfig:
    """The generator's encoder config (ArgumentError: a bad size or depth)."""
    return networks.scale_generator(
        self.discriminator,
        self.generator_size,
        self.generator_layer_fraction,
        self.generator_num_layers,
    )

  def num_shared_layers(self) -> int:
    """The generator's bottom layers that are the discriminator's.

    Raises:
      ArgumentError: a `layer_sharing` unknown or impossible for the shape.
    """
    generator = self.generator()
    shared = networks.num_shared_layers_for(
        self.layer_sharing, generator.num_layers
    )
    problem = networks.shared_layers_problem(
        shared, generator, self.discriminator
    )
    if problem:

      def message(name: arguments.Namer) -> str:
        sharing = name('layer_sharing')
        return (
            f'{sharing}={self.layer_sharing!r} shares {shared} layers, which '
            f"{problem}; set {sharing} = 'none', or "
            f"{name('generator_size')} = 1.0 (a generator as wide as the "
            'discriminator).'
        )

      raise arguments.ArgumentError(type(self).__name__, message)
    return shared


def check_generator_shape(task_config: cfg.TaskConfig) -> cfg.TaskConfig:
  """`Objective.finalize` with a generator: checks its shape before writing.

  Raises:
    ArgumentError: naming the fields and the fix.
  """
  model = task_config.model
  model.num_shared_layers()
  if getattr(model, 'tie_embedding_block', False):
    networks.check_embedding_block(
        model.tie_embeddings, model.generator(), model.discriminator
    )
  return task_config


class PretrainTask(masked_lm.MaskedLMTask):
  """Model Garden's `MaskedLMTask` on `official_repro` records.

  Its steps add what `MaskedLMTask` leaves out for mixed precision: `*logits`
  reach losses and metrics in float32, and a loss-scale optimizer gets the
  scaled loss (as `base_task.Task`'s step does).
  """

  def model_outputs(
      self, model: tf_keras.Model, inputs: Dict[str, tf.Tensor], training: bool
  ) -> Dict[str, tf.Tensor]:
    """The model's outputs with every `*logits` tensor in float32."""
    outputs = model(inputs, training=training)
    return {
        name: tf.cast(value, tf.float32)
        if name.endswith('logits') and value.dtype.is_floating
        else value
        for name, value in outputs.items()
    }

  def train_step(
      self,
      inputs,
      model: tf_keras.Model,
      optimizer: tf_keras.optimizers.Optimizer,
      metrics,
  ):
    with tf.GradientTape() as tape:
      outputs, loss = self._forward(inputs, model, metrics, training=True)
      scaled_loss = loss
      if self.task_config.scale_loss:
        scaled_loss /= tf.distribute.get_strategy().num_replicas_in_sync
      if isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer):
        scaled_loss = optimizer.get_scaled_loss(scaled_loss)
    variables = model.trainable_variables
    gradients = tape.gradient(scaled_loss, variables)
    if isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer):
      gradients = optimizer.get_unscaled_gradients(gradients)
    optimizer.apply_gradients(list(zip(gradients, variables)))
    self.process_metrics(metrics, inputs, outputs)
    return {self.loss: loss}

  def _forward(self, inputs, model: tf_keras.Model, metrics, training: bool):
    outputs = self.model_outputs(model, inputs, training=training)
    loss = self.build_losses(
        labels=inputs,
        model_outputs=outputs,
        metrics=metrics,
        aux_losses=model.losses,
    )
    return outputs, loss

  def validation_step(self, inputs, model: tf_keras.Model, metrics):
    outputs, loss = self._forward(inputs, model, metrics, training=False)
    self.process_metrics(metrics, inputs, outputs)
    return {self.loss: loss}

  def initialize(self, model: tf_keras.Model) -> None:
    """Starts the encoder (and a release's MLM head) from `init_checkpoint`."""
    path = self.task_config.init_checkpoint
    if not path:
      return
    items = model.checkpoint_items
    pretrained.restore(items['encoder'], path)
    head = converted.mlm_head_checkpoint(path)
    if head is not None and 'masked_lm' in items:
      tf.train.Checkpoint(
          encoder=items['encoder'], mlm_head=items['masked_lm']
      ).read(head).assert_existing_objects_matched().expect_partial()
    logging.info('Started the encoder from %s.', path)

  def build_inputs(
      self,
      params: pretrain_dataloader.PretrainDataConfig,
      input_context: Optional[tf.distribute.InputContext] = None,
  ) -> tf.data.Dataset:
    return pretrain_dataloader.PretrainDataLoader(params).load(input_context)


class ReplacedTokenTask(PretrainTask):
  """A `PretrainTask` whose model also tells replaced tokens apart.

  The model outputs `rtd_labels` (int `[B, T]`, 1 = replaced) and
  `rtd_logits` (float `[B, T]`); this adds the discriminator's metrics. The
  loss is the subclass's `total_loss` of the MLM loss and
  `replaced_token_loss` (metric `replaced_token_loss_name`: 'rtd_loss';
  SCRIPT's 'critic_loss'), plus the model's auxiliary losses.
  """

  replaced_token_loss_name = 'rtd_loss'

  def build_losses(self, labels, model_outputs, metrics, aux_losses=None):
    mlm_loss = super().build_losses(labels, model_outputs, metrics)
    rtd_loss = self.replaced_token_loss(labels, model_outputs)
    by_name = {metric.name: metric for metric in metrics}
    by_name[self.replaced_token_loss_name].update_state(rtd_loss)
    total = self.total_loss(mlm_loss, rtd_loss, labels, model_outputs, by_name)
    if aux_losses:
      total += tf.add_n(aux_losses)
    return total

  def replaced_token_loss(self, labels, model_outputs) -> tf.Tensor:
    return replaced_token_loss(
        model_outputs['rtd_labels'],
        model_outputs['rtd_logits'],
        labels['input_mask'],
    )

  @abc.abstractmethod
  def total_loss(
      self, mlm_loss, rtd_loss, labels, model_outputs, metrics
  ) -> tf.Tensor:
    """The weighted loss; `metrics` by name, for the subclass's own terms."""

  def build_metrics(self, training=None) -> List[tf_keras.metrics.Metric]:
    return super().build_metrics(training) + [
        tf_keras.metrics.Mean(name=self.replaced_token_loss_name),
        tf_keras.metrics.BinaryAccuracy(
            name='discriminator_accuracy', threshold=0.0
        ),
        tf_keras.metrics.Precision(
            name='discriminator_precision', thresholds=0.5
        ),
        tf_keras.metrics.Recall(name='discriminator_recall', thresholds=0.5),
        tf_keras.metrics.AUC(name='discriminator_auc', from_logits=True),
        tf_keras.metrics.Mean(name='replaced_fraction'),
    ]

  def process_metrics(self, metrics, labels, model_outputs):
    super().process_metrics(metrics, labels, model_outputs)
    metrics = {metric.name: metric for metric in metrics}
    real = tf.cast(labels['input_mask'], tf.float32)
    rtd_labels = model_outputs['rtd_labels']
    rtd_logits = tf.cast(model_outputs['rtd_logits'], tf.float32)
    metrics['discriminator_accuracy'].update_state(rtd_labels, rtd_logits, real)
    probabilities = tf.sigmoid(rtd_logits)
    for name in ('discriminator_precision', 'discriminator_recall'):
      metrics[name].update_state(rtd_labels, probabilities, real)
    metrics['discriminator_auc'].update_state(rtd_labels, rtd_logits, real)
    replaced_at_masked = tf.gather(
        rtd_labels, labels['masked_lm_positions'], batch_dims=1
    )
    metrics['replaced_fraction'].update_state(
        tf.cast(replaced_at_masked, tf.float32),
        tf.cast(labels['masked_lm_weights'], tf.float32),
    )


def replaced_token_loss(
    labels: tf.Tensor, logits: tf.Tensor, input_mask: tf.Tensor
) -> tf.Tensor:
  """Sigmoid cross-entropy over real tokens (all `[B, T]`; 0 if none)."""
  real = tf.cast(input_mask, tf.float32)
  losses = tf.nn.sigmoid_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.float32), logits=tf.cast(logits, tf.float32)
  )
  return tf.math.divide_no_nan(
      tf.reduce_sum(losses * real), tf.reduce_sum(real)
  )
