"""The BERT backbone: Model Garden's BertEncoder, checkpoint for checkpoint."""

import numpy as np
import tensorflow as tf

from official.nlp.configs import encoders as mg_encoders
from official_repro.modeling.networks import encoders
from tests.modeling.networks.test_encoders import _config
from tests.modeling.networks.test_encoders import _inputs


def test_checkpoint_of_bert_backbone_restores_into_model_garden_encoder(
    tmp_path,
):
  config = _config(embedding_width=None)
  ours = encoders.build_encoder(config)
  stock = mg_encoders.build_encoder(encoders.to_model_garden_config(config))
  inputs = _inputs()
  ours(inputs)
  stock(inputs)
  prefix = tf.train.Checkpoint(encoder=ours).write(str(tmp_path / 'ours'))
  status = tf.train.Checkpoint(encoder=stock).read(prefix)
  status.assert_existing_objects_matched()
  np.testing.assert_allclose(
      stock(inputs, training=False)['sequence_output'],
      ours(inputs, training=False)['sequence_output'],
      atol=1e-6,
  )
