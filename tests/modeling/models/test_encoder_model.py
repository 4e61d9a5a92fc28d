"""The encoder models' base: a whole model saves and loads with its encoder."""

import numpy as np
import tensorflow as tf
import tf_keras

from official_repro.modeling.models import encoder_model


@tf_keras.utils.register_keras_serializable(package='test_encoder_model')
class _PooledScale(encoder_model.EncoderModel):
  """The encoder's pooled output times a constant: one extra argument."""

  def __init__(self, encoder, scale, **kwargs):
    super().__init__(encoder, dict(scale=scale), **kwargs)
    self._scale = scale

  def call(self, inputs, training=None):
    return (
        self._scale * self.encoder(inputs, training=training)['pooled_output']
    )


def _inputs():
  rng = np.random.default_rng(0)
  return dict(
      input_word_ids=rng.integers(1, 50, (2, 8)).astype(np.int32),
      input_mask=np.ones((2, 8), np.int32),
      input_type_ids=np.zeros((2, 8), np.int32),
  )


def test_a_saved_model_loads_with_its_encoder_weights(
    tiny_bert_encoder, tmp_path
):
  tf_keras.utils.set_random_seed(0)
  model = _PooledScale(tiny_bert_encoder(), scale=3.0, name='scaled')
  expected = model(_inputs()).numpy()
  path = str(tmp_path / 'model.keras')
  model.save(path)
  loaded = tf_keras.models.load_model(path)
  assert loaded.name == 'scaled'
  assert loaded.get_config()['scale'] == 3.0
  np.testing.assert_allclose(loaded(_inputs()).numpy(), expected, rtol=1e-6)


def test_the_checkpoint_items_are_the_encoder(tiny_bert_encoder, tmp_path):
  encoder = tiny_bert_encoder()
  model = _PooledScale(encoder, scale=1.0)
  assert model.checkpoint_items == {'encoder': encoder}
  model(_inputs())
  path = tf.train.Checkpoint(**model.checkpoint_items).write(
      str(tmp_path / 'ckpt')
  )
  other = _PooledScale(tiny_bert_encoder(), scale=1.0)
  other(_inputs())
  tf.train.Checkpoint(**other.checkpoint_items).read(path).assert_consumed()
  np.testing.assert_allclose(
      other(_inputs()).numpy(), model(_inputs()).numpy(), rtol=1e-6
  )
