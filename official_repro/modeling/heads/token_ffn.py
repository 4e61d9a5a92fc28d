"""A per-token feed-forward task head (003 Fig. 2 left, Table 3 ablation).

The design TEAMS compares its attention task heads against: a transformer
block's feed-forward sublayer alone (dense H -> I, activation, dense I -> H,
dropout, residual, LayerNorm), with no attention across tokens.
"""

import tensorflow as tf
import tf_keras

from official.modeling import tf_utils
from official_repro.modeling import activations
from official_repro.modeling import arguments


@tf_keras.utils.register_keras_serializable(package='official_repro')
class TokenFeedForwardHead(
    arguments.ConfigFromArguments, tf_keras.layers.Layer
):
  """Maps `[B, T, H]` states to `[B, T, H]` task states, token by token."""

  def __init__(
      self,
      hidden_size: int,
      intermediate_size: int,
      activation: str = 'gelu_tanh',
      dropout_rate: float = 0.1,
      initializer_range: float = 0.02,
      **kwargs,
  ):
    """Builds the sublayer: H = `hidden_size`, I = `intermediate_size`."""
    super().__init__(**kwargs)
    self._hidden_size = hidden_size
    self._intermediate_size = intermediate_size
    self._activation = activation
    self._dropout_rate = dropout_rate
    self._initializer_range = initializer_range
    initializer = tf_keras.initializers.TruncatedNormal(
        stddev=initializer_range
    )
    self.intermediate = tf_keras.layers.Dense(
        intermediate_size,
        activation=activations.get(activation),
        kernel_initializer=initializer,
        name='intermediate',
    )
    self.output_dense = tf_keras.layers.Dense(
        hidden_size,
        kernel_initializer=tf_utils.clone_initializer(initializer),
        name='output',
    )
    self.dropout = tf_keras.layers.Dropout(dropout_rate)
    self.layer_norm = tf_keras.layers.LayerNormalization(
        axis=-1, epsilon=1e-12, dtype=tf.float32, name='output/layer_norm'
    )

  def call(self, states: tf.Tensor, training=None) -> tf.Tensor:
    outputs = self.dropout(
        self.output_dense(self.intermediate(states)), training=training
    )
    return self.layer_norm(states + outputs)
