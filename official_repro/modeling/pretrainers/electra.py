"""ELECTRA: a masked-LM generator and a replaced-token-detection discriminator.

Backbone-agnostic: the generator and discriminator are whatever
`encoders.build_encoder` makes of an `EncoderConfig` (BERT for ELECTRA,
ALBERT for ALE of paper 001). Written here rather than reusing Model Garden's
`ElectraPretrainer` because that one samples at a fixed temperature 1.0
(001 samples at 0.8), cannot exclude the original token from the sample, and
accepts only Model Garden's `BertEncoder`.

Forward pass on a masked batch:
  1. generator(masked ids) -> MLM logits at the masked positions, through an
     MLM head tied to the (shared) word-embedding table;
  2. one replacement per masked position sampled from
     softmax(stop_gradient(logits) / temperature);
  3. the discriminator reads the original sequence with the samples written
     in; its label is 1 where the token differs from the original ("replaced
     and different"; a sample equal to the original is labelled 0).
"""

import dataclasses
from typing import Dict

import tensorflow as tf
import tf_keras

from official.modeling import tf_utils
from official.nlp.modeling import layers
from official_repro.modeling.heads import rtd
from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import sampling


def scale_generator(discriminator: encoders.EncoderConfig,
                    generator_size: float) -> encoders.EncoderConfig:
  """The generator config: the discriminator's width scaled, same depth.

  Hidden size, attention heads and feed-forward size are multiplied by
  `generator_size` (rounded; at least one head); layer count, embedding width
  and backbone stay the discriminator's, and so does ConvBERT's `head_ratio`:
  mixed attention keeps `max(1, heads // head_ratio)` self-attention heads,
  so a generator with fewer heads than `head_ratio` keeps one, as in the
  ConvBERT reference.

  Raises:
    ValueError: if the scaled hidden size is not divisible by the scaled
      number of heads.
  """
  if not 0.0 < generator_size <= 1.0:
    raise ValueError(f'generator_size must be in (0, 1], got '
                     f'{generator_size}.')
  hidden = max(1, int(round(discriminator.hidden_size * generator_size)))
  heads = max(1, int(round(discriminator.num_attention_heads *
                           generator_size)))
  intermediate = max(1, int(round(discriminator.intermediate_size *
                                  generator_size)))
  generator = discriminator.replace(
      hidden_size=hidden, num_attention_heads=heads,
      intermediate_size=intermediate,
      embedding_size=discriminator.embedding_width)
  return encoders.validate(generator, name='generator (scaled encoder)')


class ElectraPretrainer(tf_keras.Model):
  """Generator + discriminator trained with MLM and replaced-token detection.

  Attributes:
    generator: the generator encoder.
    discriminator: the discriminator encoder (the model kept for fine-tuning).
  """

  def __init__(self,
               generator: tf_keras.Model,
               discriminator: tf_keras.Model,
               discriminator_hidden_size: int,
               temperature: float = 1.0,
               disallow_original: bool = False,
               mlm_activation: str = 'gelu',
               initializer_range: float = 0.02,
               **kwargs):
    super().__init__(**kwargs)
    if temperature <= 0:
      raise ValueError(f'electra.temperature must be > 0, got {temperature}.')
    self.generator = generator
    self.discriminator = discriminator
    self._temperature = temperature
    self._disallow_original = disallow_original
    initializer = tf_keras.initializers.TruncatedNormal(
        stddev=initializer_range)
    self.mlm_head = layers.MaskedLM(
        embedding_table=generator.get_embedding_table(),
        activation=tf_utils.get_activation(mlm_activation),
        initializer=initializer, output='logits', name='generator_mlm')
    self.rtd_head = rtd.ReplacedTokenDetectionHead(
        hidden_size=discriminator_hidden_size, activation=mlm_activation,
        initializer_range=initializer_range, name='discriminator_rtd')

  @property
  def checkpoint_items(self) -> Dict[str, tf.Module]:
    """What fine-tuning restores (`encoder`) and the rest, by name."""
    return dict(encoder=self.discriminator, generator=self.generator,
                generator_mlm=self.mlm_head, discriminator_rtd=self.rtd_head)

  def call(self, inputs: Dict[str, tf.Tensor], training=None
           ) -> Dict[str, tf.Tensor]:
    """Runs generator, sampling and discriminator.

    Args:
      inputs: `input_word_ids`, `input_mask`, `input_type_ids` (int
        `[batch, seq]`, word ids already masked), `masked_lm_positions`,
        `masked_lm_ids` (int `[batch, predictions]`), `masked_lm_weights`
        (float `[batch, predictions]`).
      training: dropout on or off.

    Returns:
      `mlm_logits` float `[batch, predictions, vocab]`;
      `sampled_ids` int32 `[batch, predictions]`;
      `discriminator_ids` int32 `[batch, seq]` (the corrupted sequence);
      `rtd_labels` int32 `[batch, seq]` (1 = replaced and different);
      `rtd_logits` float `[batch, seq]`.
    """
    mask = inputs['input_mask']
    type_ids = inputs['input_type_ids']
    positions = inputs['masked_lm_positions']
    weights = inputs['masked_lm_weights']
    generator_outputs = self.generator(
        dict(input_word_ids=inputs['input_word_ids'], input_mask=mask,
             input_type_ids=type_ids), training=training)
    mlm_logits = self.mlm_head(generator_outputs['sequence_output'],
                               masked_positions=positions)
    sampled = sampling.sample_from_logits(
        tf.stop_gradient(mlm_logits), self._temperature,
        disallowed_ids=(inputs['masked_lm_ids'] if self._disallow_original
                        else None))
    original = sampling.restore_original_ids(
        inputs['input_word_ids'], positions, inputs['masked_lm_ids'], weights)
    corrupted = sampling.scatter_at_positions(original, positions, sampled,
                                              weights)
    labels = tf.cast(tf.not_equal(corrupted, original), tf.int32)
    labels *= tf.cast(mask, tf.int32)
    discriminator_outputs = self.discriminator(
        dict(input_word_ids=corrupted, input_mask=mask,
             input_type_ids=type_ids), training=training)
    rtd_logits = self.rtd_head(discriminator_outputs['sequence_output'])
    return dict(mlm_logits=mlm_logits, sampled_ids=sampled,
                discriminator_ids=corrupted, rtd_labels=labels,
                rtd_logits=rtd_logits)


@dataclasses.dataclass(frozen=True)
class ElectraNetworks:
  """The two encoders of an ELECTRA model and their configs."""
  generator: tf_keras.Model
  discriminator: tf_keras.Model
  generator_config: encoders.EncoderConfig
  discriminator_config: encoders.EncoderConfig


def build_networks(discriminator_config: encoders.EncoderConfig,
                   generator_size: float,
                   tie_embeddings: bool = True) -> ElectraNetworks:
  """Builds the discriminator, then a scaled generator sharing its embeddings.

  Args:
    discriminator_config: the discriminator's architecture.
    generator_size: generator width as a fraction of the discriminator's.
    tie_embeddings: share the word-embedding table (one variable).

  Returns:
    The networks and their configs.
  """
  generator_config = scale_generator(discriminator_config, generator_size)
  discriminator = encoders.build_encoder(discriminator_config)
  generator = encoders.build_encoder(
      generator_config,
      word_embedding_layer=(discriminator.get_embedding_layer()
                            if tie_embeddings else None))
  return ElectraNetworks(generator, discriminator, generator_config,
                         discriminator_config)
