"""Model Garden trainer: XLA on request, composed with the run's guards.

Differences from `base_trainer.Trainer`:
  * `jit_compile` on any device (Model Garden: GPUs only); off in configs,
    as it is slower on the 2-core CPU.
  * `step_logging`: `examples_per_second` and one log line per loop.
  * `nonfinite_loss`: checked at each loop's end, before Orbit's checkpoint.
  * `preemption`: a stop signal skips the loop's remaining steps, saves a
    checkpoint and raises `TrainingStopped`.
  * Deterministic runs checkpoint the random generators with the weights.
  * `train=True` creates the heads' and optimizer's variables when built, by
    calling the model on placeholders in a scratch graph: a `tf.function`
    whose trace creates variables is traced twice. The optimizer gets slots
    for every trainable variable, also those without gradients (poolers).
"""

from typing import Optional

import tensorflow as tf
import tf_keras

from official.core import base_trainer
from official_repro.training import nonfinite_loss
from official_repro.training import preemption
from official_repro.training import reproducibility
from official_repro.training import step_logging


def _placeholder(spec: tf.TypeSpec) -> tf.Tensor:
  """A placeholder for one replica's share of a (`PerReplica`) spec."""
  # Private: a `PerReplicaSpec` has no public accessor of its replicas' specs.
  value_specs = getattr(spec, '_value_specs', None)
  if value_specs:
    spec = value_specs[0]
  return tf.compat.v1.placeholder(spec.dtype, spec.shape)


class Trainer(base_trainer.Trainer):
  """`base_trainer.Trainer` plus the behaviour in the module docstring."""

  def __init__(
      self,
      *args,
      jit_compile: bool = False,
      model_dir: Optional[str] = None,
      **kwargs,
  ):
    self._jit_compile = jit_compile
    self._model_dir = model_dir
    self._loop_log = step_logging.LoopLog()
    self.last_train_logs = {}
    super().__init__(*args, **kwargs)
    generators = reproducibility.random_generators(self.model)
    if kwargs.get('train', True):
      self._create_training_variables()
    if generators:
      # Deterministic mode: dropout and sampling streams resume with the
      # weights (Keras leaves them out of checkpoints).
      self._checkpoint = tf.train.Checkpoint(
          global_step=self.global_step,
          model=self.model,
          optimizer=self.optimizer,
          random_generators=generators,
          **getattr(self.model, 'checkpoint_items', {}),
      )
    self._stop_check = preemption.StopCheck(self.strategy)

  def _create_training_variables(self) -> None:
    """Builds the model on the training batch's spec, then the optimizer."""
    spec = self.train_dataset.element_spec
    if isinstance(spec, tuple) and len(spec) == 2:
      spec = spec[0]  # (features, labels), as `base_task.Task.train_step`
    with self.strategy.scope():
      # Internal: no public graph lifts the variables out as tracing does.
      with tf.__internal__.FuncGraph('build_graph').as_default():
        features = tf.nest.map_structure(_placeholder, spec)
        self.model(features, training=True)
      if isinstance(self.optimizer, tf_keras.optimizers.legacy.Optimizer):
        # Private: legacy optimizers have no public `build(var_list)`.
        self.optimizer._create_all_weights(self.model.trainable_variables)  # pylint: disable=protected-access

  def train_loop_begin(self):
    super().train_loop_begin()
    self._loop_log.begin(int(self.global_step.numpy()))

  def train_step(self, iterator):
    """One training step; none once a stop signal came (`preemption`)."""
    gate = preemption.step_gate()
    if gate is None or not self._stop_check.skips_steps:
      self._one_step(iterator)
      return

    def step():
      self._one_step(iterator)
      return tf.constant(True)

    tf.cond(gate.read_value(), lambda: tf.constant(False), step)

  def _one_step(self, iterator):
    """One training step, XLA-compiled when `jit_compile` is set."""
    if not self._jit_compile:
      super().train_step(iterator)
      return

    def step_fn(inputs):
      task_train_step = tf.function(self.task.train_step, jit_compile=True)
      logs = task_train_step(
          inputs,
          model=self.model,
          optimizer=self.optimizer,
          metrics=self.train_metrics,
      )
      self._train_loss.update_state(logs[self.task.loss])
      self.global_step.assign_add(1)

    inputs = self.next_train_inputs(iterator)
    self.strategy.run(step_fn, args=(inputs,), options=self._runtime_options)

  def train_loop_end(self):
    """Stops on a non-finite loss, logs throughput, stops on a signal."""
    end_step = int(self.global_step.numpy())
    logs = super().train_loop_end()
    nonfinite_loss.check(
        logs['training_loss'],
        self._loop_log.first_step,
        end_step,
        self._model_dir,
    )
    self.last_train_logs = self._loop_log.end(
        logs, end_step, self.config.task.train_data.global_batch_size
    )
    signal_name = self._stop_check.signal_name()
    if signal_name:
      checkpoint = preemption.save_checkpoint_now(
          self.checkpoint,
          self.global_step,
          self.strategy,
          self._model_dir,
          self.config.trainer.max_to_keep,
      )
      preemption.clear_request()
      raise preemption.TrainingStopped(signal_name, end_step, checkpoint)
    return logs
