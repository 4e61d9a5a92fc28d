"""Linear-chain conditional random field (CRF) over per-token potentials.

Paper 001's POS tagger may replace its per-token softmax with a CRF. TensorFlow
Addons, which used to provide one, is end-of-life, so this is plain TF ops.
A path's score is `start[y_0] + sum_t x[t, y_t] + sum_t transitions[y_{t-1},
y_t] + end[y_{L-1}]`; `log Z` comes from the forward algorithm.
Conventions: `mask` `[batch, seq_length]` (nonzero = in the sequence, None =
all) is left-aligned and contiguous (assumed, not checked); a length-0
sequence has score, `log Z` and likelihood 0 and tags 0; tags at masked-out
positions are ignored; everything runs in float32 (the layer's policy and
its variables too) and in `tf.scan`, so it works in `tf.function` and XLA
with unknown shapes (static length >= 1).
"""

from typing import Optional, Tuple

import tensorflow as tf
import tf_keras

from official_repro.modeling import arguments


@tf_keras.utils.register_keras_serializable(package='official_repro')
class CRF(arguments.ConfigFromArguments, tf_keras.layers.Layer):
  """Linear-chain CRF; calling it Viterbi-decodes `[batch, seq, tags]` logits.

  Variables `transitions` `[num_tags, num_tags]` (`[i, j]`: tag i then j),
  `start_transitions` and `end_transitions` `[num_tags]`, all truncated normal
  of stddev `initializer_range`, so fine-tuning starts decoding like the
  per-token argmax.
  """

  def __init__(self, num_tags: int, initializer_range: float = 0.02, **kwargs):
    """Creates the layer and its variables (`num_tags` >= 1)."""
    arguments.check_sizes(num_tags=num_tags)
    if initializer_range < 0:
      raise ValueError(
          f'initializer_range must be >= 0, got {initializer_range}.'
      )
    kwargs.setdefault('dtype', 'float32')
    super().__init__(**kwargs)
    self.supports_masking = True
    self._num_tags = num_tags
    self._initializer_range = initializer_range
    self.transitions = self._add_score_weight(
        'transitions', (num_tags, num_tags)
    )
    self.start_transitions = self._add_score_weight(
        'start_transitions', (num_tags,)
    )
    self.end_transitions = self._add_score_weight(
        'end_transitions', (num_tags,)
    )

  @property
  def num_tags(self) -> int:
    return self._num_tags

  def _add_score_weight(self, name: str, shape: Tuple[int, ...]) -> tf.Variable:
    return self.add_weight(
        name=name,
        shape=shape,
        dtype=self.dtype,
        trainable=True,
        initializer=tf_keras.initializers.TruncatedNormal(
            stddev=self._initializer_range
        ),
    )

  def _prepare(
      self, potentials: tf.Tensor, mask: Optional[tf.Tensor]
  ) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Potentials in the layer dtype, bool mask `[B, T]`, int32 lengths."""
    potentials = tf.convert_to_tensor(potentials)
    potentials = tf.cast(potentials, self.dtype)
    if mask is None:
      mask = tf.ones(tf.shape(potentials)[:2], dtype=tf.bool)
    else:
      mask = tf.cast(mask, tf.bool)
    lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    return potentials, mask, lengths

  def _scan_inputs(
      self, potentials: tf.Tensor, mask: Optional[tf.Tensor]
  ) -> Tuple[Tuple[tf.Tensor, tf.Tensor, tf.Tensor], tf.Tensor, tf.Tensor]:
    """The time-major scan inputs, and `_prepare`'s mask and lengths.

    Inputs: `[seq, batch, tags]` potentials, `[seq, batch]` mask, `[seq]`
    is-first. Scanning every position keeps the scans non-empty, which graph
    mode needs when the batch size is unknown and the length is 1.
    """
    potentials, mask, lengths = self._prepare(potentials, mask)
    is_first = tf.equal(tf.range(tf.shape(potentials)[1]), 0)
    steps = (tf.transpose(potentials, [1, 0, 2]), tf.transpose(mask), is_first)
    return steps, mask, lengths

  def sequence_score(
      self,
      potentials: tf.Tensor,
      tags: tf.Tensor,
      mask: Optional[tf.Tensor] = None,
  ) -> tf.Tensor:
    """Unnormalized `[batch]` scores of int `[batch, seq_length]` tag paths."""
    potentials, mask, lengths = self._prepare(potentials, mask)
    tags = tf.where(mask, tf.cast(tags, tf.int32), 0)
    one_hot = tf.one_hot(tags, self._num_tags, dtype=potentials.dtype)
    float_mask = tf.cast(mask, potentials.dtype)
    unary = tf.reduce_sum(one_hot * potentials, axis=-1) * float_mask
    # Row `t` of one_hot @ transitions holds the scores of leaving tags[t].
    leaving = tf.einsum('bsi,ij->bsj', one_hot[:, :-1], self.transitions)
    binary = (
        tf.reduce_sum(leaving * one_hot[:, 1:], axis=-1) * float_mask[:, 1:]
    )
    last_one_hot = tf.gather(one_hot, tf.maximum(lengths - 1, 0), batch_dims=1)
    boundary = tf.linalg.matvec(
        one_hot[:, 0], self.start_transitions
    ) + tf.linalg.matvec(last_one_hot, self.end_transitions)
    score = (
        tf.reduce_sum(unary, axis=1) + tf.reduce_sum(binary, axis=1) + boundary
    )
    return tf.where(lengths > 0, score, tf.zeros_like(score))

  def log_partition(
      self, potentials: tf.Tensor, mask: Optional[tf.Tensor] = None
  ) -> tf.Tensor:
    """`[batch]` log Z over all tag paths (forward algorithm)."""
    steps, _, lengths = self._scan_inputs(potentials, mask)

    def forward_step(alpha, step_inputs):
      """alpha[b, j]: log-sum-exp of the scores of paths ending in tag j."""
      step_potentials, step_mask, step_is_first = step_inputs
      scores = alpha[:, :, None] + self.transitions[None, :, :]
      new_alpha = tf.where(
          step_is_first,
          self.start_transitions[None, :],
          tf.reduce_logsumexp(scores, axis=1),
      )
      new_alpha += step_potentials
      return tf.where(step_mask[:, None], new_alpha, alpha)

    alphas = tf.scan(
        forward_step, steps, initializer=tf.zeros_like(steps[0][0])
    )
    # Masked-out steps carry alpha unchanged, so the last one is final.
    final_alpha = alphas[-1]
    log_z = tf.reduce_logsumexp(
        final_alpha + self.end_transitions[None, :], axis=1
    )
    return tf.where(lengths > 0, log_z, tf.zeros_like(log_z))

  def log_likelihood(
      self,
      potentials: tf.Tensor,
      tags: tf.Tensor,
      mask: Optional[tf.Tensor] = None,
  ) -> tf.Tensor:
    """`[batch]` log-probabilities `score - log Z` of gold tag paths.

    Its negation is the training loss; gradients reach the potentials and all
    three transition variables.
    """
    return self.sequence_score(potentials, tags, mask) - self.log_partition(
        potentials, mask
    )

  def viterbi_decode(
      self, potentials: tf.Tensor, mask: Optional[tf.Tensor] = None
  ) -> Tuple[tf.Tensor, tf.Tensor]:
    """Highest-scoring tag path of each sequence (ties: lower tag id).

    Returns:
      int32 `[batch, seq_length]` best tags (0 where masked out) and float
      `[batch]` their scores.
    """
    steps, mask, lengths = self._scan_inputs(potentials, mask)

    def max_step(carry, step_inputs):
      """Max-product step; masked-out steps keep delta, point to themselves.

      backpointers[b, j] is the best tag at the previous position given tag
      j here (meaningless at position 0, which has no previous position).
      """
      delta, _ = carry
      step_potentials, step_mask, step_is_first = step_inputs
      scores = delta[:, :, None] + self.transitions[None, :, :]
      best_previous = tf.argmax(scores, axis=1, output_type=tf.int32)
      new_delta = tf.where(
          step_is_first,
          self.start_transitions[None, :],
          tf.reduce_max(scores, axis=1),
      )
      new_delta += step_potentials
      identity = tf.broadcast_to(
          tf.range(self._num_tags)[None, :], tf.shape(best_previous)
      )
      step_mask = step_mask[:, None]
      return (
          tf.where(step_mask, new_delta, delta),
          tf.where(step_mask, best_previous, identity),
      )

    initial_delta = tf.zeros_like(steps[0][0])
    deltas, backpointers = tf.scan(
        max_step,
        steps,
        initializer=(initial_delta, tf.zeros_like(initial_delta, tf.int32)),
    )
    final_delta = deltas[-1]
    final_scores = final_delta + self.end_transitions[None, :]
    best_last_tag = tf.argmax(final_scores, axis=1, output_type=tf.int32)
    best_score = tf.reduce_max(final_scores, axis=1)

    def backtrack_step(next_tag, step_backpointers):
      return tf.gather(step_backpointers, next_tag[:, None], batch_dims=1)[:, 0]

    # previous_tags[t] is the tag at position t - 1 (previous_tags[0] is
    # unused). Identity pointers past a sequence's end carry its last tag back
    # to position L - 1; from there the real pointers are followed.
    previous_tags = tf.scan(
        backtrack_step, backpointers, initializer=best_last_tag, reverse=True
    )
    tags = tf.transpose(
        tf.concat([previous_tags[1:], best_last_tag[None]], axis=0)
    )
    tags = tf.where(mask, tags, tf.zeros_like(tags))
    best_score = tf.where(lengths > 0, best_score, tf.zeros_like(best_score))
    return tags, best_score

  def call(
      self, potentials: tf.Tensor, mask: Optional[tf.Tensor] = None
  ) -> tf.Tensor:
    """Viterbi-decodes `[batch, seq, num_tags]` potentials to int32 tags."""
    return self.viterbi_decode(potentials, mask)[0]
