"""A test-only objective: masked LM on tokens replaced by a frozen generator.

The whole objective is this module: its model config, its Keras model, its
Model Garden task and its registry entry. A gin string selects it
(`import tests.plugins.frozen_generator_mlm` and
`experiment.objective = 'frozen_generator_mlm'`); nothing in the package
names it. The model reuses ELECTRA's parts: a randomly initialised
generator that is never trained proposes a token for every masked position
(`generator_logits`, `sample_replacements`, `corrupt`), and the encoder
predicts the original tokens from the corrupted sequence with an MLM head
on its own embedding table.
"""

import dataclasses
from typing import Any, Dict

import tensorflow as tf

from official.core import task_factory
from official.modeling.hyperparams import base_config
from official.nlp.modeling import layers
from official_repro.modeling import activations
from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import electra
from official_repro.modeling.pretrainers import networks
from official_repro.tasks import objectives
from official_repro.tasks import pretraining


@dataclasses.dataclass
class FrozenGeneratorModelConfig(base_config.Config):
  encoder: encoders.EncoderConfig = dataclasses.field(
      default_factory=encoders.EncoderConfig
  )
  generator_size: float = 0.5
  temperature: float = 1.0


@dataclasses.dataclass
class FrozenGeneratorPretrainConfig(pretraining.PretrainTaskConfig):
  model: FrozenGeneratorModelConfig = dataclasses.field(
      default_factory=FrozenGeneratorModelConfig
  )


class FrozenGeneratorMLM(electra.ElectraPretrainer):
  """ELECTRA's generator and corruption; MLM on the corrupted sequence."""

  def __init__(
      self, encoder_config, generator_config, temperature=1.0, **kwargs
  ):
    super().__init__(
        encoder_config,
        generator_config,
        tie_embeddings=False,
        temperature=temperature,
        **kwargs,
    )
    self._plugin_config = dict(
        encoder_config=encoders.as_encoder_config(encoder_config).as_dict(),
        generator_config=encoders.as_encoder_config(generator_config).as_dict(),
        temperature=temperature,
    )
    self.generator.trainable = False
    self.mlm_head.trainable = False
    self.encoder_mlm_head = layers.MaskedLM(
        embedding_table=self.discriminator.get_embedding_table(),
        activation=activations.get('gelu_tanh'),
        output='logits',
        name='encoder_mlm',
    )

  def call(self, inputs: Dict[str, tf.Tensor], training=None) -> Dict[str, Any]:
    generator_logits, _ = self.generator_logits(inputs, training=False)
    corrupted, _ = self.corrupt(
        inputs, self.sample_replacements(generator_logits, inputs)
    )
    outputs = self.discriminate(corrupted, inputs, training)
    return dict(
        mlm_logits=self.encoder_mlm_head(
            outputs['sequence_output'],
            masked_positions=inputs['masked_lm_positions'],
        )
    )

  def get_config(self) -> Dict[str, Any]:
    return dict(self._plugin_config, name=self.name)


@task_factory.register_task_cls(FrozenGeneratorPretrainConfig)
class FrozenGeneratorTask(pretraining.PretrainTask):
  """Masked LM (Model Garden's loss and metrics) on the corrupted input."""

  def build_model(self, params=None):
    config = params or self.task_config.model
    return FrozenGeneratorMLM(
        config.encoder,
        networks.scale_generator(config.encoder, config.generator_size),
        temperature=config.temperature,
    )


OBJECTIVE = objectives.register(
    objectives.Objective(
        name='frozen_generator_mlm',
        task_config_cls=FrozenGeneratorPretrainConfig,
        model_config_cls=FrozenGeneratorModelConfig,
        encoder_field='encoder',
    )
)
