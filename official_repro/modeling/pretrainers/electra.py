"""ELECTRA: a masked-LM generator and a replaced-token-detection discriminator.

Backbone-agnostic (BERT, ALBERT for 001, ConvBERT for 002). The forward pass
is a chain of parts other objectives reuse or override one at a time:
`generator_logits`, `sample_replacements`, `corrupt` (label 1 where a token
differs from the original), `discriminate`, `rtd_logits`. The losses are the
task's (`official_repro.tasks.electra`).

Model Garden's `ElectraPretrainer` is not subclassed: its `call` always runs
a next-sentence head (variables and compute with no loss here), samples
through a one-hot at temperature 1.0 (001 uses 0.8), and hard-wires one
replacement per position (TEAMS needs K candidates, SCRIPT no second
network). The pretrainer is built from encoder configs so that
`from_config(get_config())` rebuilds an equal model, sharing included.
"""

from typing import Any, Dict, Optional, Tuple

import tensorflow as tf
import tf_keras

from official.nlp.modeling import layers
from official_repro.modeling import activations
from official_repro.modeling import arguments
from official_repro.modeling.heads import rtd
from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import networks as networks_lib
from official_repro.modeling.pretrainers import sampling


def check_settings(
    temperature: float, owner: str = 'ElectraPretrainer'
) -> None:
  """Raises `ArgumentError` for a setting `owner` (a pretrainer) cannot take."""
  if not temperature > 0:
    raise arguments.ArgumentError(
        owner,
        lambda name: f'{name("temperature")} must be > 0, got {temperature}.',
    )


@tf_keras.utils.register_keras_serializable(package='official_repro')
class ElectraPretrainer(tf_keras.Model):
  """Generator + discriminator trained with MLM and replaced-token detection.

  Attributes: `generator`, `discriminator` (kept for fine-tuning),
  `mlm_head` (Model Garden `MaskedLM`) and `rtd_head`.
  """

  def __init__(
      self,
      discriminator_config: encoders.EncoderConfigLike,
      generator_config: encoders.EncoderConfigLike,
      tie_embeddings: bool = True,
      num_shared_layers: int = 0,
      temperature: float = 1.0,
      disallow_original: bool = False,
      mlm_activation: str = 'gelu_tanh',
      initializer_range: float = 0.02,
      tie_embedding_block: bool = False,
      **kwargs,
  ):
    """Builds the networks and heads.

    `generator_config` e.g. from `networks.scale_generator`; `tie_embeddings`
    shares the word table, `tie_embedding_block` also position, type and
    LayerNorm (google-research/electra; Model Garden ties the word table only);
    `num_shared_layers` generator bottom layers are the discriminator's (0 in
    ELECTRA); `temperature` > 0 of sampling; `disallow_original` never samples
    the original; `mlm_activation` and `initializer_range` are the heads'.
    """
    super().__init__(**kwargs)
    check_settings(temperature)
    discriminator_config = encoders.as_encoder_config(discriminator_config)
    generator_config = encoders.as_encoder_config(generator_config)
    self.generator, self.discriminator = networks_lib.build_networks(
        discriminator_config,
        generator_config,
        tie_embeddings,
        num_shared_layers,
        tie_embedding_block,
    )
    self._temperature = temperature
    self._disallow_original = disallow_original
    self.sampling_seeds = sampling.SeedStream(name='sampling_seeds')
    initializer = tf_keras.initializers.TruncatedNormal(
        stddev=initializer_range
    )
    self.mlm_head = layers.MaskedLM(
        embedding_table=self.generator.get_embedding_table(),
        activation=activations.get(mlm_activation),
        initializer=initializer,
        output='logits',
        name='generator_mlm',
    )
    self.rtd_head = rtd.ReplacedTokenDetectionHead(
        hidden_size=discriminator_config.hidden_size,
        activation=mlm_activation,
        initializer_range=initializer_range,
        name='discriminator_rtd',
    )
    self._config = dict(
        discriminator_config=discriminator_config.as_dict(),
        generator_config=generator_config.as_dict(),
        tie_embeddings=tie_embeddings,
        num_shared_layers=num_shared_layers,
        temperature=temperature,
        disallow_original=disallow_original,
        mlm_activation=mlm_activation,
        initializer_range=initializer_range,
        tie_embedding_block=tie_embedding_block,
    )

  @property
  def checkpoint_items(self) -> Dict[str, tf.Module]:
    """What fine-tuning restores (`encoder`) and the rest, by name."""
    return dict(
        encoder=self.discriminator,
        generator=self.generator,
        generator_mlm=self.mlm_head,
        discriminator_rtd=self.rtd_head,
    )

  @staticmethod
  def _encoder_inputs(
      word_ids: tf.Tensor, inputs: Dict[str, tf.Tensor]
  ) -> Dict[str, tf.Tensor]:
    return dict(
        input_word_ids=word_ids,
        input_mask=inputs['input_mask'],
        input_type_ids=inputs['input_type_ids'],
    )

  def generator_logits(
      self, inputs: Dict[str, tf.Tensor], training: Optional[bool] = None
  ) -> Tuple[tf.Tensor, Dict[str, Any]]:
    """Step 1: `(mlm_logits [B, P, V], generator outputs)`."""
    outputs = self.generator(
        self._encoder_inputs(inputs['input_word_ids'], inputs),
        training=training,
    )
    logits = self.mlm_head(
        outputs['sequence_output'],
        masked_positions=inputs['masked_lm_positions'],
    )
    return logits, outputs

  def sample_replacements(
      self,
      mlm_logits: tf.Tensor,
      inputs: Dict[str, tf.Tensor],
      training: Optional[bool] = None,
  ) -> tf.Tensor:
    """Step 2: one replacement id per masked position, int32 `[B, P]`."""
    return sampling.sample_from_logits(
        tf.stop_gradient(mlm_logits),
        self._temperature,
        disallowed_ids=(
            inputs['masked_lm_ids'] if self._disallow_original else None
        ),
        seed=self.sampling_seeds.next_seed(training),
    )

  @staticmethod
  def corrupt(
      inputs: Dict[str, tf.Tensor], replacements: tf.Tensor
  ) -> Tuple[tf.Tensor, tf.Tensor]:
    """Step 3: int32 `[B, T]` corrupted ids and RTD labels.

    `replacements` (int `[B, P]`) go to the masked positions; the label is 1
    on real tokens that differ from the original.
    """
    positions = inputs['masked_lm_positions']
    weights = inputs['masked_lm_weights']
    original = sampling.restore_original_ids(
        inputs['input_word_ids'], positions, inputs['masked_lm_ids'], weights
    )
    corrupted = sampling.scatter_at_positions(
        original, positions, replacements, weights
    )
    labels = tf.cast(tf.not_equal(corrupted, original), tf.int32)
    return corrupted, labels * tf.cast(inputs['input_mask'], tf.int32)

  def discriminate(
      self,
      corrupted_ids: tf.Tensor,
      inputs: Dict[str, tf.Tensor],
      training: Optional[bool] = None,
  ) -> Dict[str, Any]:
    """Step 4: the discriminator's outputs on the corrupted sequence."""
    return self.discriminator(
        self._encoder_inputs(corrupted_ids, inputs), training=training
    )

  def rtd_logits(self, discriminator_outputs: Dict[str, Any]) -> tf.Tensor:
    """Step 5: float `[B, T]` replaced-token logits."""
    return self.rtd_head(discriminator_outputs['sequence_output'])

  def call(
      self, inputs: Dict[str, tf.Tensor], training=None
  ) -> Dict[str, tf.Tensor]:
    """Runs generator, sampling and discriminator.

    `inputs`: `input_word_ids` (masked), `input_mask`, `input_type_ids` int
    `[B, T]`; `masked_lm_positions`, `masked_lm_ids` int and
    `masked_lm_weights` float `[B, P]`. Returns `mlm_logits` `[B, P, V]`,
    `sampled_ids` `[B, P]`, `discriminator_ids`, `rtd_labels` (1 = replaced and
    different) int32 and `rtd_logits` float `[B, T]`.
    """
    mlm_logits, _ = self.generator_logits(inputs, training)
    sampled = self.sample_replacements(mlm_logits, inputs, training)
    corrupted, labels = self.corrupt(inputs, sampled)
    discriminator_outputs = self.discriminate(corrupted, inputs, training)
    return dict(
        mlm_logits=mlm_logits,
        sampled_ids=sampled,
        discriminator_ids=corrupted,
        rtd_labels=labels,
        rtd_logits=self.rtd_logits(discriminator_outputs),
    )

  def get_config(self) -> Dict[str, Any]:
    return dict(self._config, name=self.name)
