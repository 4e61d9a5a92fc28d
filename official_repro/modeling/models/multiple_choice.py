"""Multiple-choice scoring over an encoder (RACE, 001 Table III).

Option c is its own sequence `[CLS] article [SEP] question [SEP] option_c
[SEP]`; each pooled [CLS] output (as BERT's multiple-choice heads) goes
through dropout and ONE dense layer to a scalar, and the C scalars are the
logits of a softmax over options (001).
"""

from typing import Any, Dict, Union

import tensorflow as tf
import tf_keras

from official_repro.modeling.models import encoder_model

_INPUTS = ('input_word_ids', 'input_mask', 'input_type_ids')


@tf_keras.utils.register_keras_serializable(package='official_repro')
class MultipleChoiceModel(encoder_model.EncoderModel):
  """Scores `[B, num_choices, T]` inputs as `[B, num_choices]` logits."""

  def __init__(
      self,
      encoder: tf_keras.Model,
      dropout_rate: float,
      initializer: Union[
          str, Dict[str, Any], tf_keras.initializers.Initializer
      ],
      **kwargs,
  ):
    """Builds the option scorer over an `encoder` returning `pooled_output`."""
    initializer = tf_keras.initializers.get(initializer)
    super().__init__(
        encoder,
        dict(dropout_rate=dropout_rate, initializer=initializer),
        **kwargs,
    )
    self._dropout = tf_keras.layers.Dropout(dropout_rate)
    self._score = tf_keras.layers.Dense(
        1, kernel_initializer=initializer, name='choice_score'
    )

  def call(self, inputs: Dict[str, tf.Tensor], training=None) -> tf.Tensor:
    """Float `[B, C]` logits of int32 `[B, C, T]` inputs (C options)."""
    word_ids = inputs['input_word_ids']
    num_choices = tf.shape(word_ids)[1]
    seq_length = tf.shape(word_ids)[2]
    flat = {
        name: tf.reshape(inputs[name], [-1, seq_length]) for name in _INPUTS
    }
    pooled = self.encoder(flat, training=training)['pooled_output']
    scores = self._score(self._dropout(pooled, training=training))
    return tf.reshape(scores, [-1, num_choices])
