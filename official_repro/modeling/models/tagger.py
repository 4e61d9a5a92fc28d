"""Token tagging over an encoder, with an optional CRF (001 Table III).

Per-token scores are Model Garden's `BertTokenClassifier`; with `use_crf` a
linear-chain CRF (`layers/crf.py`) is trained on the gold path's
log-likelihood and decodes by Viterbi, else each tag is the argmax.
"""

from typing import Any, Dict, Union

import tensorflow as tf
import tf_keras

from official.nlp.modeling import models
from official_repro.modeling.layers import crf as crf_layer
from official_repro.modeling.models import encoder_model


@tf_keras.utils.register_keras_serializable(package='official_repro')
class Tagger(encoder_model.EncoderModel):
  """Per-token tag scores and predictions (`encoder`, `crf` or None)."""

  def __init__(
      self,
      encoder: tf_keras.Model,
      num_tags: int,
      dropout_rate: float,
      initializer: Union[
          str, Dict[str, Any], tf_keras.initializers.Initializer
      ],
      use_crf: bool = False,
      **kwargs,
  ):
    """Builds the token classifier (and CRF) over `encoder`."""
    initializer = tf_keras.initializers.get(initializer)
    super().__init__(
        encoder,
        dict(
            num_tags=num_tags,
            dropout_rate=dropout_rate,
            initializer=initializer,
            use_crf=use_crf,
        ),
        **kwargs,
    )
    self._token_classifier = models.BertTokenClassifier(
        network=encoder,
        num_classes=num_tags,
        initializer=initializer,
        dropout_rate=dropout_rate,
        output='logits',
    )
    self.crf = crf_layer.CRF(num_tags, name='crf') if use_crf else None

  def call(
      self, inputs: Dict[str, tf.Tensor], training=None
  ) -> Dict[str, tf.Tensor]:
    """Scores and predicted tags of int32 `[batch, seq]` encoder inputs.

    Returns:
      `logits` float `[batch, seq, num_tags]` (the CRF's potentials), `mask`
      int32 `[batch, seq]`, and when not training `predicted_ids` int32
      `[batch, seq]` (argmax or Viterbi).
    """
    logits = self._token_classifier(inputs, training=training)['logits']
    outputs = dict(logits=logits, mask=inputs['input_mask'])
    if training:
      return outputs
    if self.crf is None:
      outputs['predicted_ids'] = tf.argmax(
          logits, axis=-1, output_type=tf.int32
      )
    else:
      outputs['predicted_ids'] = self.crf(logits, mask=inputs['input_mask'])
    return outputs

  def log_likelihood(
      self, logits: tf.Tensor, tags: tf.Tensor, mask: tf.Tensor
  ) -> tf.Tensor:
    """CRF log-likelihood `[batch]` of `tags` (requires `use_crf`)."""
    return self.crf.log_likelihood(logits, tags, mask)
