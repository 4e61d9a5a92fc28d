"""Drawing tokens from a generator and writing them into sequences.

Samplers of logits `[..., vocab]`: `sample_from_logits` (ELECTRA, ALE; TF's
categorical sampler, faster than Gumbel-max on CPU), `sample_distinct`
(TEAMS' "Sampled" negatives by Gumbel-top-k, Kool et al. 2019, in one pass),
`top_k_excluding` (TEAMS' "Hardest") and `gumbel_softmax` (SCRIPT, 004
Eq. 3, optionally straight-through). All are stateless given a seed; a
pretrainer's seeds come from a `SeedStream`, whose checkpointed generator
makes deterministic runs resume the same draws.
"""

from typing import Optional

import tensorflow as tf
import tf_keras

# Added to the logits of ids a sampler must never return.
_EXCLUDED_LOGIT = -1e9


def gumbel_noise(
    shape: tf.Tensor, seed: Optional[tf.Tensor] = None
) -> tf.Tensor:
  """Standard Gumbel noise, float32; stateless given an int `[2]` seed."""
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

  `next_seed(training=True)` is None in Keras' default mode (stateful ops,
  seeded globally like dropout), or with Keras' `tf.random.Generator` mode a
  fresh int64 `[2]` seed from this layer's checkpointed generator. Outside
  training always None, so evaluation does not advance the stream.
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
  """Draws one int32 id per position from softmax(logits / temperature).

  `logits` float `[..., vocab]` (under `tf.stop_gradient`); T > 0 (001
  samples at 0.8); `disallowed_ids` int `[...]` never drawn; `seed` int `[2]`.
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
  """Draws K = `num_samples` distinct ids per position, int32 `[..., K]`.

  Without replacement from the tempered softmax, in draw order, never
  `excluded_ids` (int `[...]`); `seed`: optional int `[2]`.
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
  """Int32 `[..., k]`: the k most likely ids but `excluded_ids`, best first."""
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

  float32 `[..., vocab]` from logits log pi `[..., vocab]`; with
  `straight_through` the one-hot of the argmax forward and the relaxed
  sample's gradient backward. `seed`: optional int `[2]`.
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


def scatter_at_positions(
    ids: tf.Tensor, positions: tf.Tensor, values: tf.Tensor, weights: tf.Tensor
) -> tf.Tensor:
  """Writes `values` into `ids` at the real (`weights > 0`) positions.

  `ids` int `[B, T]`; `positions`, `values`, `weights` `[B, P]`; returns
  int32 `[B, T]`. One-hot arithmetic, not `tensor_scatter_nd_update`, so
  padded slots never write and XLA/TPU compile it unchanged.
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
