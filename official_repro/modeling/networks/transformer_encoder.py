"""The encoder network every backbone builds: embeddings, blocks, pooler.

    word (width E) + learned position + type embeddings, LayerNorm, dropout,
      a dense E -> H projection when E != H;
    L transformer blocks, each `block([hidden_states, attention_mask])`;
    pooler: dense H -> H with tanh on the first ([CLS]) token.

This is Model Garden's `BertEncoder` with the blocks given from outside, so
that backbones differ only in their block (BERT: `TransformerEncoderBlock`;
ALBERT: one such block applied L times; ConvBERT: `ConvBertBlock`) and so
that a network can take its bottom blocks and its word-embedding layer from
another one (ELECTRA's tied embeddings, TEAMS' shared generator layers).
Model Garden's `BertEncoder` creates its layers inside its constructor and
cannot take blocks; its `EncoderScaffold` can, but it returns no attention
scores and tracks its layers under other attribute names, so its checkpoints
do not restore into `BertEncoder`. Here the embedding, projection, block and
pooler layers sit under `BertEncoder`'s attribute names and are built with
its layer classes, names and initialisers, so a checkpoint of this network
with BERT blocks restores into Model Garden's `BertEncoder` (the encoder of
its fine-tuning tasks) and the other way round.

One deliberate difference: the E -> H projection's einsum is written
`abc,cd->abd` where `BertEncoder` writes `...x,xy->...y` (same kernel and
bias variables). TensorFlow's gradient of the broadcast form computes the
kernel gradient through a per-position `[B, T, E, H]` product reduced over
B and T; on CPU this one layer's gradient took 12% of the op time of an
ELECTRA-small training step, and writing it out cut the step's wall time by
12% (`experiments/reports/profile_electra_small.md`).
"""

from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf
import tf_keras

from official.modeling import tf_utils
from official.nlp.modeling import layers


@tf_keras.utils.register_keras_serializable(package='official_repro')
class TransformerEncoder(tf_keras.Model):
  """Functional text encoder with Model Garden `BertEncoder`'s interface.

  Inputs: `input_word_ids`, `input_mask`, `input_type_ids`, int32 `[B, T]`
  (a dict, or a list in that order).

  Outputs (a dict):
    sequence_output: `[B, T, H]`, the last block's output.
    pooled_output: `[B, H]`, tanh(dense(sequence_output[:, 0])).
    encoder_outputs: list of L `[B, T, H]`, every block's output.
    attention_scores: only with `return_attention_scores=True`: list of L
      `[B, heads, T, T]` self-attention probabilities.
  """

  def __init__(
      self,
      vocab_size: int,
      hidden_size: int,
      blocks: Sequence[tf_keras.layers.Layer],
      embedding_width: Optional[int] = None,
      max_sequence_length: int = 512,
      type_vocab_size: int = 2,
      dropout_rate: float = 0.1,
      initializer_range: float = 0.02,
      word_embedding_layer: Optional[tf_keras.layers.Layer] = None,
      return_attention_scores: bool = False,
      embedding_block: Optional[Sequence[tf_keras.layers.Layer]] = None,
      **kwargs,
  ):
    """Builds the network.

    Args:
      vocab_size: number of token ids (ignored with `word_embedding_layer`).
      hidden_size: H, the blocks' width.
      blocks: the L transformer blocks, input side first. The same object may
        appear several times (ALBERT) or belong to another network too.
        Each is called as `block([hidden_states, attention_mask])` and must
        return `(hidden_states, probabilities)` when
        `return_attention_scores` is set.
      embedding_width: E; None means E = H.
      max_sequence_length: rows of the position table.
      type_vocab_size: number of segment ids.
      dropout_rate: dropout after the embedding LayerNorm.
      initializer_range: stddev of the truncated-normal initializer.
      word_embedding_layer: an existing word-embedding layer of output width
        E to use (tied embeddings).
      return_attention_scores: add the `attention_scores` output.
      embedding_block: existing (position-embedding, type-embedding,
        LayerNorm) layers of width E to use instead of new ones
        (google-research/electra's tying of the whole embedding block);
        their positions and types must be `max_sequence_length` and
        `type_vocab_size` (`networks.check_embedding_block` checks the
        configs).
      **kwargs: other `tf_keras.Model` arguments (e.g. `name`).

    Raises:
      ValueError: without blocks, or when a block does not return scores
        although `return_attention_scores` is set.
    """
    if not blocks:
      raise ValueError('TransformerEncoder needs at least one block.')
    embedding_width = embedding_width or hidden_size
    initializer = tf_keras.initializers.TruncatedNormal(
        stddev=initializer_range
    )
    word_ids = tf_keras.layers.Input(
        shape=(None,), dtype=tf.int32, name='input_word_ids'
    )
    mask = tf_keras.layers.Input(
        shape=(None,), dtype=tf.int32, name='input_mask'
    )
    type_ids = tf_keras.layers.Input(
        shape=(None,), dtype=tf.int32, name='input_type_ids'
    )
    if word_embedding_layer is None:
      word_embedding_layer = layers.OnDeviceEmbedding(
          vocab_size=vocab_size,
          embedding_width=embedding_width,
          initializer=tf_utils.clone_initializer(initializer),
          name='word_embeddings',
      )
    word_embeddings = word_embedding_layer(word_ids)
    if embedding_block is None:
      embedding_block = (
          layers.PositionEmbedding(
              initializer=tf_utils.clone_initializer(initializer),
              max_length=max_sequence_length,
              name='position_embedding',
          ),
          layers.OnDeviceEmbedding(
              vocab_size=type_vocab_size,
              embedding_width=embedding_width,
              initializer=tf_utils.clone_initializer(initializer),
              use_one_hot=True,
              name='type_embeddings',
          ),
          tf_keras.layers.LayerNormalization(
              name='embeddings/layer_norm',
              axis=-1,
              epsilon=1e-12,
              dtype=tf.float32,
          ),
      )
    position_embedding_layer, type_embedding_layer, embedding_norm_layer = (
        embedding_block
    )
    embeddings = tf_keras.layers.Add()(
        [
            word_embeddings,
            position_embedding_layer(word_embeddings),
            type_embedding_layer(type_ids),
        ]
    )
    embeddings = embedding_norm_layer(embeddings)
    embeddings = tf_keras.layers.Dropout(rate=dropout_rate)(embeddings)
    embedding_projection = None
    if embedding_width != hidden_size:
      embedding_projection = tf_keras.layers.EinsumDense(
          'abc,cd->abd',
          output_shape=(None, hidden_size),
          bias_axes='d',
          kernel_initializer=tf_utils.clone_initializer(initializer),
          name='embedding_projection',
      )
      embeddings = embedding_projection(embeddings)

    attention_mask = layers.SelfAttentionMask()(embeddings, mask)
    hidden_states = embeddings
    encoder_outputs, attention_outputs = [], []
    for block in blocks:
      output = block([hidden_states, attention_mask])
      if return_attention_scores:
        if not isinstance(output, (list, tuple)):
          raise ValueError(
              f'Block {block.name!r} returns no attention '
              'scores; build it with return_attention_scores.'
          )
        output, probabilities = output
        attention_outputs.append(probabilities)
      hidden_states = output
      encoder_outputs.append(hidden_states)

    pooler_layer = tf_keras.layers.Dense(
        units=hidden_size,
        activation='tanh',
        kernel_initializer=tf_utils.clone_initializer(initializer),
        name='pooler_transform',
    )
    outputs = dict(
        sequence_output=hidden_states,
        pooled_output=pooler_layer(hidden_states[:, 0, :]),
        encoder_outputs=encoder_outputs,
    )
    if return_attention_scores:
      outputs['attention_scores'] = attention_outputs
    super().__init__(
        inputs=[word_ids, mask, type_ids], outputs=outputs, **kwargs
    )

    # Model Garden `BertEncoder`'s attribute names: checkpoint compatibility.
    self._embedding_layer = word_embedding_layer
    self._position_embedding_layer = position_embedding_layer
    self._type_embedding_layer = type_embedding_layer
    self._embedding_norm_layer = embedding_norm_layer
    if embedding_projection is not None:
      self._embedding_projection = embedding_projection
    self._transformer_layers = list(blocks)
    self._pooler_layer = pooler_layer
    unique_blocks: List[tf_keras.layers.Layer] = []
    for block in blocks:
      if not any(block is seen for seen in unique_blocks):
        unique_blocks.append(block)
    # Plain attribute, not tracked as a dependency (like BertEncoder's).
    self._setattr_tracking = False
    self._config = dict(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        blocks=[
            tf_keras.utils.serialize_keras_object(block)
            for block in unique_blocks
        ],
        block_order=[
            next(i for i, seen in enumerate(unique_blocks) if seen is block)
            for block in blocks
        ],
        embedding_width=embedding_width,
        max_sequence_length=max_sequence_length,
        type_vocab_size=type_vocab_size,
        dropout_rate=dropout_rate,
        initializer_range=initializer_range,
        return_attention_scores=return_attention_scores,
    )
    self._setattr_tracking = True

  def get_embedding_table(self) -> tf.Variable:
    """The word-embedding table `[vocab_size, E]`."""
    return self._embedding_layer.embeddings

  def get_embedding_layer(self) -> tf_keras.layers.Layer:
    """The word-embedding layer (share it to tie embeddings)."""
    return self._embedding_layer

  @property
  def embedding_block(self) -> Tuple[tf_keras.layers.Layer, ...]:
    """The (position-embedding, type-embedding, LayerNorm) layers."""
    return (
        self._position_embedding_layer,
        self._type_embedding_layer,
        self._embedding_norm_layer,
    )

  @property
  def transformer_layers(self) -> List[tf_keras.layers.Layer]:
    """The L blocks, input side first (ALBERT: one object L times)."""
    return list(self._transformer_layers)

  @property
  def pooler_layer(self) -> tf_keras.layers.Dense:
    """The dense tanh layer on the [CLS] state."""
    return self._pooler_layer

  def get_config(self) -> Dict[str, Any]:
    """Rebuilds an equal architecture.

    Rebuilds an equal architecture; sharing with other networks is not
    part of a config (a rebuilt encoder owns all its layers).
    """
    return dict(self._config, name=self.name)

  @classmethod
  def from_config(cls, config, custom_objects=None):
    config = dict(config)
    unique_blocks = [
        tf_keras.utils.deserialize_keras_object(
            block, custom_objects=custom_objects
        )
        for block in config.pop('blocks')
    ]
    blocks = [unique_blocks[index] for index in config.pop('block_order')]
    return cls(blocks=blocks, **config)
