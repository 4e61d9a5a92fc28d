"""A run's encoder export: the files of the layout, readable by Model Garden."""

import json
import os

from official.nlp.configs import encoders as mg_encoders
import numpy as np
import tensorflow as tf

from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import export_layout
from official_repro.training import export


def _inputs():
  ids = tf.constant(np.arange(16).reshape(2, 8) % 30, tf.int32)
  return dict(
      input_word_ids=ids,
      input_mask=tf.ones_like(ids),
      input_type_ids=tf.zeros_like(ids),
  )


def test_a_bert_export_restores_into_model_garden_and_holds_its_config(
    tmp_path,
):
  config = encoders.validate(
      encoders.EncoderConfig(
          hidden_size=16,
          num_layers=2,
          num_attention_heads=2,
          intermediate_size=32,
          vocab_size=30,
          max_position_embeddings=16,
      )
  )
  encoder = encoders.build_encoder(config)
  encoder(_inputs())
  holder = tf.train.Checkpoint()
  holder.checkpoint_items = {'encoder': encoder}
  prefix = export.export_encoder(holder, config.as_dict(), str(tmp_path), 7)

  export_dir = tmp_path / export_layout.ENCODER_SUBDIR
  assert prefix == str(export_dir / f'{export_layout.CHECKPOINT_PREFIX}-7')
  with open(export_dir / export_layout.ENCODER_CONFIG_FILENAME) as f:
    assert json.load(f) == json.loads(json.dumps(config.as_dict()))
  # Without a vocabulary there is no tokenizer file to point at it.
  assert not os.path.exists(export_dir / export_layout.TOKENIZER_FILENAME)

  stock = mg_encoders.build_encoder(encoders.to_model_garden_config(config))
  stock(_inputs())
  tf.train.Checkpoint(encoder=stock).read(
      prefix
  ).assert_existing_objects_matched()
  np.testing.assert_allclose(
      stock(_inputs(), training=False)['sequence_output'],
      encoder(_inputs(), training=False)['sequence_output'],
      atol=1e-6,
  )
