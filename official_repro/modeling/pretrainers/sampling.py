"""Drawing tokens from a generator and writing them into sequences.

Three samplers, each a function of logits `[..., vocab]`:
  * `sample_from_logits`: one id per position from softmax(logits / T)
    (ELECTRA, ALE; optionally never a given id, e.g. the original token);
  * `sample_distinct`: K distinct ids per position without replacement
    (TEAMS' "Sampled" negatives), by Gumbel-top-k: the K largest of
    logits / T + Gumbel noise are a sample without replacement from the
    tempered softmax (Kool et al. 2019), in one pass instead of K;
    `top_k_excluding` gives TEAMS' "Hardest" negatives, the K most likely;
  * `gumbel_softmax`: the relaxed sample of SCRIPT (004 Eq. 3),
    softmax((log pi + g) / tau), whose argmax is the discrete sample, with an
    optional straight-through gradient.
`sample_from_logits` uses TensorFlow's categorical sampler (one uniform per
draw against the softmax's cumulative sums: 0.45x the time of Gumbel-max at
608 positions x 30522 ids on CPU, where the noise alone is 18.5M uniforms
and two logs); the others add Gumbel noise from one helper. All are
stateless when a seed is given.
A pretrainer takes its seeds from a `SeedStream`, so that in deterministic
runs its draws come from a checkpointed `tf.random.Generator`
(`training/reproducibility.py`).
"""

from typing import Optional

import tensorflow as tf
import tf_keras

# Added to the logits of ids a sampler must never return.
_EXCLUDED_LOGIT = -1e9


def gumbel_noise(
    shape: tf.Tensor, seed: Optional[tf.Tensor] = None
) -> tf.Tensor:
  """I.i.d. standard Gumbel noise, float32; stateless when `seed` is given.

  Args:
    shape: the output shape.
    seed: optional int `[2]` seed for `tf.random.stateless_uniform`.
  """
  if seed is None:
    uniform = tf.random.uniform(shape, minval=1e-9, maxval=1.0)
  else:
    uniform = tf.random.stateless_uniform(
        shape, seed=seed, minval=1e-9, maxval=1.0
    )
  return -tf.math.log(-tf.math.log(uniform))


@tf_keras.utils.register_keras_serializable(package='official_repro')
class SeedStream(tf_keras.__internal__.layers.BaseRandomLayer):
  """Seeds for a model's stateless draws, from Keras' random generator.

  `next_seed(training=True)` is None in Keras' default mode, where the
  samplers fall back to stateful random ops (seeded by the global seed, as
  dropout is); with Keras' `tf.random.Generator` mode on (deterministic
  runs) it is a fresh int64 `[2]` seed drawn from
  this layer's generator, whose state the trainer checkpoints, so a resumed
  run continues the same draws. Outside training it is always None:
  evaluation must not advance the checkpointed stream, or a run that
  evaluates between a checkpoint and its next step would draw otherwise
  than one resumed from that checkpoint.
  """

  def next_seed(self, training: Optional[bool] = True) -> Optional[tf.Tensor]:
    if not training:
      return None
    return self._random_generator.make_seed_for_stateless_op()

  def call(self, inputs, training=None):
    del inputs
    return self.next_seed(training)


def _check_temperature(temperature: float) -> None:
  if temperature <= 0:
    raise ValueError(f'temperature must be > 0, got {temperature}.')


def _exclude(logits: tf.Tensor, excluded_ids: Optional[tf.Tensor]) -> tf.Tensor:
  if excluded_ids is None:
    return logits
  return logits + tf.one_hot(
      excluded_ids,
      tf.shape(logits)[-1],
      on_value=_EXCLUDED_LOGIT,
      off_value=0.0,
      dtype=logits.dtype,
  )


def sample_from_logits(
    logits: tf.Tensor,
    temperature: float = 1.0,
    disallowed_ids: Optional[tf.Tensor] = None,
    seed: Optional[tf.Tensor] = None,
) -> tf.Tensor:
  """Draws one token per position from softmax(logits / temperature).

  An exact sample of the tempered softmax (`tf.random.categorical`, or its
  stateless form with a seed). Gradients do not flow through the sample
  (callers pass logits under `tf.stop_gradient`).

  Args:
    logits: float `[..., vocab]`.
    temperature: T > 0; T < 1 sharpens (001 samples at 0.8), T = 1 is the
      model's distribution (ELECTRA's reference).
    disallowed_ids: optional int `[...]` id per position that must not be
      drawn (ELECTRA's option to never sample the original token).
    seed: optional int `[2]` stateless seed, for reproducible draws.

  Returns:
    int32 `[...]` sampled ids.
  """
  _check_temperature(temperature)
  logits = _exclude(tf.cast(logits, tf.float32) / temperature, disallowed_ids)
  rows = tf.reshape(logits, [-1, tf.shape(logits)[-1]])
  if seed is None:
    ids = tf.random.categorical(rows, 1, dtype=tf.int32)
  else:
    ids = tf.random.stateless_categorical(rows, 1, seed=seed, dtype=tf.int32)
  return tf.reshape(ids, tf.shape(logits)[:-1])


def sample_distinct(
    logits: tf.Tensor,
    num_samples: int,
    temperature: float = 1.0,
    excluded_ids: Optional[tf.Tensor] = None,
    seed: Optional[tf.Tensor] = None,
) -> tf.Tensor:
  """Draws `num_samples` distinct ids per position without replacement.

  The ids are in draw order: the distribution of the first is the tempered
  softmax, of the second the softmax renormalised without the first, etc.

  Args:
    logits: float `[..., vocab]`.
    num_samples: K, at most the number of ids that are not excluded.
    temperature: T > 0 of the softmax sampled from.
    excluded_ids: optional int `[...]` id per position never drawn (TEAMS:
      the original token).
    seed: optional int `[2]` stateless seed.

  Returns:
    int32 `[..., K]`.
  """
  _check_temperature(temperature)
  logits = _exclude(tf.cast(logits, tf.float32) / temperature, excluded_ids)
  _, ids = tf.math.top_k(
      logits + gumbel_noise(tf.shape(logits), seed), k=num_samples
  )
  return tf.cast(ids, tf.int32)


def top_k_excluding(
    logits: tf.Tensor, k: int, excluded_ids: Optional[tf.Tensor] = None
) -> tf.Tensor:
  """The `k` most likely ids per position, most likely first.

  Args:
    logits: float `[..., vocab]`.
    k: how many.
    excluded_ids: optional int `[...]` id per position left out.

  Returns:
    int32 `[..., k]`.
  """
  _, ids = tf.math.top_k(
      _exclude(tf.cast(logits, tf.float32), excluded_ids), k=k
  )
  return tf.cast(ids, tf.int32)


def gumbel_softmax(
    logits: tf.Tensor,
    temperature: float = 1.0,
    straight_through: bool = False,
    seed: Optional[tf.Tensor] = None,
) -> tf.Tensor:
  """SCRIPT's relaxed sample (004 Eq. 3): softmax((log pi + g) / tau).

  Args:
    logits: float `[..., vocab]`, unnormalised log-probabilities log pi (a
      constant shift does not change the result).
    temperature: tau > 0; as tau -> 0 the result tends to the one-hot of
      `argmax(log pi + g)`, as tau grows to the uniform distribution.
    straight_through: return the one-hot of the argmax in the forward pass
      with the gradient of the relaxed sample (straight-through estimator);
      otherwise the relaxed sample itself.
    seed: optional int `[2]` stateless seed.

  Returns:
    float32 `[..., vocab]`: rows on the probability simplex (one-hot with
    `straight_through`).
  """
  _check_temperature(temperature)
  logits = tf.cast(logits, tf.float32)
  perturbed = logits + gumbel_noise(tf.shape(logits), seed)
  relaxed = tf.nn.softmax(perturbed / temperature, axis=-1)
  if not straight_through:
    return relaxed
  hard = tf.one_hot(
      tf.argmax(perturbed, axis=-1), tf.shape(logits)[-1], dtype=relaxed.dtype
  )
  return relaxed + tf.stop_gradient(hard - relaxed)


def gather_at_positions(sequence: tf.Tensor, positions: tf.Tensor) -> tf.Tensor:
  """`sequence[b, positions[b, p]]`: `[B, T, ...]` -> `[B, P, ...]`."""
  return tf.gather(sequence, positions, batch_dims=1)


def scatter_at_positions(
    ids: tf.Tensor, positions: tf.Tensor, values: tf.Tensor, weights: tf.Tensor
) -> tf.Tensor:
  """Writes `values` into `ids` at the real (`weights > 0`) positions.

  Dense one-hot arithmetic rather than `tensor_scatter_nd_update`, so padded
  prediction slots (position 0, weight 0) never write and the op compiles
  unchanged under XLA and on TPU. Real positions within a row are distinct.

  Args:
    ids: int `[batch, seq_length]`.
    positions: int `[batch, num_predictions]`.
    values: int `[batch, num_predictions]`.
    weights: float `[batch, num_predictions]`, 1 for real slots, 0 for padding.

  Returns:
    int32 `[batch, seq_length]`.
  """
  ids = tf.cast(ids, tf.int32)
  seq_length = tf.shape(ids)[1]
  real = tf.cast(weights > 0, tf.int32)
  one_hot = tf.one_hot(positions, seq_length, dtype=tf.int32)  # [B, P, T]
  one_hot *= real[:, :, None]
  written = tf.reduce_max(one_hot, axis=1)  # [B, T]
  new_values = tf.reduce_sum(
      one_hot * tf.cast(values, tf.int32)[:, :, None], axis=1
  )
  return tf.where(written > 0, new_values, ids)


def restore_original_ids(
    input_word_ids: tf.Tensor,
    positions: tf.Tensor,
    masked_lm_ids: tf.Tensor,
    weights: tf.Tensor,
) -> tf.Tensor:
  """Undoes masking: puts the original tokens back at the masked positions."""
  return scatter_at_positions(input_word_ids, positions, masked_lm_ids, weights)
