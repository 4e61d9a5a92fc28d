"""Sampling replacements from a generator and writing them into sequences."""

from typing import Optional

import tensorflow as tf


def sample_from_logits(logits: tf.Tensor,
                       temperature: float = 1.0,
                       disallowed_ids: Optional[tf.Tensor] = None,
                       seed: Optional[tf.Tensor] = None) -> tf.Tensor:
  """Draws one token per position from softmax(logits / temperature).

  Gumbel-max: `argmax(logits / T + g)` with i.i.d. standard Gumbel noise `g`
  is an exact sample of the tempered softmax. Gradients do not flow through
  the sample (callers pass logits under `tf.stop_gradient`).

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
  if temperature <= 0:
    raise ValueError(f'temperature must be > 0, got {temperature}.')
  logits = tf.cast(logits, tf.float32) / temperature
  if disallowed_ids is not None:
    vocab_size = tf.shape(logits)[-1]
    logits += tf.one_hot(disallowed_ids, vocab_size, on_value=-1e9,
                         off_value=0.0, dtype=tf.float32)
  if seed is None:
    uniform = tf.random.uniform(tf.shape(logits), minval=1e-9, maxval=1.0)
  else:
    uniform = tf.random.stateless_uniform(tf.shape(logits), seed=seed,
                                          minval=1e-9, maxval=1.0)
  gumbel = -tf.math.log(-tf.math.log(uniform))
  return tf.argmax(logits + gumbel, axis=-1, output_type=tf.int32)


def scatter_at_positions(ids: tf.Tensor, positions: tf.Tensor,
                         values: tf.Tensor, weights: tf.Tensor) -> tf.Tensor:
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
  new_values = tf.reduce_sum(one_hot * tf.cast(values, tf.int32)[:, :, None],
                             axis=1)
  return tf.where(written > 0, new_values, ids)


def restore_original_ids(input_word_ids: tf.Tensor, positions: tf.Tensor,
                         masked_lm_ids: tf.Tensor,
                         weights: tf.Tensor) -> tf.Tensor:
  """Undoes masking: puts the original tokens back at the masked positions."""
  return scatter_at_positions(input_word_ids, positions, masked_lm_ids,
                              weights)
