"""SavedModel serving of an encoder or a classifier, in Model Garden's way.

`TextServing` is an `export_base.ExportModule`: `serve` maps int32 ids
`[batch, seq]` to `sequence_output` `[batch, seq, hidden]` and
`pooled_output` `[batch, hidden]` (or a classifier's `logits`); with a
vocabulary, `serve_text` tokenizes raw strings `[batch]` in graph with the
records' tokenizer (vocabulary kept as an asset) and serves them.
"""

from typing import Dict, Mapping, Optional

import tensorflow as tf
import tf_keras

from official.core import export_base
from official_repro.data import vocab as vocab_lib

SIGNATURES = ('serve', 'serve_text')


class TextServing(export_base.ExportModule):
  """Serves a model from token ids, and optionally from raw text."""

  def __init__(
      self,
      encoder: tf_keras.Model,
      vocab_file: Optional[str] = None,
      lower_case: bool = True,
      max_seq_length: int = 128,
  ):
    """Wraps a built encoder or classifier; `vocab_file` adds `serve_text`.

    `max_seq_length`: `serve_text`'s length, [CLS] and [SEP] included.
    """
    super().__init__(
        params=None,
        model=encoder,
        inference_step=lambda inputs, model: model(inputs, training=False),
    )
    self._max_seq_length = max_seq_length
    self._tokenizer = None
    if vocab_file:
      tokens = vocab_lib.load_vocab(vocab_file)
      special = vocab_lib.SpecialTokenIds.from_vocab(tokens)
      self._cls, self._sep, self._pad = special.cls, special.sep, special.pad
      self._tokenizer = vocab_lib.make_tokenizer(tokens, lower_case)
      self._vocab_asset = tf.saved_model.Asset(vocab_file)

  @tf.function
  def serve(
      self,
      input_word_ids: tf.Tensor,
      input_mask: tf.Tensor,
      input_type_ids: tf.Tensor,
  ) -> Mapping[str, tf.Tensor]:
    outputs = self.inference_step(
        dict(
            input_word_ids=input_word_ids,
            input_mask=input_mask,
            input_type_ids=input_type_ids,
        )
    )
    if not isinstance(outputs, dict):
      return dict(logits=outputs)
    return dict(
        sequence_output=outputs['sequence_output'],
        pooled_output=outputs['pooled_output'],
    )

  @tf.function
  def serve_text(self, text: tf.Tensor) -> Mapping[str, tf.Tensor]:
    """Raw strings `[batch]` -> the encoder's outputs."""
    pieces = self._tokenizer.tokenize(text)
    pieces = pieces[:, : self._max_seq_length - 2]
    batch = tf.shape(text)[0]
    cls = tf.fill([batch, 1], self._cls)
    sep = tf.fill([batch, 1], self._sep)
    ids = tf.concat([cls, pieces, sep], axis=1)
    word_ids = ids.to_tensor(default_value=self._pad)
    mask = tf.ones_like(ids).to_tensor(default_value=0)
    return self.serve(word_ids, mask, tf.zeros_like(word_ids))

  def get_inference_signatures(
      self, function_keys: Dict[str, str]
  ) -> Mapping[str, tf.types.experimental.ConcreteFunction]:
    """The concrete functions of `function_keys` (`SIGNATURES`)."""
    signatures = {}
    for key, name in function_keys.items():
      if key == 'serve':
        signatures[name] = self.serve.get_concrete_function(
            tf.TensorSpec([None, None], tf.int32, 'input_word_ids'),
            tf.TensorSpec([None, None], tf.int32, 'input_mask'),
            tf.TensorSpec([None, None], tf.int32, 'input_type_ids'),
        )
      elif key == 'serve_text':
        if self._tokenizer is None:
          raise ValueError('serve_text needs the vocabulary.')
        signatures[name] = self.serve_text.get_concrete_function(
            tf.TensorSpec([None], tf.string, 'text')
        )
      else:
        raise ValueError(f'No signature {key!r}; known: {SIGNATURES}.')
    return signatures


def export(
    encoder: tf_keras.Model,
    output_dir: str,
    vocab_file: Optional[str] = None,
    lower_case: bool = True,
    max_seq_length: int = 128,
) -> str:
  """Writes `encoder` (or a classifier) as a SavedModel; returns its dir.

  The default signature is `serve`; a vocabulary adds `serve_text`.
  """
  module = TextServing(encoder, vocab_file, lower_case, max_seq_length)
  keys = {'serve': tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY}
  if vocab_file:
    keys['serve_text'] = 'serve_text'
  return export_base.export(module, keys, output_dir, timestamped=False)
