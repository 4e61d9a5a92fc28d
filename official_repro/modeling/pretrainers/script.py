"""SCRIPT (paper 004): one masked-LM model that is its own generator and critic.

The model is a BERT masked LM and nothing more: an encoder (any backbone)
and Model Garden's `MaskedLM` head tied to the encoder's word-embedding
table, so its parameters are exactly those of `BertPretrainerV2` on the same
encoder (no classification heads). A training step runs it twice:

  1. `mlm_logits`: masked input x^ -> logits s at the masked positions
     (the MLM loss is the task's, Model Garden `MaskedLMTask`'s);
  2. `sample_replacements`: at the masked positions only, x-_t = argmax of
     the Gumbel-softmax over log pi = log_softmax(s) at temperature tau
     (004 Eq. 3); a sample equal to the original token is a positive token;
  3. `critic_logits`: x- (original tokens elsewhere) through the same model,
     logits s_t over the V tokens at every position;
  4. `critic_log_probabilities`: the (V+1)-class classifier whose extra
     logit is fixed at 0 (004 Eq. 4-5):
       log p(t-) = -logsumexp([s_t, 0]) = log sigmoid(-logsumexp(s_t)),
       log p(t+) = logsumexp(s_t) - logsumexp([s_t, 0])
                 = log sigmoid(logsumexp(s_t)).
The critic loss (binary cross-entropy of those over the real tokens) and the
combination L_MLM + alpha * L_Disc are the task's
(`official_repro.tasks.script`); one backward pass covers both forward
passes.

Sampling and the temperature. 004 gives no value for tau (default here
1.0). The drawn token argmax_v softmax((log pi_v + g_v) / tau) is
argmax_v (log pi_v + g_v) for every tau > 0, i.e. an exact sample from pi
(Gumbel-max); tau changes only the relaxed sample, so it has an effect only
with `straight_through`, and a tau other than 1 without it is rejected
rather than silently ignored.

Gradients through the sample. By default none: the sample is a discrete
token id and the critic pass embeds it by a table lookup, so L_Disc trains
the model as a critic only (through pass 2), as in ELECTRA.
`straight_through=True` feeds pass 2 at the masked positions with
`y @ embedding_table`, where `y` is the straight-through Gumbel-softmax
sample (`sampling.gumbel_softmax(..., straight_through=True)`): its forward
value is the one-hot of the drawn token, so pass 2 computes exactly what it
computes on the discrete ids, while the backward pass uses the gradient of
the relaxed sample softmax((log pi + g) / tau), which reaches the pass-1
logits (and the embedding table through the product). Since the encoder's
word-embedding lookup only takes ids, that path uses a second functional
view of the same encoder (`tf_keras.models.clone_model` with every layer
reused, the word-embedding lookup replaced by the identity) that takes word
embeddings; it owns no variables.

The critic's starting point. With Model Garden's zero output bias and
token scores near 0 at initialization, logsumexp(s_t) is about log V (10.3
for V = 30522), so p(t+) starts at about 1 - 1/V at every token while about
15% of the tokens are negative: L_Disc first has to lower every token's
log-sum-exp by about 8.6 nats before it can tell tokens apart. Adam moves
each output bias by at most about the learning rate per step (the shared
embedding table and the transform's layer norm can lower the log-sum-exp
too). 004 trains 1M steps with 10,000 warmup steps, where this is a short
transient; a run of a few hundred steps does not get past it (measured,
tiny scale, 400 steps at 5e-4: critic AUC 0.50).
`initial_positive_probability = p` instead starts the output bias at the
constant logit(p) - log V, so that p(t+) is about p at every token from
the first step. A constant bias shifts all V logits alike, so at
initialization the masked-LM softmax and the samples are those of the zero
bias, and the parameters are the same. 004 does not mention it (ELECTRA's
reference code, which 004 modifies, starts the bias at zero, as here by
default).

The one-pass pseudo-log-likelihood of 004 Eq. 7, PLL(x) = sum_t log p(t+|x)
over the scored tokens, is `pseudo_log_likelihood`.
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
  """The self-critic's log p(t+) and log p(t-) (004 Eq. 4-5).

  The V+1 classes are the V tokens (their logits `s_t`) and one "replaced"
  class whose logit is fixed at 0. With L = logsumexp(s_t),
  log p(t+) = L - log(1 + e^L) = log sigmoid(L) and
  log p(t-) = -log(1 + e^L) = log sigmoid(-L): one log-sum-exp over V and
  `tf.math.log_sigmoid`, so logits of any magnitude give finite values. (A
  log-sum-exp over the V+1 logits concatenated with 0 gives the same values
  at about twice the cost, measured in the message of commit 6e815dc.)

  Args:
    logits: float `[..., V]`, the token logits s_t.

  Returns:
    `(log_positive, log_negative)`, float32 `[...]` each: log p(t+), the
    original-token probability mass, and log p(t-) = log(1 - p(t+)).
  """
  log_sum_exp = tf.reduce_logsumexp(tf.cast(logits, tf.float32), axis=-1)
  return (tf.math.log_sigmoid(log_sum_exp), tf.math.log_sigmoid(-log_sum_exp))


def critic_prior_output_bias(
    positive_probability: float, vocab_size: int
) -> float:
  """The constant output bias at which the critic's p(t+) is given.

  With every token score equal to the bias b, logsumexp(s_t) = b + log V and
  p(t+) = sigmoid(b + log V) (004 Eq. 5), so b = logit(p) - log V.

  Args:
    positive_probability: p(t+) in (0, 1).
    vocab_size: V.

  Returns:
    The bias b.

  Raises:
    ValueError: p outside (0, 1).
  """
  if not 0.0 < positive_probability < 1.0:
    raise ValueError(
        f'positive_probability must be in (0, 1), got {positive_probability}.'
    )
  return math.log(
      positive_probability / (1.0 - positive_probability)
  ) - math.log(vocab_size)


class _MaskedLMWithOutputBias(layers.MaskedLM):
  """Model Garden's `MaskedLM` whose output bias starts at a constant.

  Model Garden creates the bias in `build` with a zeros initializer and no
  argument to change it, so its initializer is replaced where `build` adds
  the weight (an assignment after `build` would overwrite values restored
  from a checkpoint before the build); its other weights and the call are
  unchanged.
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
  """Raises `ArgumentError` for settings `ScriptPretrainer` cannot take.

  The checks of `ScriptPretrainer`'s own arguments, for callers that check
  them before anything is built.
  """
  if not temperature > 0:
    raise arguments.ArgumentError(
        'ScriptPretrainer',
        lambda name: f'{name("temperature")} must be > 0, got {temperature}.',
    )
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
  """A masked LM trained as its own generator and critic.

  Attributes:
    encoder: the encoder network (the model kept for fine-tuning).
    masked_lm: the MLM head (Model Garden `MaskedLM`, output 'logits') on
      the encoder's word-embedding table.
  """

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
    """Builds the encoder and its MLM head.

    Args:
      encoder_config: the `EncoderConfig` (or its dict), `vocab_size` set.
      temperature: tau > 0 of the Gumbel-softmax (004 Eq. 3; the paper gives
        no value); it changes the relaxed sample only, so it must be 1.0
        unless `straight_through`.
      straight_through: let L_Disc reach the pass-1 logits through the
        straight-through Gumbel-softmax sample (see the module docstring).
      mlm_activation: activation of the MLM transform.
      mlm_initializer_range: stddev of the MLM head's initializer.
      initial_positive_probability: the critic's p(t+) at initialization
        (the MLM output bias starts at logit(p) - log V; see the module
        docstring); None: Model Garden's zero bias.
      **kwargs: other `tf_keras.Model` arguments.

    Raises:
      ArgumentError: temperature <= 0, or != 1 without straight_through, or
        initial_positive_probability outside (0, 1) (`check_settings`).
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
    """The checkpoint items: the encoder and the MLM head.

    What fine-tuning restores (`encoder`) and the MLM head (as in
    Model Garden's `BertPretrainerV2`).
    """
    return dict(encoder=self.encoder, masked_lm=self.masked_lm)

  def token_logits(
      self,
      input_word_ids: tf.Tensor,
      input_mask: tf.Tensor,
      input_type_ids: tf.Tensor,
      positions: Optional[tf.Tensor] = None,
      training: Optional[bool] = None,
  ) -> tf.Tensor:
    """The model's token logits at `positions` (default: every position).

    Args:
      input_word_ids: int `[B, T]` token ids.
      input_mask: int `[B, T]` padding mask.
      input_type_ids: int `[B, T]` segment ids.
      positions: int `[B, P]` positions; None for all T.
      training: dropout on or off.

    Returns:
      float `[B, P, V]` (`[B, T, V]` without positions).
    """
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
    """004 Eq. 3 at the masked positions.

    Args:
      mlm_logits: float `[B, P, V]` pass-1 logits.
      seed: optional int `[2]` stateless seed (default: the model's
        `sampling_seeds`).
      training: whether this is a training step (`SeedStream.next_seed`).

    Returns:
      `(ids, one_hot)`: int32 `[B, P]` drawn tokens and, with
      `straight_through`, their float32 `[B, P, V]` straight-through one-hot
      (None otherwise: no gradient reaches the sample).
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
    """Pass 2: float `[B, T, V]` token logits on the sampled sequence x-.

    Args:
      critic_ids: int `[B, T]`, x-.
      inputs: the batch (`input_mask`, `input_type_ids`,
        `masked_lm_positions`, `masked_lm_weights`).
      replacement_one_hot: float `[B, P, V]` straight-through samples at the
        masked positions (their forward value is the one-hot of
        `critic_ids` there); None embeds `critic_ids` by lookup.
      training: dropout on or off.
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
    """004 Eq. 7 in one forward pass: sum of log p(t+ | x) over scored tokens.

    Args:
      input_word_ids: int `[B, T]` token ids of the unmasked sentences.
      input_mask: int `[B, T]` padding mask of the unmasked sentences.
      input_type_ids: int `[B, T]` segment ids of the unmasked sentences.
      scored_mask: `[B, T]`, 1 on the tokens to score (e.g. real tokens
        other than [CLS] and [SEP]).

    Returns:
      float32 `[B]` pseudo-log-likelihoods (natural log).
    """
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
    """Pass 1, sampling and pass 2.

    Args:
      inputs: `input_word_ids` (masked), `input_mask`, `input_type_ids`
        (int `[B, T]`), `masked_lm_positions`, `masked_lm_ids` (int
        `[B, P]`), `masked_lm_weights` (float `[B, P]`).
      training: dropout on or off.

    Returns:
      `mlm_logits` float `[B, P, V]`; `sampled_ids` int32 `[B, P]`;
      `critic_ids` int32 `[B, T]` (x-); `rtd_labels` int32 `[B, T]` (1 on
      real tokens that differ from the original: negatives);
      `critic_log_positive`, `critic_log_negative` float32 `[B, T]`
      (log p(t+), log p(t-)); `rtd_logits` float32 `[B, T]`, the critic's
      log-odds of "replaced", log p(t-) - log p(t+) = -logsumexp(s_t)
      (ELECTRA's convention, for its metrics).
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
