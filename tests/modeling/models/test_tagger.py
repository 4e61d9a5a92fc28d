"""The tagger's Keras serialization round trip, with and without a CRF."""

import numpy as np
import pytest
import tf_keras

from official.nlp.modeling import networks
from official_repro.modeling.models import tagger

NUM_TAGS = 5


def _inputs():
  """Two sequences of 8 tokens, the second with 3 padding positions."""
  rng = np.random.default_rng(0)
  mask = np.array([[1] * 8, [1] * 5 + [0] * 3], np.int32)
  return dict(
      input_word_ids=rng.integers(1, 50, (2, 8)).astype(np.int32),
      input_mask=mask,
      input_type_ids=np.zeros((2, 8), np.int32),
  )


@pytest.mark.slow
@pytest.mark.parametrize('use_crf', [False, True])
def test_from_config_builds_an_equal_model(tiny_bert_encoder, use_crf):
  tf_keras.utils.set_random_seed(0)
  model = tagger.Tagger(
      tiny_bert_encoder(),
      NUM_TAGS,
      dropout_rate=0.1,
      use_crf=use_crf,
      initializer=tf_keras.initializers.TruncatedNormal(stddev=0.02),
      name='pos_tagger',
  )
  config = model.get_config()
  clone = tagger.Tagger.from_config(config)
  assert clone.get_config() == config
  assert config['encoder']['config']['hidden_size'] == 16
  assert (config['initializer']['config']['stddev'], config['use_crf']) == (
      0.02,
      use_crf,
  )
  outputs = model(_inputs(), training=False)
  clone(_inputs(), training=False)
  assert [w.shape for w in clone.weights] == [w.shape for w in model.weights]
  clone.set_weights(model.get_weights())
  clone_outputs = clone(_inputs(), training=False)
  np.testing.assert_allclose(
      clone_outputs['logits'].numpy(), outputs['logits'].numpy(), rtol=1e-6
  )
  np.testing.assert_array_equal(
      clone_outputs['predicted_ids'].numpy(), outputs['predicted_ids'].numpy()
  )


def test_registered_for_keras_deserialization(tiny_bert_encoder):
  model = tagger.Tagger(
      tiny_bert_encoder(),
      NUM_TAGS,
      dropout_rate=0.0,
      initializer='glorot_uniform',
      use_crf=True,
  )
  model(_inputs(), training=False)
  restored = tf_keras.utils.deserialize_keras_object(
      tf_keras.utils.serialize_keras_object(model)
  )
  assert isinstance(restored, tagger.Tagger) and restored.crf is not None
  assert isinstance(restored.encoder, networks.BertEncoder)
  # A called model comes back built, ready for its weights.
  assert [w.shape for w in restored.weights] == [w.shape for w in model.weights]
