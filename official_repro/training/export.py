"""Exports the encoder a pretraining run produced, for fine-tuning.

The pretrainers expose the network kept for fine-tuning as
`checkpoint_items['encoder']` (ELECTRA: the discriminator; masked LM: the
encoder). It is written as `tf.train.Checkpoint(encoder=...)`, the layout
Model Garden's fine-tuning tasks restore from `init_checkpoint`, together
with the `EncoderConfig` that rebuilds it. For the BERT backbone the
checkpoint loads into the `BertEncoder` that Model Garden builds from
`encoders.to_model_garden_config(config)`.
"""

import json
import os
from typing import Any, Dict

import tensorflow as tf
import tf_keras

ENCODER_SUBDIR = 'encoder'
ENCODER_CONFIG_FILENAME = 'encoder_config.json'


def export_encoder(model: tf_keras.Model, encoder_config: Dict[str, Any],
                   model_dir: str, step: int) -> str:
  """Writes `model_dir/encoder/encoder-<step>` and the encoder's config.

  Args:
    model: a pretrainer with `checkpoint_items['encoder']`.
    encoder_config: `EncoderConfig.as_dict()` of that encoder.
    model_dir: the run's directory.
    step: the global step, used in the checkpoint name.

  Returns:
    The checkpoint path (prefix).
  """
  export_dir = os.path.join(model_dir, ENCODER_SUBDIR)
  tf.io.gfile.makedirs(export_dir)
  checkpoint = tf.train.Checkpoint(encoder=model.checkpoint_items['encoder'])
  path = checkpoint.write(os.path.join(export_dir, f'encoder-{step}'))
  config_path = os.path.join(export_dir, ENCODER_CONFIG_FILENAME)
  with tf.io.gfile.GFile(config_path + '.tmp', 'w') as f:
    json.dump(encoder_config, f, indent=2, sort_keys=True)
  tf.io.gfile.rename(config_path + '.tmp', config_path, overwrite=True)
  return path
