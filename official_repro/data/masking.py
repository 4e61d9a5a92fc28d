"""Masked-LM input corruption shared by static and dynamic masking.

One rule for records masked once (BERT, TEAMS) and batches masked each step
(ELECTRA, SCRIPT): `min(max_predictions_per_seq, max(1, round(mask_rate *
candidates)))` real non-special tokens are drawn without replacement, each
becoming [MASK], a random token or itself (80/10/10; 85/0/15 in ELECTRA's
code). Randomness is stateless from an explicit `[2]` seed. Not reused: TF
Text's `RandomItemSelector` and `MaskValuesChooser` use stateful ops without
a per-batch seed, so their records could not be reproduced.
"""

import dataclasses
from typing import Dict, Sequence, Tuple

import tensorflow as tf

from official_repro.common import cli


@dataclasses.dataclass(frozen=True)
class MaskingConfig:
  """How many tokens to corrupt and how.

  `max_predictions_per_seq` is also the static width of `masked_lm_*`.
  """

  mask_rate: float = 0.15
  max_predictions_per_seq: int = 20
  mask_token_fraction: float = 0.8
  random_token_fraction: float = 0.1

  def __post_init__(self):
    if not 0.0 < self.mask_rate <= 1.0:
      raise cli.UserError(f'mask_rate must be in (0, 1], got {self.mask_rate}.')
    if self.max_predictions_per_seq < 1:
      raise cli.UserError(
          'max_predictions_per_seq must be >= 1, got '
          f'{self.max_predictions_per_seq}.'
      )
    for name in ('mask_token_fraction', 'random_token_fraction'):
      value = getattr(self, name)
      if not 0.0 <= value <= 1.0:
        raise cli.UserError(f'{name} must be in [0, 1], got {value}.')
    if self.mask_token_fraction + self.random_token_fraction > 1.0 + 1e-9:
      raise cli.UserError(
          'mask_token_fraction + random_token_fraction must be <= 1, got '
          f'{self.mask_token_fraction} + {self.random_token_fraction}.'
      )

  @property
  def keep_fraction(self) -> float:
    return 1.0 - self.mask_token_fraction - self.random_token_fraction


def default_max_predictions(max_seq_length: int, mask_rate: float) -> int:
  """The ELECTRA/BERT convention `int((mask_rate + 0.005) * max_seq_length)`."""
  return max(1, int((mask_rate + 0.005) * max_seq_length))


def mask_batch(
    input_word_ids: tf.Tensor,
    input_mask: tf.Tensor,
    *,
    config: MaskingConfig,
    mask_token_id: int,
    special_token_ids: Sequence[int],
    vocab_size: int,
    seed: tf.Tensor,
) -> Dict[str, tf.Tensor]:
  """Chooses and corrupts masked-LM positions in a batch of sequences.

  Args:
    input_word_ids: int `[batch, seq_length]` token ids.
    input_mask: int `[batch, seq_length]`, 1 for real tokens, 0 for padding.
    config: the masking rates.
    mask_token_id: id of [MASK].
    special_token_ids: ids never chosen nor drawn as random replacements.
    vocab_size: random replacements come from `[0, vocab_size)` minus those.
    seed: int `[2]` stateless seed.

  Returns:
    int32 `input_word_ids` `[batch, seq_length]` (corrupted), and
    `[batch, max_predictions]` int32 `masked_lm_positions` (ascending, padded
    with 0), `masked_lm_ids` (the original ids) and float32
    `masked_lm_weights` (1 for a real prediction).
  """
  input_word_ids = tf.cast(input_word_ids, tf.int32)
  input_mask = tf.cast(input_mask, tf.int32)
  seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), num=4)
  special = tf.constant(
      sorted(set(int(i) for i in special_token_ids)), dtype=tf.int32
  )
  positions, weights = _choose_positions(
      input_word_ids, input_mask, special, config, seeds[0]
  )
  original_ids = tf.gather(input_word_ids, positions, batch_dims=1)
  original_ids = original_ids * tf.cast(weights, tf.int32)
  new_ids = _replacement_ids(
      original_ids, config, mask_token_id, special, vocab_size, seeds
  )
  batch_index = tf.broadcast_to(
      tf.range(tf.shape(input_word_ids)[0])[:, None], tf.shape(positions)
  )
  scatter_index = tf.stack([batch_index, positions], axis=-1)
  real = weights > 0
  corrupted = tf.tensor_scatter_nd_update(
      input_word_ids,
      tf.boolean_mask(scatter_index, real),
      tf.boolean_mask(new_ids, real),
  )
  return dict(
      input_word_ids=corrupted,
      masked_lm_positions=positions,
      masked_lm_ids=original_ids,
      masked_lm_weights=weights,
  )


def _choose_positions(
    input_word_ids: tf.Tensor,
    input_mask: tf.Tensor,
    special: tf.Tensor,
    config: MaskingConfig,
    seed: tf.Tensor,
) -> Tuple[tf.Tensor, tf.Tensor]:
  """int32 positions and float32 weights, `[batch, max_predictions]`."""
  max_predictions = config.max_predictions_per_seq
  seq_length = tf.shape(input_word_ids)[1]
  is_special = tf.reduce_any(
      tf.equal(input_word_ids[:, :, None], special[None, None, :]), axis=-1
  )
  candidate = tf.logical_and(
      tf.equal(input_mask, 1), tf.logical_not(is_special)
  )
  num_candidates = tf.reduce_sum(tf.cast(candidate, tf.int32), axis=1)
  num_to_predict = tf.cast(
      tf.round(tf.cast(num_candidates, tf.float32) * config.mask_rate), tf.int32
  )
  num_to_predict = tf.minimum(
      tf.minimum(tf.maximum(num_to_predict, 1), max_predictions), num_candidates
  )
  # Sampling without replacement: rank candidates by i.i.d. uniform scores.
  scores = tf.random.stateless_uniform(
      tf.shape(input_word_ids), seed=seed, minval=0.0, maxval=1.0
  )
  scores = tf.where(candidate, scores, -1.0)
  k = tf.minimum(max_predictions, seq_length)
  _, ranked_positions = tf.math.top_k(scores, k=k)
  rank = tf.range(k)[None, :]
  chosen = rank < num_to_predict[:, None]
  # Ascending positions, with unchosen slots pushed to the end.
  sort_key = tf.where(chosen, ranked_positions, seq_length + rank)
  positions = tf.sort(sort_key, axis=1)
  weights = tf.cast(positions < seq_length, tf.float32)
  positions = tf.where(positions < seq_length, positions, 0)
  pad = max_predictions - k
  positions = tf.pad(positions, [[0, 0], [0, pad]])
  weights = tf.pad(weights, [[0, 0], [0, pad]])
  return positions, weights


def _replacement_ids(
    original_ids: tf.Tensor,
    config: MaskingConfig,
    mask_token_id: int,
    special: tf.Tensor,
    vocab_size: int,
    seeds: tf.Tensor,
) -> tf.Tensor:
  """[MASK], a random id or the original, per chosen position."""
  action = tf.random.stateless_uniform(
      tf.shape(original_ids), seed=seeds[1], minval=0.0, maxval=1.0
  )
  use_mask = action < config.mask_token_fraction
  use_random = tf.logical_and(
      action >= config.mask_token_fraction,
      action < config.mask_token_fraction + config.random_token_fraction,
  )
  random_ids = _sample_non_special_ids(
      tf.shape(original_ids), special, vocab_size, seeds[2]
  )
  return tf.where(
      use_mask, mask_token_id, tf.where(use_random, random_ids, original_ids)
  )


def _sample_non_special_ids(
    shape: tf.Tensor, special: tf.Tensor, vocab_size: int, seed: tf.Tensor
) -> tf.Tensor:
  """Uniform ids from `[0, vocab_size)` that are not in `special`.

  Index `r` into the non-special ids maps to `r + (special ids <= the id)`.
  """
  num_special = int(special.shape[0])
  if vocab_size <= num_special:
    raise cli.UserError(f'vocab_size {vocab_size} leaves no non-special token.')
  r = tf.random.stateless_uniform(
      shape,
      seed=seed,
      minval=0,
      maxval=vocab_size - num_special,
      dtype=tf.int32,
  )
  # special is sorted; shifting past each special id <= r + shift is a
  # fixed-point iteration that converges in at most num_special steps.
  mapped = r
  for _ in range(num_special):
    shift = tf.reduce_sum(
        tf.cast(mapped[..., None] >= special, tf.int32), axis=-1
    )
    mapped = r + shift
  return mapped
