"""The BERT-style embedding sub-network shared by the ALBERT and ConvBERT backbones.

Word, learned position and type embeddings of width E, summed, LayerNorm
(epsilon 1e-12), dropout, and a dense E -> H projection when E != H (the
factorized embedding of ALBERT, also used by ELECTRA-small and ConvBERT
small/medium-small). The layers, names and initialisers are those of Model
Garden's `BertEncoder`, so the sub-network computes exactly what
`BertEncoder` computes before its first transformer block. Model Garden only
builds these layers inside its encoders' constructors; this sub-network is a
standalone model so that other encoders (Model Garden's `EncoderScaffold`,
our `ConvBertEncoder`) can use it and share an existing word-embedding layer
(ELECTRA's tied generator/discriminator embeddings).
"""

from typing import Optional, Tuple

import tensorflow as tf
import tf_keras

from official.modeling import tf_utils
from official.nlp.modeling import layers


def build_embedding_network(
    vocab_size: int,
    embedding_width: int,
    hidden_size: int,
    max_sequence_length: int,
    type_vocab_size: int,
    dropout_rate: float,
    initializer: tf_keras.initializers.Initializer,
    word_embedding_layer: Optional[tf_keras.layers.Layer] = None,
    name: str = 'embeddings',
) -> Tuple[tf_keras.Model, tf_keras.layers.Layer]:
  """Builds the embedding sub-network.

  Args:
    vocab_size: number of token ids (ignored when `word_embedding_layer` is
      given).
    embedding_width: E, the width of all three embedding tables.
    hidden_size: H; a dense E -> H projection follows when E != H.
    max_sequence_length: rows of the learned position table.
    type_vocab_size: number of segment ids.
    dropout_rate: dropout after the LayerNorm.
    initializer: initializer of the tables and the projection (cloned).
    word_embedding_layer: an existing word-embedding layer (output width E)
      to use instead of a new one, e.g. the discriminator's, for tied
      embeddings.
    name: the sub-network's name.

  Returns:
    `(network, word_embedding_layer)`. The network takes
    `[input_word_ids, input_mask, input_type_ids]` (int32 `[B, T]`) and
    returns `[embeddings, attention_mask]`: the embeddings `[B, T, H]` and
    Model Garden's `SelfAttentionMask` of the input mask, `[B, T, T]` (1 =
    the query may attend to the key).
  """
  word_ids = tf_keras.layers.Input(shape=(None,), dtype=tf.int32,
                                   name='input_word_ids')
  mask = tf_keras.layers.Input(shape=(None,), dtype=tf.int32,
                               name='input_mask')
  type_ids = tf_keras.layers.Input(shape=(None,), dtype=tf.int32,
                                   name='input_type_ids')
  if word_embedding_layer is None:
    word_embedding_layer = layers.OnDeviceEmbedding(
        vocab_size=vocab_size, embedding_width=embedding_width,
        initializer=tf_utils.clone_initializer(initializer),
        name='word_embeddings')
  word_embeddings = word_embedding_layer(word_ids)
  position_embeddings = layers.PositionEmbedding(
      initializer=tf_utils.clone_initializer(initializer),
      max_length=max_sequence_length,
      name='position_embedding')(word_embeddings)
  type_embeddings = layers.OnDeviceEmbedding(
      vocab_size=type_vocab_size,
      embedding_width=embedding_width,
      initializer=tf_utils.clone_initializer(initializer), use_one_hot=True,
      name='type_embeddings')(type_ids)
  embeddings = tf_keras.layers.Add()(
      [word_embeddings, position_embeddings, type_embeddings])
  embeddings = tf_keras.layers.LayerNormalization(
      name='embeddings/layer_norm', axis=-1, epsilon=1e-12,
      dtype=tf.float32)(embeddings)
  embeddings = tf_keras.layers.Dropout(rate=dropout_rate)(embeddings)
  if embedding_width != hidden_size:
    embeddings = tf_keras.layers.EinsumDense(
        '...x,xy->...y', output_shape=hidden_size, bias_axes='y',
        kernel_initializer=tf_utils.clone_initializer(initializer),
        name='embedding_projection')(embeddings)
  attention_mask = layers.SelfAttentionMask()(embeddings, mask)
  network = tf_keras.Model([word_ids, mask, type_ids],
                           [embeddings, attention_mask], name=name)
  return network, word_embedding_layer
