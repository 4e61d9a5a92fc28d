"""Mixed precision and XLA on CPU.

Every objective, backbone and fine-tuning task under XLA and mixed
precision, on CPU: the default suite compiles one pair of objective and
backbone; `-m slow` every pair and every fine-tuning task.

TPUs run the training step compiled by XLA in bfloat16; GPUs run it in
float16 with loss scaling (or bfloat16). No accelerator here runs
TensorFlow, so each of those paths runs on the CPU: for every registered
pretraining objective and every registered backbone (read from the
registries, so that a new plug-in is covered without editing this file) a
tiny model

  * trains two steps compiled by XLA in mixed bfloat16 (a TPU's step);
  * trains two steps in mixed float16 under a loss-scale optimizer (a
    GPU's);
  * gives, on the same weights and batch, a first-step loss within
    `_TOLERANCE` of float32's in both mixed precisions;
  * keeps its variables, its logits and its loss in float32.

One task of every fine-tuning task class (GLUE, SQuAD, RACE, tagging with a
CRF) does the same from a tiny pretrained encoder, its loss-scale optimizer
made by the task itself.
"""

import dataclasses
import os
import random

import gin
import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from official.core import task_factory
from official.modeling import optimization
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import pretrained
from official_repro.tasks import finetuning_base
from official_repro.tasks import finetuning_schedule
from official_repro.tasks import objectives
from official_repro.training import finetuning
from official_repro.training import gin_utils
from official_repro.training import precision
from tests.plugins import frozen_generator_mlm  # noqa: F401  (registers the plug-in)
from tests.plugins import rezero_backbone  # noqa: F401  (registers the plug-in)
from tests.training import test_finetuning as finetuning_fixtures

# Relative difference of a mixed-precision first-step loss from float32's.
# bfloat16 keeps 8 bits of mantissa (a relative rounding of 2^-8 per
# operation); float16 keeps 11.
_TOLERANCE = {'mixed_bfloat16': 0.03, 'mixed_float16': 0.01}
# Values for the model-config fields an objective requires gin to bind.
_REQUIRED = {'generator_size': 0.5}
_BACKBONE_BINDINGS = {
    'convbert': ['convbert.kernel_size = 3'],
    'rezero': ['import tests.plugins.rezero_backbone'],
}
_OBJECTIVE_IMPORTS = {
    'frozen_generator_mlm': ['import tests.plugins.frozen_generator_mlm'],
}
# One layer keeps XLA's compilation short; TEAMS' attention task heads read
# the second-to-last layer, so it needs two.
_OBJECTIVE_SIZES = {'teams': ['encoder.num_layers = 2']}


def _objective_gin(name):
  path = os.path.join(gin_utils.REPO_ROOT, 'gin', 'pretrain', f'{name}.gin')
  return [path] if os.path.exists(path) else []


def _unbound(objective):
  """The objective's required fields its gin file leaves unbound."""
  unbound = []
  for field in objectives.get(objective).required:
    try:
      gin.query_parameter(f'{objective}.{field}')
    except ValueError:
      unbound.append(field)
  return unbound


def _task_config(records, objective, backbone):
  """The objective's tiny task config on `backbone`, from gin."""
  gin.clear_config()
  try:
    gin_utils.parse_config(
        _objective_gin(objective), _OBJECTIVE_IMPORTS.get(objective, [])
    )
    gin_utils.parse_config(
        [],
        [
            f'experiment.objective = {objective!r}',
            *(
                f'{objective}.{field} = {_REQUIRED[field]}'
                for field in _unbound(objective)
            ),
            *_BACKBONE_BINDINGS.get(backbone, []),
            f'encoder.backbone = {backbone!r}',
            'encoder.hidden_size = 16',
            'encoder.num_layers = 1',
            *_OBJECTIVE_SIZES.get(objective, []),
            'encoder.num_attention_heads = 2',
            'encoder.intermediate_size = 32',
            'encoder.max_position_embeddings = 32',
            'encoder.dropout_rate = 0.0',
            'encoder.attention_dropout_rate = 0.0',
            f'pretrain_data.input_path = {records!r}',
            'pretrain_data.max_seq_length = 32',
            'pretrain_data.train_batch_size = 4',
            'pretrain_data.seed = 1',
        ],
    )
    return objectives.task_config_from_gin(objective)
  finally:
    gin.clear_config()


# The pair the default suite compiles; `-m slow` compiles the others.
_DEFAULT_CASE = ('masked_lm', 'convbert')


def _cases():
  """Every (objective, backbone) pair, all but `_DEFAULT_CASE` marked slow."""
  objectives.load_builtin_objectives()
  backbones = encoders.backbone_names()
  return [
      pytest.param(
          objective,
          backbone,
          marks=()
          if (objective, backbone) == _DEFAULT_CASE
          else pytest.mark.slow,
      )
      for objective in objectives.names()
      for backbone in backbones
  ]


def _build(task_config, policy, batch, weights=None):
  """(task, model) built under `policy` and called once on `batch`.

  (task, model) built under `policy`, called once on `batch`, with
  `weights` if given.
  """
  previous = tf_keras.mixed_precision.global_policy()
  tf_keras.mixed_precision.set_global_policy(policy)
  try:
    task = task_factory.get_task(task_config)
    tf.random.set_seed(0)
    model = task.build_model()
    model(batch, training=False)
  finally:
    tf_keras.mixed_precision.set_global_policy(previous)
  if weights is not None:
    model.set_weights(weights)
  return task, model


def _first_loss(task, model, batch):
  """(loss, model outputs) of one forward pass, sampling seeded alike."""
  tf.random.set_seed(1)
  outputs = task.model_outputs(model, batch, training=True)
  loss = task.build_losses(
      labels=batch,
      model_outputs=outputs,
      metrics=task.build_metrics(training=True),
      aux_losses=model.losses,
  )
  return loss, outputs


def _train(task, model, batch, optimizer, jit_compile):
  """The losses of two training steps on `batch`."""
  metrics = task.build_metrics(training=True)
  step = task.train_step
  if jit_compile:
    step = tf.function(step, jit_compile=True)
  return [
      float(step(batch, model, optimizer, metrics)[task.loss]) for _ in range(2)
  ]


@pytest.mark.parametrize('objective, backbone', _cases())
def test_trains_under_xla_and_mixed_precision(
    tiny_records, objective, backbone
):
  task_config = _task_config(tiny_records, objective, backbone)
  batch = next(
      iter(
          task_factory.get_task(task_config).build_inputs(
              task_config.train_data
          )
      )
  )
  task, reference = _build(task_config, 'float32', batch)
  reference_loss, _ = _first_loss(task, reference, batch)
  weights = reference.get_weights()

  for policy in ('mixed_bfloat16', 'mixed_float16'):
    task, model = _build(task_config, policy, batch, weights)
    assert {v.dtype for v in model.variables} == {tf.float32}, policy
    loss, outputs = _first_loss(task, model, batch)
    assert loss.dtype == tf.float32, policy
    for name, tensor in outputs.items():
      if 'logits' in name:
        assert tensor.dtype == tf.float32, (policy, name)
    assert abs(float(loss) - float(reference_loss)) <= (
        _TOLERANCE[policy] * abs(float(reference_loss))
    ), (policy, float(loss), float(reference_loss))
    # SGD: the fewest update ops for XLA to compile; the step's forward and
    # backward passes are the objective's whatever the optimizer.
    optimizer = tf_keras.optimizers.legacy.SGD(1e-3)
    if policy == 'mixed_float16':
      optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
    losses = _train(
        task, model, batch, optimizer, jit_compile=policy == 'mixed_bfloat16'
    )
    assert all(np.isfinite(losses)), (policy, losses)


# One task of every fine-tuning task class, with its tiny data.
_FINETUNING_TASKS = [
    ('mrpc', {}),
    # The original recipe's own step: summed loss, clipped by the task.
    (
        'mrpc',
        {
            'finetuning.summed_loss': True,
            'finetuning.data_order': 'original',
            'glue.head': 'first_token',
        },
    ),
    ('squad11', {'squad.doc_stride': 16, 'squad.max_query_length': 16}),
    # Multiple choice is a classifier over [CLS] per choice, like MRPC's.
    pytest.param('race', {}, marks=pytest.mark.slow),
    ('pos', {'pos.use_crf': True}),
]


def _finetuning_task_config(task, task_params, encoder, data_dir):
  gin.clear_config()
  try:
    gin_utils.parse_config(
        [], [f'{name} = {value!r}' for name, value in task_params.items()]
    )
    schedule = finetuning_schedule.FinetuningSchedule(
        task=task,
        learning_rate=1e-3,
        train_batch_size=4,
        num_epochs=1,
        warmup_fraction=0.1,
        layerwise_lr_decay=0.8,
        max_seq_length=64,
    )
    protocol = finetuning_schedule.RunProtocol(
        num_runs=1, aggregation='median', selection='best'
    )
    config = finetuning.build_task_config(schedule, protocol, encoder, data_dir)
  finally:
    gin.clear_config()
  return dataclasses.replace(
      config,
      train_data=finetuning_base.FinetuneDataConfig(
          split='train', is_training=True, seed=0, global_batch_size=4
      ),
  )


def _finetuning_loss(task, model, batch):
  features, labels = batch
  return task.build_losses(
      labels=labels,
      model_outputs=model(features, training=False),
      aux_losses=model.losses,
  )


@pytest.mark.slow
@pytest.mark.parametrize('task_name, task_params', _FINETUNING_TASKS)
def test_finetuning_trains_under_xla_and_mixed_precision(
    exported_encoder, tmp_path, task_name, task_params
):
  data_dir = finetuning_fixtures.DATA_WRITERS[task_name](
      tmp_path / 'data', random.Random(0)
  )
  config = _finetuning_task_config(
      task_name, task_params, pretrained.resolve(exported_encoder), data_dir
  )
  task = task_factory.get_task(config)
  batch = next(iter(task.build_inputs(config.train_data)))
  reference = task.build_model()
  task.initialize(reference)
  reference_loss = _finetuning_loss(task, reference, batch)
  weights = reference.get_weights()
  optimization_config = optimization.OptimizationConfig(
      dict(
          optimizer=dict(type='adamw'),
          learning_rate=dict(
              type='constant', constant=dict(learning_rate=1e-3)
          ),
      )
  )
  for policy, dtype in (
      ('mixed_bfloat16', 'bfloat16'),
      ('mixed_float16', 'float16'),
  ):
    with precision.policy(dtype):
      task = task_factory.get_task(config)
      model = task.build_model()
      model(batch[0], training=False)
      optimizer = task.create_optimizer(
          optimization_config, precision.runtime_config(dtype)
      )
    model.set_weights(weights)
    assert {v.dtype for v in model.variables} == {tf.float32}, policy
    loss = _finetuning_loss(task, model, batch)
    assert loss.dtype == tf.float32, policy
    assert abs(float(loss) - float(reference_loss)) <= (
        _TOLERANCE[policy] * abs(float(reference_loss))
    ), (policy, float(loss), float(reference_loss))
    assert isinstance(
        optimizer, tf_keras.mixed_precision.LossScaleOptimizer
    ) == (dtype == 'float16'), policy
    step = task.train_step
    if dtype == 'bfloat16':
      step = tf.function(step, jit_compile=True)
    metrics = task.build_metrics(training=True)
    losses = [
        float(step(batch, model, optimizer, metrics)[task.loss])
        for _ in range(2)
    ]
    assert all(np.isfinite(losses)), (policy, losses)
