"""ELECTRA / ALE / ConvBERT pretraining (replaced-token detection).

Loss = generator_loss_weight * MLM (over masked positions) + rtd_loss_weight
* RTD (over real tokens); the backbone (BERT, ALBERT, ConvBERT) is the
encoder config's. gin: `electra.<field>`.
"""

import dataclasses
from typing import Dict


from official.core import config_definitions as cfg
from official.core import task_factory
from official.modeling.hyperparams import base_config
from official.nlp.configs import electra as stock_electra
from official.nlp.tasks import electra_task as stock_electra_task
from official_repro.common import cli
from official_repro.metrics import flops
from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import electra
from official_repro.tasks import objectives
from official_repro.tasks import pretraining

# `experiment.objective` and the gin name of `electra.<field>`.
OBJECTIVE_NAME = 'electra'


@dataclasses.dataclass
class ElectraModelConfig(pretraining.GeneratorShape, base_config.Config):
  """The ELECTRA pretrainer and its loss weights (networks: `GeneratorShape`).

  `tie_embeddings` ties the word table; `tie_embedding_block` also the
  position and type tables and LayerNorm (google-research/electra's).
  """

  temperature: float = 1.0
  disallow_original: bool = False
  tie_embeddings: bool = True
  tie_embedding_block: bool = False
  generator_loss_weight: float = 1.0
  rtd_loss_weight: float = 1.0
  mlm_activation: str = 'gelu_tanh'
  initializer_range: float = 0.02


@dataclasses.dataclass
class ElectraPretrainConfig(pretraining.PretrainTaskConfig):
  """ELECTRA pretraining task config (loss scaling as in `PretrainTask`)."""

  model: ElectraModelConfig = dataclasses.field(
      default_factory=ElectraModelConfig
  )


@task_factory.register_task_cls(ElectraPretrainConfig)
class ElectraPretrainTask(pretraining.ReplacedTokenTask):
  """Replaced-token-detection pretraining."""

  def build_model(
      self, params: ElectraModelConfig = None
  ) -> electra.ElectraPretrainer:
    config = params or self.task_config.model
    return electra.ElectraPretrainer(
        discriminator_config=config.discriminator,
        generator_config=config.generator(),
        tie_embeddings=config.tie_embeddings,
        num_shared_layers=config.num_shared_layers(),
        temperature=config.temperature,
        disallow_original=config.disallow_original,
        mlm_activation=config.mlm_activation,
        initializer_range=config.initializer_range,
        tie_embedding_block=config.tie_embedding_block,
    )

  def total_loss(self, mlm_loss, rtd_loss, labels, model_outputs, metrics):
    model = self.task_config.model
    return (
        model.generator_loss_weight * mlm_loss
        + model.rtd_loss_weight * rtd_loss
    )


def _flops(
    task_config: ElectraPretrainConfig, seq_length: int, max_predictions: int
) -> Dict[str, flops.NetworkCost]:
  """ELECTRA's terms: generator + MLM head, discriminator + RTD head."""
  model = task_config.model
  discriminator = objectives.network_shape(model.discriminator, seq_length)
  return dict(
      generator=objectives.masked_lm_cost(
          model.generator(), seq_length, max_predictions / seq_length
      ),
      discriminator=flops.NetworkCost(
          discriminator,
          model.discriminator.backbone,
          dict(rtd=flops.rtd_head_flops(discriminator)),
      ),
  )


def _stock_task_config(
    task_config: ElectraPretrainConfig, train_data, max_predictions: int
) -> cfg.TaskConfig:
  """Model Garden's `ElectraPretrainTask` on the same networks.

  Raises:
    UserError: for settings Model Garden's pretrainer does not have.
  """
  model = task_config.model
  if model.temperature != 1.0 or model.num_shared_layers():
    raise cli.UserError(
        "Model Garden's ElectraPretrainer samples at "
        'temperature 1.0 and shares no transformer layers; measure this '
        'config with --variants=ours.'
    )
  if model.tie_embedding_block:
    raise cli.UserError(
        "Model Garden's stock ElectraPretrainTask ties the word table only, "
        'not the position and type embeddings; set '
        'electra.tie_embedding_block = False to compare with it.'
    )
  discriminator = encoders.to_model_garden_config(model.discriminator)
  if discriminator.type != 'bert':
    raise cli.UserError(
        "Model Garden's stock ElectraPretrainTask ties embeddings only of its "
        f'BertEncoder, not of its {discriminator.type!r} encoder (backbone '
        f'{model.discriminator.backbone!r}); measure this config with '
        '--variants=ours.'
    )
  return stock_electra_task.ElectraPretrainConfig(
      model=stock_electra.ElectraPretrainerConfig(
          num_masked_tokens=max_predictions,
          sequence_length=train_data.seq_length,  # Model Garden's name.
          # Model Garden's name for our `rtd_loss_weight`.
          discriminator_loss_weight=model.rtd_loss_weight,
          tie_embeddings=model.tie_embeddings,
          disallow_correct=model.disallow_original,
          generator_encoder=encoders.to_model_garden_config(model.generator()),
          discriminator_encoder=discriminator,
          cls_heads=[],
      ),
      train_data=train_data,
  )


def _finalize(task_config: ElectraPretrainConfig) -> ElectraPretrainConfig:
  """Checks the generator's shape and the pretrainer's settings when read."""
  electra.check_settings(task_config.model.temperature)
  return pretraining.check_generator_shape(task_config)


OBJECTIVE = objectives.register(
    objectives.Objective(
        name=OBJECTIVE_NAME,
        task_config_cls=ElectraPretrainConfig,
        model_config_cls=ElectraModelConfig,
        encoder_field='discriminator',
        finalize=_finalize,
        required=('generator_size',),
        flops=_flops,
        stock_task_config=_stock_task_config,
    )
)
