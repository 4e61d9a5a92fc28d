"""The original ELECTRA/ConvBERT classification head: first token, one dense.

google-research/electra reads `sequence_output[:, 0]` (no pooler), applies
dropout and one Glorot-uniform dense layer. Model Garden's
`ClassificationHead` with `inner_dim=0` projects its input as given instead
of taking the first token, hence this layer (`cls_head` of a
`BertClassifier` with `use_encoder_pooler=False`).
"""

import tf_keras

from official_repro.modeling import arguments


@tf_keras.utils.register_keras_serializable(package='official_repro')
class FirstTokenHead(arguments.ConfigFromArguments, tf_keras.layers.Layer):
  """`[batch, seq, hidden]` -> `[batch, num_classes]`: dropout, then dense."""

  def __init__(
      self,
      num_classes: int,
      dropout_rate: float = 0.1,
      initializer='glorot_uniform',
      **kwargs,
  ):
    super().__init__(**kwargs)
    arguments.check_sizes(num_classes=num_classes)
    arguments.check_rates(dropout_rate=dropout_rate)
    self._num_classes = num_classes
    self._dropout_rate = dropout_rate
    self._initializer = tf_keras.initializers.get(initializer)
    self.dropout = tf_keras.layers.Dropout(dropout_rate)
    self.out_proj = tf_keras.layers.Dense(
        num_classes, kernel_initializer=self._initializer, name='logits'
    )

  def call(self, sequence_output, training=None):
    first_token = sequence_output[:, 0, :]
    return self.out_proj(self.dropout(first_token, training=training))
