"""Base class of the fine-tuning models that wrap an encoder.

Model Garden's heads (`BertClassifier`, `BertSpanLabeler`) serialize their
encoder as a sub-object; `EncoderModel` does the same for the models of this
package: `get_config` holds the encoder as a serialized Keras object (its
class must be registered, as Model Garden's encoders are) and the other
constructor arguments, and `from_config` rebuilds the encoder first.
"""

from typing import Any, Dict

import tensorflow as tf
import tf_keras


class EncoderModel(tf_keras.Model):
  """A Keras model around an encoder, serializable together with it.

  Attributes:
    encoder: the encoder.
  """

  def __init__(self, encoder: tf_keras.Model, config: Dict[str, Any], **kwargs):
    """Keeps the encoder and the subclass's other constructor arguments.

    Args:
      encoder: the encoder the subclass builds on.
      config: the subclass's constructor arguments other than `encoder` and
        `**kwargs`; Keras objects among them (initializers) are serialized
        by `get_config`.
      **kwargs: other `tf_keras.Model` arguments, e.g. `name`.
    """
    super().__init__(**kwargs)
    self.encoder = encoder
    self._config = dict(config)

  @property
  def checkpoint_items(self) -> Dict[str, tf_keras.Model]:
    return dict(encoder=self.encoder)

  def get_config(self) -> Dict[str, Any]:
    config = dict(self._config, encoder=self.encoder)
    return dict(
        name=self.name,
        **{
            key: tf_keras.utils.serialize_keras_object(value)
            for key, value in config.items()
        },
    )

  def build_from_config(self, config: Dict[str, Any]) -> None:
    """Creates the weights by a call on zero ids of the built input shapes.

    Keras' default would `build` with float inputs, which the encoder's
    embedding lookup rejects, so a called model could not be deserialized.

    Args:
      config: from `get_build_config`; `input_shape` maps each encoder input
        name to its shape.
    """
    self(
        {
            name: tf.zeros([dim or 1 for dim in shape], tf.int32)
            for name, shape in config['input_shape'].items()
        }
    )

  @classmethod
  def from_config(cls, config: Dict[str, Any], custom_objects=None):
    config = dict(config)
    config['encoder'] = tf_keras.utils.deserialize_keras_object(
        config['encoder'], custom_objects=custom_objects
    )
    return cls(**config)
