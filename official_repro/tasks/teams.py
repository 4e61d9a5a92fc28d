"""TEAMS pretraining (paper 003): MLM + lambda1 * RTD + lambda2 * MWS.

Loss (003 Eq. 9): weighted L_MLM (over masked positions), L_RTD (over real
tokens) and L_MWS (softmax cross-entropy of the original among K + 1
candidates, over masked positions, as Model Garden's `TeamsPretrainTask`); a
weight of 0 drops its term. The generator keeps the width, takes
`generator_layer_fraction` of the depth (003 Table 5: 1/2) and shares
`layer_sharing` of its bottom layers. gin: `teams.<field>`.
"""

import dataclasses
from typing import Dict, List

import tensorflow as tf
import tf_keras

from official.core import task_factory
from official.modeling.hyperparams import base_config
from official.projects.teams import teams as stock_teams
from official.projects.teams import teams_task as stock_teams_task
from official_repro.common import cli
from official_repro.metrics import flops
from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import electra
from official_repro.modeling.pretrainers import teams
from official_repro.tasks import objectives
from official_repro.tasks import pretraining

# `experiment.objective` and the gin name of `teams.<field>`.
OBJECTIVE_NAME = 'teams'


@dataclasses.dataclass
class TeamsModelConfig(pretraining.GeneratorShape, base_config.Config):
  """The TEAMS pretrainer and its loss weights (networks: `GeneratorShape`).

  Attributes:
    num_negatives: K, non-original candidates per masked position.
    negative_sampling: 'sampled' or 'hardest'.
    task_heads: 'attention', 'attention_on_top' or 'ffn'.
    exported_representations: 'mws' or 'rtd': the side kept for fine-tuning.
    tie_embedding_block: also tie position, type tables and LayerNorm.
  """

  num_negatives: int = 1
  negative_sampling: str = 'sampled'
  task_heads: str = 'attention'
  exported_representations: str = 'mws'
  temperature: float = 1.0
  tie_embeddings: bool = True
  tie_embedding_block: bool = False
  generator_loss_weight: float = 1.0
  rtd_loss_weight: float = 1.0
  mws_loss_weight: float = 1.0
  mlm_activation: str = 'gelu_tanh'
  initializer_range: float = 0.02

  def exported_discriminator(self) -> encoders.EncoderConfig:
    """The discriminator kept for fine-tuning (L + 1: 'attention_on_top')."""
    return self.discriminator.replace(
        num_layers=teams.exported_depth(
            self.discriminator.num_layers, self.task_heads
        )
    )


@dataclasses.dataclass
class TeamsPretrainConfig(pretraining.PretrainTaskConfig):
  """TEAMS pretraining task config (loss scaling as in `PretrainTask`)."""

  model: TeamsModelConfig = dataclasses.field(default_factory=TeamsModelConfig)


def mws_loss(mws_logits: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
  """003 Eq. 8: -log P(original | candidates), averaged over masked slots.

  Args:
    mws_logits: float `[B, P, C]`, the original's logit at index 0.
    weights: float `[B, P]`, 1 for real masked slots.
  """
  logits = tf.cast(mws_logits, tf.float32)
  losses = -tf.nn.log_softmax(logits, axis=-1)[..., 0]
  weights = tf.cast(weights, tf.float32)
  return tf.math.divide_no_nan(
      tf.reduce_sum(losses * weights), tf.reduce_sum(weights)
  )


@task_factory.register_task_cls(TeamsPretrainConfig)
class TeamsPretrainTask(pretraining.ReplacedTokenTask):
  """MLM + RTD + MWS pretraining; ELECTRA's RTD metrics, MWS's own."""

  def build_model(
      self, params: TeamsModelConfig = None
  ) -> teams.TeamsPretrainer:
    config = params or self.task_config.model
    return teams.TeamsPretrainer(
        discriminator_config=config.exported_discriminator(),
        generator_config=config.generator(),
        num_negatives=config.num_negatives,
        negative_sampling=config.negative_sampling,
        task_heads=config.task_heads,
        exported_representations=config.exported_representations,
        tie_embeddings=config.tie_embeddings,
        num_shared_layers=config.num_shared_layers(),
        temperature=config.temperature,
        mlm_activation=config.mlm_activation,
        initializer_range=config.initializer_range,
        tie_embedding_block=config.tie_embedding_block,
    )

  def build_metrics(self, training=None) -> List[tf_keras.metrics.Metric]:
    return super().build_metrics(training) + [
        tf_keras.metrics.Mean(name='mws_loss'),
        tf_keras.metrics.Mean(name='mws_accuracy'),
    ]

  def process_metrics(self, metrics, labels, model_outputs):
    super().process_metrics(metrics, labels, model_outputs)
    by_name = {metric.name: metric for metric in metrics}
    # Correct when the original (index 0) has the largest logit.
    correct = tf.cast(
        tf.equal(tf.argmax(model_outputs['mws_logits'], axis=-1), 0), tf.float32
    )
    by_name['mws_accuracy'].update_state(
        correct, tf.cast(labels['masked_lm_weights'], tf.float32)
    )

  def total_loss(self, mlm_loss, rtd_loss, labels, model_outputs, metrics):
    """003 Eq. 9; updates the MWS loss metric."""
    selection_loss = mws_loss(
        model_outputs['mws_logits'], labels['masked_lm_weights']
    )
    metrics['mws_loss'].update_state(selection_loss)
    model = self.task_config.model
    total = model.generator_loss_weight * mlm_loss
    if model.rtd_loss_weight:
      total += model.rtd_loss_weight * rtd_loss
    if model.mws_loss_weight:
      total += model.mws_loss_weight * selection_loss
    return total


def _flops(
    task_config: TeamsPretrainConfig, seq_length: int, max_predictions: int
) -> Dict[str, flops.NetworkCost]:
  """TEAMS' terms: generator + MLM head; discriminator + RTD, MWS, task heads.

  Negative sampling is not counted, as ELECTRA's formula does not count its
  sampling.
  """
  model = task_config.model
  output_fraction = max_predictions / seq_length
  discriminator = objectives.network_shape(
      model.exported_discriminator(), seq_length
  )
  heads = dict(
      rtd=flops.rtd_head_flops(discriminator),
      mws=flops.mws_head_flops(
          discriminator, output_fraction, model.num_negatives + 1
      ),
  )
  if model.task_heads == 'ffn':
    heads['task_ffn_heads'] = 2 * flops.feed_forward_flops(discriminator)
  else:
    heads['task_layer'] = flops.block_flops(discriminator)
  return dict(
      generator=objectives.masked_lm_cost(
          model.generator(), seq_length, output_fraction
      ),
      discriminator=flops.NetworkCost(
          discriminator, model.discriminator.backbone, heads
      ),
  )


def _stock_task_config(
    task_config: TeamsPretrainConfig, train_data, max_predictions: int
) -> stock_teams_task.TeamsPretrainTaskConfig:
  """Model Garden's `TeamsPretrainTask` on the same networks (K + 1 candidates).

  It always ties the whole embedding block, also for a config that ties the
  word table only (a difference the parity test names).

  Raises:
    UserError: for settings Model Garden's TEAMS does not have.
  """
  del max_predictions  # Model Garden's TEAMS reads it from the data config.
  model = task_config.model
  if (
      model.task_heads != 'attention'
      or model.exported_representations != 'mws'
      or model.negative_sampling != 'sampled'
      or model.temperature != 1.0
      or not model.tie_embeddings
  ):
    raise cli.UserError(
        "Model Garden's TeamsPretrainer has only attention task heads, the "
        'MWS side exported, sampled negatives at temperature 1 and tied '
        'embeddings; measure this config with --variants=ours.'
    )
  discriminator = encoders.to_model_garden_config(model.discriminator)
  generator = encoders.to_model_garden_config(model.generator())
  if discriminator.type != 'bert':
    raise cli.UserError(
        "Model Garden's TEAMS builds BERT-style networks only, not backbone "
        f'{model.discriminator.backbone!r}; measure it with --variants=ours.'
    )
  return stock_teams_task.TeamsPretrainTaskConfig(
      model=stock_teams.TeamsPretrainerConfig(
          candidate_size=teams.model_garden_candidate_size(model.num_negatives),
          generator_loss_weight=model.generator_loss_weight,
          discriminator_rtd_loss_weight=model.rtd_loss_weight,
          discriminator_mws_loss_weight=model.mws_loss_weight,
          tie_embeddings=True,
          num_shared_generator_hidden_layers=model.num_shared_layers(),
          num_discriminator_task_agnostic_layers=(
              model.discriminator.num_layers - 1
          ),
          generator=generator.bert,
          discriminator=discriminator.bert,
      ),
      train_data=train_data,
  )


def _finalize(task_config: TeamsPretrainConfig) -> TeamsPretrainConfig:
  """Checks the generator's shape and the pretrainer's settings when read."""
  model = task_config.model
  teams.check_settings(
      model.task_heads,
      model.exported_representations,
      model.negative_sampling,
      model.num_negatives,
  )
  electra.check_settings(model.temperature)
  return pretraining.check_generator_shape(task_config)


OBJECTIVE = objectives.register(
    objectives.Objective(
        name=OBJECTIVE_NAME,
        task_config_cls=TeamsPretrainConfig,
        model_config_cls=TeamsModelConfig,
        encoder_field='discriminator',
        finalize=_finalize,
        required=(
            'generator_layer_fraction',
            'layer_sharing',
            'num_negatives',
        ),
        exported_encoder=TeamsModelConfig.exported_discriminator,
        flops=_flops,
        stock_task_config=_stock_task_config,
    )
)
