"""Exports the encoder a pretraining run produced, for fine-tuning.

`checkpoint_items['encoder']` is written as `tf.train.Checkpoint(encoder=...)`
(what Model Garden's fine-tuning tasks restore; a BERT one loads into Model
Garden's `BertEncoder`), with its `EncoderConfig` and tokenizer, so that
fine-tuning needs only this directory. The layout is the reader's,
`modeling/networks/pretrained.py`.
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
  """Writes `model_dir/encoder/encoder-<step>`, its config and tokenizer.

  `encoder_config` is `EncoderConfig.as_dict()`; `vocab_file` is copied
  beside the checkpoint. Returns the checkpoint prefix.
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
