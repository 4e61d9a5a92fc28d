"""Multi-word selection head of the TEAMS discriminator (003 Sec. 3.1-3.2).

Logits e(x')^T h^MWS over each masked position's candidates (003 Eq. 7, no
bias), e the shared word embeddings and h^MWS the state mapped to width E by
LayerNorm(activation(dense_{H->E}(h))), as Model Garden's TEAMS head. That
head keeps the embedding table from its constructor, so it cannot be rebuilt
from its config; this one takes the table as a call argument.
"""

import tensorflow as tf
import tf_keras

from official_repro.modeling import activations
from official_repro.modeling import arguments


@tf_keras.utils.register_keras_serializable(package='official_repro')
class MultiWordSelectionHead(
    arguments.ConfigFromArguments, tf_keras.layers.Layer
):
  """Candidate-set logits at the masked positions."""

  def __init__(
      self,
      embedding_width: int,
      activation: str = 'gelu_tanh',
      initializer_range: float = 0.02,
      **kwargs,
  ):
    """Builds the transform to width `embedding_width` E."""
    super().__init__(**kwargs)
    self._embedding_width = embedding_width
    self._activation = activation
    self._initializer_range = initializer_range
    self.dense = tf_keras.layers.Dense(
        embedding_width,
        activation=activations.get(activation),
        kernel_initializer=tf_keras.initializers.TruncatedNormal(
            stddev=initializer_range
        ),
        name='transform',
    )
    self.layer_norm = tf_keras.layers.LayerNormalization(
        axis=-1, epsilon=1e-12, name='transform/layer_norm'
    )

  def call(
      self,
      sequence_output: tf.Tensor,
      masked_positions: tf.Tensor,
      candidate_ids: tf.Tensor,
      embedding_table: tf.Tensor,
  ) -> tf.Tensor:
    """Float `[B, P, C]` logits e(candidate)^T h^MWS.

    `sequence_output` `[B, T, H]`, `masked_positions` `[B, P]`,
    `candidate_ids` `[B, P, C]`, `embedding_table` e `[V, E]`.
    """
    states = tf.gather(sequence_output, masked_positions, batch_dims=1)
    states = self.layer_norm(self.dense(states))  # [B, P, E]
    candidates = tf.gather(embedding_table, candidate_ids)  # [B, P, C, E]
    return tf.einsum('bpe,bpce->bpc', states, tf.cast(candidates, states.dtype))
