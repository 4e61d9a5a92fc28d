"""What every fine-tuning task shares: data in memory, encoder, optimizer.

A subclass (GLUE, SQuAD, RACE, POS) supplies `read_features(split)` (numpy
arrays, cached per process), `build_head(encoder)`, `build_losses` and
`compute_metrics` over the whole evaluation set. The base restores the
pretrained encoder and builds Model Garden's `AdamWeightDecay` with ELECTRA's
layer-wise decay under a linear warmup and decay. As google-research/electra:
`summed_loss` (summed per-replica loss, clipped per replica, then averaged),
`data_order='original'` (one permutation, a 100-example shuffle buffer),
`adam_bias_correction` and `warmup_times_decay`.

Not reused: Model Garden's sentence-prediction, question-answering and
tagging tasks read TFRecords its data scripts wrote beforehand, and build
their own optimizer without layer-wise decay; these tasks read the user's
files and share the papers' optimizer.
"""

import abc
import dataclasses
import functools
from typing import Any, Dict, Mapping, Optional, Tuple

from absl import logging
import numpy as np
import tensorflow as tf
import tf_keras

from official.core import base_task
from official.core import config_definitions as cfg
from official.modeling import optimization
from official.modeling import performance
from official_repro.data import vocab as vocab_lib
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import pretrained
from official_repro.optimization import layerwise_decay
from official_repro.optimization import optimizer_config as optimizer_config_lib
from official_repro.optimization import warmup_times_decay

# `data_order='original'`: one permutation, then the original's
# `d.repeat().shuffle(buffer_size=100)` (finetune/preprocessing.py).
ORIGINAL_SHUFFLE_BUFFER = 100

# (task name, data dir, split, vocab, lower_case, max_seq_length, options)
# -> (features, per-example metadata); shared by all tasks built in-process.
_FEATURE_CACHE: Dict[Tuple[Any, ...], Tuple[Dict[str, np.ndarray], Any]] = {}


@dataclasses.dataclass
class FinetuneDataConfig(cfg.DataConfig):
  """One split ('train', 'dev', ...); a resumed run skips to `start_step`."""

  split: str = 'train'
  start_step: int = 0


@dataclasses.dataclass
class FinetuneTaskConfig(cfg.TaskConfig):
  """Settings every fine-tuning task has.

  Attributes:
    task: the task name (e.g. 'mrpc', 'squad11', 'race', 'pos').
    learning_rate: the peak learning rate (head depth).
    layerwise_lr_decay: decay per layer towards the input; None turns it off.
    weight_decay_rate: decoupled weight decay (not on LayerNorm and biases).
    gradient_clip_norm: clip gradients to this global norm (0: off).
    adam_bias_correction: False: the original BERT/ELECTRA update.
    warmup_times_decay: the original's schedule, decay x min(1, t / W).
    summed_loss: train on the replica's summed loss, clipped per replica;
      the logged loss stays the mean.
    data_order: 'reshuffle' or 'original'.
  """

  task: str = ''
  data_dir: str = ''
  vocab_file: str = ''
  lower_case: bool = True
  max_seq_length: int = 128
  encoder: encoders.EncoderConfig = dataclasses.field(
      default_factory=encoders.EncoderConfig
  )
  head_dropout_rate: float = 0.1
  learning_rate: float = 1e-4
  layerwise_lr_decay: Optional[float] = None
  weight_decay_rate: float = 0.0
  adam_epsilon: float = 1e-6
  adam_beta_2: float = 0.999
  gradient_clip_norm: float = 1.0
  adam_bias_correction: bool = True
  warmup_times_decay: bool = False
  summed_loss: bool = False
  data_order: str = 'reshuffle'


class FinetuneTask(base_task.Task):
  """Base class of the fine-tuning tasks (see module docstring)."""

  # Keys of `model_outputs` and `labels` that `validation_step` returns for
  # `compute_metrics` (the labels: also `label_keys()`'s default).
  eval_output_keys: Tuple[str, ...] = ()
  eval_label_keys: Tuple[str, ...] = ()

  def __init__(self, params: FinetuneTaskConfig, logging_dir=None, name=None):
    super().__init__(params, logging_dir=logging_dir, name=name)
    self._encoder = None
    self._lr_multipliers = {}

  @functools.cached_property
  def tokenizer(self) -> vocab_lib.FullTokenizer:
    return vocab_lib.FullTokenizer(
        self.task_config.vocab_file, do_lower_case=self.task_config.lower_case
    )

  # Data.
  def feature_options(self) -> Tuple[Any, ...]:
    """Task settings that change the features (part of the cache key)."""
    return ()

  @abc.abstractmethod
  def read_features(self, split: str) -> Tuple[Dict[str, np.ndarray], Any]:
    """Reads and tokenizes `split`; returns the arrays and metadata."""

  def load_features(self, split: str) -> Tuple[Dict[str, np.ndarray], Any]:
    """`read_features(split)`, cached for the process."""
    config = self.task_config
    key = (
        config.task,
        config.data_dir,
        split,
        config.vocab_file,
        config.lower_case,
        config.max_seq_length,
        self.feature_options(),
    )
    if key not in _FEATURE_CACHE:
      features, metadata = self.read_features(split)
      logging.info(
          '%s %s: %d features of length %d.',
          config.task,
          split,
          len(features['input_word_ids']),
          config.max_seq_length,
      )
      _FEATURE_CACHE[key] = (features, metadata)
    return _FEATURE_CACHE[key]

  def num_examples(self, split: str) -> int:
    """Rows of the `split` arrays (one optimizer example each)."""
    return len(self.load_features(split)[0]['input_word_ids'])

  def label_keys(self) -> Tuple[str, ...]:
    """Keys of the feature dict that are labels, not model inputs."""
    return self.eval_label_keys

  def build_inputs(
      self,
      params: FinetuneDataConfig,
      input_context: Optional[tf.distribute.InputContext] = None,
  ) -> tf.data.Dataset:
    """(features, labels) batches; training data is shuffled and repeated."""
    arrays, _ = self.load_features(params.split)
    labels = {key: arrays[key] for key in self.label_keys()}
    features = {
        key: value for key, value in arrays.items() if key not in labels
    }
    original_order = (
        params.is_training and self.task_config.data_order == 'original'
    )
    if original_order:
      permutation = np.random.RandomState(params.seed).permutation(
          len(arrays['input_word_ids'])
      )
      features = {key: value[permutation] for key, value in features.items()}
      labels = {key: value[permutation] for key, value in labels.items()}
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    batch_size = params.global_batch_size
    batches_per_step = 1
    if input_context:
      # A step takes one batch of this pipeline for each of its replicas.
      batches_per_step = (
          input_context.num_replicas_in_sync
          // input_context.num_input_pipelines
      )
      dataset = dataset.shard(
          input_context.num_input_pipelines, input_context.input_pipeline_id
      )
      batch_size = input_context.get_per_replica_batch_size(batch_size)
    if original_order:
      dataset = dataset.repeat().shuffle(
          ORIGINAL_SHUFFLE_BUFFER, seed=params.seed
      )
    elif params.is_training:
      dataset = dataset.shuffle(
          len(arrays['input_word_ids']),
          seed=params.seed,
          reshuffle_each_iteration=True,
      ).repeat()
    dataset = dataset.batch(batch_size, drop_remainder=params.is_training)
    if params.is_training:
      dataset = dataset.skip(params.start_step * batches_per_step)
    return dataset.prefetch(tf.data.AUTOTUNE)

  # Model.
  @abc.abstractmethod
  def build_head(self, encoder: tf_keras.Model) -> tf_keras.Model:
    """The task's Keras model around `encoder` (Model Garden heads)."""

  def head_initializer(self) -> tf_keras.initializers.Initializer:
    return tf_keras.initializers.TruncatedNormal(
        stddev=self.task_config.encoder.initializer_range
    )

  def build_model(self) -> tf_keras.Model:
    config = self.task_config
    self._encoder = encoders.build_encoder(config.encoder)
    model = self.build_head(self._encoder)
    depths = layerwise_decay.variable_depths(model, self._encoder)
    self._lr_multipliers = layerwise_decay.layerwise_multipliers(
        depths, config.encoder.num_layers, config.layerwise_lr_decay
    )
    return model

  def initialize(self, model: tf_keras.Model) -> None:
    """Loads the pretrained encoder (called when no checkpoint exists yet)."""
    del model  # The encoder was kept by build_model.
    if self.task_config.init_checkpoint:
      pretrained.restore(self._encoder, self.task_config.init_checkpoint)
      logging.info(
          'Restored the encoder from %s.', self.task_config.init_checkpoint
      )

  # Training.
  def train_step(self, inputs, model, optimizer, metrics=None):
    """Model Garden's step, or the original's summed loss (`summed_loss`)."""
    if not self.task_config.summed_loss:
      return super().train_step(inputs, model, optimizer, metrics=metrics)
    features, labels = inputs
    with tf.GradientTape() as tape:
      outputs = model(features, training=True)
      loss = self.build_losses(
          labels=labels, model_outputs=outputs, aux_losses=model.losses
      )
      summed_loss = loss * self.loss_terms(labels)
      if isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer):
        summed_loss = optimizer.get_scaled_loss(summed_loss)
    variables = model.trainable_variables
    gradients = tape.gradient(summed_loss, variables)
    if isinstance(optimizer, tf_keras.mixed_precision.LossScaleOptimizer):
      gradients = optimizer.get_unscaled_gradients(gradients)
    # Clip by the dense gradient's norm, as the original on TPU (one-hot
    # embedding lookups); an embedding's IndexedSlices repeat a token's row.
    gradients = [_deduplicated(g) for g in gradients]
    if self.task_config.gradient_clip_norm > 0:
      gradients, _ = tf.clip_by_global_norm(
          gradients, self.task_config.gradient_clip_norm
      )
    # The replicas' gradients are summed when applied: average them.
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    gradients = [
        None if g is None else tf.math.scalar_mul(1.0 / replicas, g)
        for g in gradients
    ]
    optimizer.apply_gradients(list(zip(gradients, variables)))
    if metrics:
      self.process_metrics(metrics, labels, outputs)
    return {self.loss: loss}

  def loss_terms(self, labels: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """The count `build_losses` averages over: the replica's examples."""
    return tf.cast(tf.shape(labels[self.label_keys()[0]])[0], tf.float32)

  # Optimizer.
  def create_optimizer(
      self,
      optimizer_config: optimization.OptimizationConfig,
      runtime_config=None,
      dp_config=None,
  ):
    """AdamW with layer-wise learning-rate decay (loss-scaled for float16)."""
    del dp_config
    config = self.task_config
    if config.warmup_times_decay:
      decay = optimizer_config.learning_rate.polynomial
      learning_rate = warmup_times_decay.WarmupTimesPolynomialDecay(
          decay.initial_learning_rate,
          decay.decay_steps,
          optimizer_config.warmup.linear.warmup_steps,
          decay.end_learning_rate,
          decay.power,
      )
    else:
      learning_rate = optimization.OptimizerFactory(
          optimizer_config
      ).build_learning_rate()
    optimizer = layerwise_decay.LayerwiseAdamWeightDecay(
        lr_multipliers=self._lr_multipliers,
        learning_rate=learning_rate,
        weight_decay_rate=config.weight_decay_rate,
        epsilon=config.adam_epsilon,
        beta_2=config.adam_beta_2,
        exclude_from_weight_decay=list(
            optimizer_config_lib.DEFAULT_WEIGHT_DECAY_EXCLUSIONS
        ),
        # With `summed_loss` the task's step clips (per replica) instead.
        gradient_clip_norm=(
            0.0 if config.summed_loss else config.gradient_clip_norm
        ),
        bias_correction=config.adam_bias_correction,
    )
    if runtime_config and runtime_config.loss_scale:
      optimizer = performance.configure_optimizer(
          optimizer, use_float16=True, loss_scale=runtime_config.loss_scale
      )
    return optimizer

  # Evaluation.
  def validation_step(self, inputs, model: tf_keras.Model, metrics=None):
    features, labels = inputs
    outputs = model(features, training=False)
    loss = self.build_losses(labels=labels, model_outputs=outputs)
    if metrics:
      self.process_metrics(metrics, labels, outputs)
    logs = {self.loss: loss}
    outputs = outputs if isinstance(outputs, Mapping) else {'logits': outputs}
    for key in self.eval_output_keys:
      logs[key] = outputs[key]
    for key in self.eval_label_keys:
      logs[key] = labels[key]
    return logs

  def aggregate_logs(self, state=None, step_outputs=None):
    keys = self.eval_output_keys + self.eval_label_keys
    state = state or {key: [] for key in keys}
    for key in keys:
      state[key].extend(np.asarray(value) for value in step_outputs[key])
    return state

  def reduce_aggregated_logs(self, aggregated_logs, global_step=None):
    outputs = {
        key: np.concatenate(values, axis=0)
        for key, values in aggregated_logs.items()
    }
    return self.compute_metrics(outputs)

  @abc.abstractmethod
  def compute_metrics(
      self, outputs: Mapping[str, np.ndarray]
  ) -> Dict[str, float]:
    """The paper's metrics over the whole evaluation split."""

  @abc.abstractmethod
  def headline_metric(self) -> str:
    """The metric key a results table shows for this task."""


class AccuracyMetricMixin:
  """Training/eval Keras accuracy of `labels['label_ids']` vs logit outputs."""

  def build_metrics(self, training=None):
    del training
    return [tf_keras.metrics.SparseCategoricalAccuracy(name='accuracy')]

  def process_metrics(self, metrics, labels, model_outputs):
    for metric in metrics:
      metric.update_state(labels['label_ids'], model_outputs)


def softmax_cross_entropy(
    label_ids: tf.Tensor, logits: tf.Tensor, aux_losses=None
) -> tf.Tensor:
  """Mean cross-entropy of `[batch]` labels under `[batch, classes]` logits.

  Plus the model's auxiliary losses.
  """
  loss = tf.reduce_mean(
      tf_keras.losses.sparse_categorical_crossentropy(
          label_ids, tf.cast(logits, tf.float32), from_logits=True
      )
  )
  return plus_aux_losses(loss, aux_losses)


def plus_aux_losses(loss: tf.Tensor, aux_losses=None) -> tf.Tensor:
  """`loss` plus the model's auxiliary losses (`model.losses`), if any."""
  return loss + tf.add_n(aux_losses) if aux_losses else loss


def _deduplicated(gradient):
  """An `IndexedSlices` gradient with each row once (its copies summed)."""
  if not isinstance(gradient, tf.IndexedSlices):
    return gradient
  rows, positions = tf.unique(gradient.indices)
  values = tf.math.unsorted_segment_sum(
      gradient.values, positions, tf.shape(rows)[0]
  )
  return tf.IndexedSlices(values, rows, gradient.dense_shape)


def masked_mean(values: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
  """sum(values * weights) / max(sum(weights), 1)."""
  weights = tf.cast(weights, values.dtype)
  return tf.reduce_sum(values * weights) / tf.maximum(
      tf.reduce_sum(weights), 1.0
  )
