"""Multiple-choice scoring over an encoder (RACE, 001 Table III).

Each question comes with C options; option c is encoded as its own sequence
`[CLS] article [SEP] question [SEP] option_c [SEP]`. The encoder's pooled
[CLS] output of each sequence goes through dropout and ONE dense layer to a
scalar shared by all options, and the C scalars are the logits of a softmax
over options (001: "the output of all [CLS] tokens ... fed through a fully
connected layer to compute the probabilities of four options"). The pooled
output (Model Garden's `pooler_transform`, dense + tanh over [CLS]) is what
BERT's multiple-choice heads use.
"""

from typing import Any, Dict, Union

import tensorflow as tf
import tf_keras

from official_repro.modeling.models import encoder_model

_INPUTS = ('input_word_ids', 'input_mask', 'input_type_ids')


@tf_keras.utils.register_keras_serializable(package='official_repro')
class MultipleChoiceModel(encoder_model.EncoderModel):
  """Scores `[batch, num_choices, seq]` inputs as `[batch, num_choices]` logits.

  Attributes:
    encoder: the encoder, called on `[batch * num_choices, seq]` inputs.
  """

  def __init__(
      self,
      encoder: tf_keras.Model,
      dropout_rate: float,
      initializer: Union[
          str, Dict[str, Any], tf_keras.initializers.Initializer
      ],
      **kwargs,
  ):
    """Builds the option scorer over `encoder`.

    Args:
      encoder: a Model Garden encoder returning `pooled_output`.
      dropout_rate: dropout before the scoring layer.
      initializer: the scoring layer's kernel initializer (anything
        `tf_keras.initializers.get` accepts).
      **kwargs: other `tf_keras.Model` arguments, e.g. `name`.
    """
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
    """Logits over options.

    Args:
      inputs: `input_word_ids`, `input_mask`, `input_type_ids`, int32
        `[batch, num_choices, seq]`.
      training: dropout on or off.

    Returns:
      float `[batch, num_choices]` logits.
    """
    word_ids = inputs['input_word_ids']
    num_choices = tf.shape(word_ids)[1]
    seq_length = tf.shape(word_ids)[2]
    flat = {
        name: tf.reshape(inputs[name], [-1, seq_length]) for name in _INPUTS
    }
    pooled = self.encoder(flat, training=training)['pooled_output']
    scores = self._score(self._dropout(pooled, training=training))
    return tf.reshape(scores, [-1, num_choices])
