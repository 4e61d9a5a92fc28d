"""Base class of the fine-tuning models that wrap an encoder.

As Model Garden's heads (`BertClassifier`, ...), `get_config` holds the
encoder as a serialized (registered) Keras object beside the other
constructor arguments, and `from_config` rebuilds the encoder first.
"""

from typing import Any, Dict

import tensorflow as tf
import tf_keras


class EncoderModel(tf_keras.Model):
  """A Keras model around an `encoder`, serializable together with it."""

  def __init__(self, encoder: tf_keras.Model, config: Dict[str, Any], **kwargs):
    """Keeps the encoder and the subclass's other constructor arguments.

    `config` holds the subclass's arguments but `encoder` and `**kwargs`
    (Keras objects among them are serialized by `get_config`).
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

    Keras' default builds with float inputs, which the embedding lookup rejects.
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
