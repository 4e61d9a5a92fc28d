"""Exports the encoder a pretraining run produced, for fine-tuning.

The pretrainers expose the network kept for fine-tuning as
`checkpoint_items['encoder']` (ELECTRA: the discriminator; masked LM: the
encoder). It is written as `tf.train.Checkpoint(encoder=...)`, the layout
Model Garden's fine-tuning tasks restore from `init_checkpoint`, together
with the `EncoderConfig` that rebuilds it and the tokenizer it was trained
with (`vocab.txt` or `spiece.model`, and `tokenizer.json` holding
`lower_case`), so that
fine-tuning needs nothing but this directory
(`official_repro.modeling.networks.pretrained`). For the BERT backbone the
checkpoint loads into the `BertEncoder` that Model Garden builds from
`encoders.to_model_garden_config(config)`. The file layout is defined by
the reader, `modeling/networks/pretrained.py`.
"""

import os
from typing import Any, Dict, Optional

import tensorflow as tf
import tf_keras

from official_repro.common import json_files
from official_repro.data import vocab as vocab_lib
from official_repro.modeling.networks import export_layout


def export_encoder(
    model: tf_keras.Model,
    encoder_config: Dict[str, Any],
    model_dir: str,
    step: int,
    vocab_file: Optional[str] = None,
    lower_case: Optional[bool] = None,
) -> str:
  """Writes `model_dir/encoder/encoder-<step>` and the encoder's config.

  Args:
    model: a pretrainer with `checkpoint_items['encoder']`.
    encoder_config: `EncoderConfig.as_dict()` of that encoder.
    model_dir: the run's directory.
    step: the global step, used in the checkpoint name.
    vocab_file: the vocabulary the encoder was trained with; copied beside
      the checkpoint when given.
    lower_case: whether that vocabulary's tokenizer lower-cases.

  Returns:
    The checkpoint path (prefix).
  """
  export_dir = os.path.join(model_dir, export_layout.ENCODER_SUBDIR)
  tf.io.gfile.makedirs(export_dir)
  checkpoint = tf.train.Checkpoint(encoder=model.checkpoint_items['encoder'])
  path = checkpoint.write(os.path.join(export_dir, f'encoder-{step}'))
  json_files.write_json(
      os.path.join(export_dir, export_layout.ENCODER_CONFIG_FILENAME),
      encoder_config,
  )
  if vocab_file:
    filename = vocab_lib.filename_of(vocab_lib.kind_of_file(vocab_file))
    tf.io.gfile.copy(
        vocab_file, os.path.join(export_dir, filename), overwrite=True
    )
    json_files.write_json(
        os.path.join(export_dir, export_layout.TOKENIZER_FILENAME),
        dict(vocab_file=filename, lower_case=bool(lower_case)),
    )
  return path
