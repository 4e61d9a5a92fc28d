"""The multiple-choice model's Keras serialization round trip."""

import numpy as np
import tf_keras

from official.nlp.modeling import networks
from official_repro.modeling.models import multiple_choice


def _inputs():
  """Two questions with four options of 8 tokens each."""
  rng = np.random.default_rng(0)
  shape = (2, 4, 8)
  return dict(
      input_word_ids=rng.integers(1, 50, shape).astype(np.int32),
      input_mask=np.ones(shape, np.int32),
      input_type_ids=np.zeros(shape, np.int32),
  )


def test_from_config_builds_an_equal_model(tiny_bert_encoder):
  tf_keras.utils.set_random_seed(0)
  model = multiple_choice.MultipleChoiceModel(
      tiny_bert_encoder(),
      dropout_rate=0.1,
      initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02),
      name='race_model',
  )
  config = model.get_config()
  clone = multiple_choice.MultipleChoiceModel.from_config(config)
  assert clone.get_config() == config
  assert config['encoder']['config']['num_layers'] == 1
  assert (
      config['dropout_rate'],
      config['initializer']['config']['stddev'],
  ) == (0.1, 0.02)
  logits = model(_inputs(), training=False)
  clone(_inputs(), training=False)
  assert [w.shape for w in clone.weights] == [w.shape for w in model.weights]
  clone.set_weights(model.get_weights())
  assert logits.shape == (2, 4)
  np.testing.assert_allclose(
      clone(_inputs(), training=False).numpy(), logits.numpy(), rtol=1e-6
  )


def test_registered_for_keras_deserialization(tiny_bert_encoder):
  model = multiple_choice.MultipleChoiceModel(
      tiny_bert_encoder(), dropout_rate=0.0, initializer='glorot_uniform'
  )
  model(_inputs(), training=False)
  restored = tf_keras.utils.deserialize_keras_object(
      tf_keras.utils.serialize_keras_object(model)
  )
  assert isinstance(restored, multiple_choice.MultipleChoiceModel)
  assert isinstance(restored.encoder, networks.BertEncoder)
  # A called model comes back built, ready for its weights.
  assert [w.shape for w in restored.weights] == [w.shape for w in model.weights]
