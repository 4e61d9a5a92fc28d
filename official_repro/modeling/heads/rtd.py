"""Replaced-token-detection head of ELECTRA's discriminator."""

import tf_keras

from official.modeling import tf_utils
from official_repro.modeling import activations
from official_repro.modeling import arguments


@tf_keras.utils.register_keras_serializable(package='official_repro')
class ReplacedTokenDetectionHead(
    arguments.ConfigFromArguments, tf_keras.layers.Layer
):
  """Per-token logit that the token was replaced by the generator.

  ELECTRA's discriminator head: dense of the hidden width with `activation`
  (default the reference's tanh GELU), then dense to one logit.
  """

  def __init__(
      self,
      hidden_size: int,
      activation: str = 'gelu_tanh',
      initializer_range: float = 0.02,
      **kwargs,
  ):
    super().__init__(**kwargs)
    self._hidden_size = hidden_size
    self._activation = activation
    self._initializer_range = initializer_range
    initializer = tf_keras.initializers.TruncatedNormal(
        stddev=initializer_range
    )
    self.dense = tf_keras.layers.Dense(
        hidden_size,
        activation=activations.get(activation),
        kernel_initializer=initializer,
        name='transform',
    )
    self.logit = tf_keras.layers.Dense(
        1,
        kernel_initializer=tf_utils.clone_initializer(initializer),
        name='logit',
    )

  def call(self, sequence_output):
    """Maps `[batch, seq, hidden]` encoder outputs to `[batch, seq]` logits."""
    return self.logit(self.dense(sequence_output))[..., 0]
