"""SCRIPT (paper 004): one masked-LM model that is its own generator and critic.

An encoder and Model Garden's `MaskedLM` head tied to its word embeddings
(the parameters of `BertPretrainerV2`). A step runs it twice: `mlm_logits`
at the masked positions, `sample_replacements` (Gumbel-max, 004 Eq. 3),
`critic_logits` on x-, and `critic_log_probabilities`, the (V+1)-class
classifier whose extra logit is 0 (004 Eq. 4-5). The losses are the task's
(`official_repro.tasks.script`); `pseudo_log_likelihood` is 004 Eq. 7.

The temperature changes only the relaxed sample, so tau != 1 without
`straight_through` is rejected. By default no gradient reaches the sample
(as in ELECTRA); `straight_through=True` feeds pass 2 with
`one_hot @ embedding_table` through a variable-free clone of the encoder
that takes word embeddings. `initial_positive_probability` starts the output
bias at logit(p) - log V so short runs get past the p(t+) ~ 1 - 1/V start
(not in 004, whose reference code starts the bias at zero, the default).
"""

import math
from typing import Any, Dict, Optional, Tuple

import tensorflow as tf
import tf_keras

from official.nlp.modeling import layers
from official_repro.modeling import activations
from official_repro.modeling import arguments
from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import electra
from official_repro.modeling.pretrainers import sampling


def critic_log_probabilities(logits: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
  """Float32 `[...]` (log p(t+), log p(t-)) from token logits `[..., V]`.

  With L = logsumexp(s_t): log sigmoid(L) and log sigmoid(-L) (004 Eq. 4-5),
  finite for logits of any magnitude.
  """
  log_sum_exp = tf.reduce_logsumexp(tf.cast(logits, tf.float32), axis=-1)
  return (tf.math.log_sigmoid(log_sum_exp), tf.math.log_sigmoid(-log_sum_exp))


def critic_prior_output_bias(
    positive_probability: float, vocab_size: int
) -> float:
  """The output bias b = logit(p) - log V at which the critic's p(t+) = p.

  `positive_probability` in (0, 1), as `check_settings` requires.
  """
  return math.log(
      positive_probability / (1.0 - positive_probability)
  ) - math.log(vocab_size)


class _MaskedLMWithOutputBias(layers.MaskedLM):
  """Model Garden's `MaskedLM` whose output bias starts at a constant.

  The initializer is replaced in `add_weight` (Model Garden offers no
  argument; assigning after `build` would overwrite restored values).
  """

  _BIAS_NAME = 'output_bias/bias'

  def __init__(self, *args, output_bias: float = 0.0, **kwargs):
    super().__init__(*args, **kwargs)
    self._output_bias = output_bias
    self._output_bias_initialized = False

  def add_weight(self, name=None, *args, **kwargs):
    if name == self._BIAS_NAME:
      kwargs['initializer'] = tf_keras.initializers.Constant(self._output_bias)
      self._output_bias_initialized = True
    return super().add_weight(name, *args, **kwargs)

  def build(self, input_shape):
    super().build(input_shape)
    if self._output_bias and not self._output_bias_initialized:
      raise RuntimeError(
          f'MaskedLM.build added no weight named {self._BIAS_NAME!r}, so '
          "ScriptPretrainer's initial_positive_probability would have no "
          "effect; Model Garden's MaskedLM has changed."
      )


def check_settings(
    temperature: float = 1.0,
    straight_through: bool = False,
    initial_positive_probability: Optional[float] = None,
) -> None:
  """Raises `ArgumentError` for settings `ScriptPretrainer` cannot take."""
  electra.check_settings(temperature, 'ScriptPretrainer')
  if temperature != 1.0 and not straight_through:
    raise arguments.ArgumentError(
        'ScriptPretrainer',
        lambda name: f'{name("temperature")} = {temperature} has no effect '
        f'without {name("straight_through")} = True: the drawn token is the '
        'argmax of log pi + Gumbel noise for every temperature.',
    )
  probability = initial_positive_probability
  if probability is not None and not 0.0 < probability < 1.0:
    raise arguments.ArgumentError(
        'ScriptPretrainer',
        lambda name: f'{name("initial_positive_probability")} must be in '
        f'(0, 1), got {probability}.',
    )


@tf_keras.utils.register_keras_serializable(package='official_repro')
class ScriptPretrainer(tf_keras.Model):
  """A masked LM (`encoder`, tied `masked_lm` head) that is its own critic."""

  def __init__(
      self,
      encoder_config: encoders.EncoderConfigLike,
      temperature: float = 1.0,
      straight_through: bool = False,
      mlm_activation: str = 'gelu_tanh',
      mlm_initializer_range: float = 0.02,
      initial_positive_probability: Optional[float] = None,
      **kwargs,
  ):
    """Builds the encoder (`encoder_config`, `vocab_size` set) and MLM head.

    `temperature` tau > 0 of the Gumbel-softmax is 1.0 unless
    `straight_through` (L_Disc reaches the pass-1 logits);
    `initial_positive_probability`: the critic's p(t+) at initialization (None:
    Model Garden's zero bias).
    """
    super().__init__(**kwargs)
    check_settings(temperature, straight_through, initial_positive_probability)
    encoder_config = encoders.as_encoder_config(encoder_config)
    self.encoder = encoders.build_encoder(encoder_config)
    self.masked_lm = _MaskedLMWithOutputBias(
        embedding_table=self.encoder.get_embedding_table(),
        activation=activations.get(mlm_activation),
        initializer=tf_keras.initializers.TruncatedNormal(
            stddev=mlm_initializer_range
        ),
        output='logits',
        name='cls/predictions',
        output_bias=(
            0.0
            if initial_positive_probability is None
            else critic_prior_output_bias(
                initial_positive_probability, encoder_config.vocab_size
            )
        ),
    )
    self._temperature = temperature
    self._straight_through = straight_through
    self.sampling_seeds = sampling.SeedStream(name='sampling_seeds')
    # Untracked: it holds the encoder's own layers (no variables of its own).
    self._setattr_tracking = False
    self._encoder_on_embeddings = (
        self._build_encoder_on_embeddings(encoder_config)
        if straight_through
        else None
    )
    self._setattr_tracking = True
    self._config = dict(
        encoder_config=encoder_config.as_dict(),
        temperature=temperature,
        straight_through=straight_through,
        mlm_activation=mlm_activation,
        mlm_initializer_range=mlm_initializer_range,
        initial_positive_probability=initial_positive_probability,
    )

  def _build_encoder_on_embeddings(
      self, config: encoders.EncoderConfig
  ) -> tf_keras.Model:
    """The encoder's graph with word embeddings `[B, T, E]` as first input."""
    lookup = self.encoder.get_embedding_layer()
    identity = tf_keras.layers.Activation(
        'linear', name='input_word_embeddings_identity'
    )
    inputs = [
        tf_keras.Input(
            shape=(None, config.width),
            name='input_word_embeddings',
            dtype=lookup.compute_dtype,
        ),
        tf_keras.Input(shape=(None,), dtype=tf.int32, name='input_mask'),
        tf_keras.Input(shape=(None,), dtype=tf.int32, name='input_type_ids'),
    ]
    return tf_keras.models.clone_model(
        self.encoder,
        input_tensors=inputs,
        clone_function=lambda layer: identity if layer is lookup else layer,
    )

  @property
  def checkpoint_items(self) -> Dict[str, tf.Module]:
    """The encoder (what fine-tuning restores) and the MLM head."""
    return dict(encoder=self.encoder, masked_lm=self.masked_lm)

  def token_logits(
      self,
      input_word_ids: tf.Tensor,
      input_mask: tf.Tensor,
      input_type_ids: tf.Tensor,
      positions: Optional[tf.Tensor] = None,
      training: Optional[bool] = None,
  ) -> tf.Tensor:
    """Float `[B, P, V]` logits at int `[B, P]` positions (None: all T)."""
    outputs = self.encoder(
        dict(
            input_word_ids=input_word_ids,
            input_mask=input_mask,
            input_type_ids=input_type_ids,
        ),
        training=training,
    )
    return self._head(outputs['sequence_output'], positions)

  def _head(
      self, sequence_output: tf.Tensor, positions: Optional[tf.Tensor]
  ) -> tf.Tensor:
    if positions is None:
      shape = tf.shape(sequence_output)
      positions = tf.broadcast_to(tf.range(shape[1])[None, :], shape[:2])
    return self.masked_lm(sequence_output, masked_positions=positions)

  def mlm_logits(
      self, inputs: Dict[str, tf.Tensor], training: Optional[bool] = None
  ) -> tf.Tensor:
    """Pass 1: float `[B, P, V]` logits at `masked_lm_positions`."""
    return self.token_logits(
        inputs['input_word_ids'],
        inputs['input_mask'],
        inputs['input_type_ids'],
        inputs['masked_lm_positions'],
        training,
    )

  def sample_replacements(
      self,
      mlm_logits: tf.Tensor,
      seed: Optional[tf.Tensor] = None,
      training: Optional[bool] = None,
  ) -> Tuple[tf.Tensor, Optional[tf.Tensor]]:
    """004 Eq. 3 on float `[B, P, V]` pass-1 logits (`seed`: `sampling_seeds`).

    Returns int32 `[B, P]` ids and, with `straight_through`, their float32
    `[B, P, V]` straight-through one-hot (else None).
    """
    log_pi = tf.nn.log_softmax(tf.cast(mlm_logits, tf.float32), axis=-1)
    if not self._straight_through:
      log_pi = tf.stop_gradient(log_pi)
    if seed is None:
      seed = self.sampling_seeds.next_seed(training)
    sample = sampling.gumbel_softmax(
        log_pi, self._temperature, self._straight_through, seed
    )
    ids = tf.argmax(sample, axis=-1, output_type=tf.int32)
    return ids, (sample if self._straight_through else None)

  def critic_logits(
      self,
      critic_ids: tf.Tensor,
      inputs: Dict[str, tf.Tensor],
      replacement_one_hot: Optional[tf.Tensor] = None,
      training: Optional[bool] = None,
  ) -> tf.Tensor:
    """Pass 2: float `[B, T, V]` token logits on x- (int `[B, T]`).

    `replacement_one_hot` (float `[B, P, V]`) embeds the masked positions as
    `one_hot @ table`; None embeds `critic_ids` by lookup.
    """
    if replacement_one_hot is None:
      return self.token_logits(
          critic_ids,
          inputs['input_mask'],
          inputs['input_type_ids'],
          training=training,
      )
    if self._encoder_on_embeddings is None:
      raise ValueError(
          'replacement_one_hot needs a ScriptPretrainer built '
          'with straight_through=True.'
      )
    word_embeddings = self.encoder.get_embedding_layer()(critic_ids)
    table = tf.cast(self.encoder.get_embedding_table(), word_embeddings.dtype)
    sampled_embeddings = tf.einsum(
        'bpv,ve->bpe', tf.cast(replacement_one_hot, table.dtype), table
    )
    placement = tf.one_hot(
        inputs['masked_lm_positions'],
        tf.shape(critic_ids)[1],
        dtype=table.dtype,
    )
    placement *= tf.cast(inputs['masked_lm_weights'] > 0, table.dtype)[
        :, :, None
    ]  # [B, P, T]
    written = tf.reduce_sum(placement, axis=1)[:, :, None]  # [B, T, 1]
    word_embeddings = word_embeddings * (1 - written) + tf.einsum(
        'bpt,bpe->bte', placement, sampled_embeddings
    )
    outputs = self._encoder_on_embeddings(
        dict(
            input_word_embeddings=word_embeddings,
            input_mask=inputs['input_mask'],
            input_type_ids=inputs['input_type_ids'],
        ),
        training=training,
    )
    return self._head(outputs['sequence_output'], None)

  def pseudo_log_likelihood(
      self,
      input_word_ids: tf.Tensor,
      input_mask: tf.Tensor,
      input_type_ids: tf.Tensor,
      scored_mask: tf.Tensor,
  ) -> tf.Tensor:
    """004 Eq. 7: float32 `[B]` sum of log p(t+ | x) where `scored_mask` = 1."""
    log_positive, _ = critic_log_probabilities(
        self.token_logits(
            input_word_ids, input_mask, input_type_ids, training=False
        )
    )
    return tf.reduce_sum(
        log_positive * tf.cast(scored_mask, tf.float32), axis=-1
    )

  def call(
      self, inputs: Dict[str, tf.Tensor], training=None
  ) -> Dict[str, tf.Tensor]:
    """Pass 1, sampling and pass 2 on a masked-LM batch.

    Returns:
      `mlm_logits` `[B, P, V]`; `sampled_ids` `[B, P]`; `critic_ids` and
      `rtd_labels` (1 on replaced real tokens) `[B, T]`;
      `critic_log_positive`, `critic_log_negative` and `rtd_logits`
      (log p(t-) - log p(t+), ELECTRA's convention) float32 `[B, T]`.
    """
    mlm_logits = self.mlm_logits(inputs, training)
    sampled, one_hot = self.sample_replacements(mlm_logits, training=training)
    critic_ids, labels = electra.ElectraPretrainer.corrupt(inputs, sampled)
    log_positive, log_negative = critic_log_probabilities(
        self.critic_logits(critic_ids, inputs, one_hot, training)
    )
    return dict(
        mlm_logits=mlm_logits,
        sampled_ids=sampled,
        critic_ids=critic_ids,
        rtd_labels=labels,
        critic_log_positive=log_positive,
        critic_log_negative=log_negative,
        rtd_logits=log_negative - log_positive,
    )

  def get_config(self) -> Dict[str, Any]:
    return dict(self._config, name=self.name)
