"""The encoder network every backbone builds: embeddings, blocks, pooler.

Model Garden's `BertEncoder` with the blocks given from outside, so backbones
differ only in their block and a network can take its bottom blocks and word
embeddings from another (ELECTRA, TEAMS). `BertEncoder` cannot take blocks;
`EncoderScaffold` can, but returns no attention scores and tracks its layers
under other names. Here the layers sit under `BertEncoder`'s attribute names,
classes, names and initialisers, so checkpoints restore both ways. One
deliberate difference: the E -> H projection's einsum is `abc,cd->abd`, not
`...x,xy->...y` (same variables), whose gradient was 12% of an ELECTRA-small
CPU step (`experiments/reports/profile_electra_small.md`).
"""

from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf
import tf_keras

from official.modeling import tf_utils
from official.nlp.modeling import layers


def _embedding_layers(
    initializer,
    vocab_size: int,
    width: int,
    max_sequence_length: int,
    type_vocab_size: int,
    word_embedding_layer: Optional[tf_keras.layers.Layer],
    embedding_block: Optional[Sequence[tf_keras.layers.Layer]],
) -> Tuple[tf_keras.layers.Layer, ...]:
  """(word, position, type, LayerNorm) layers of width E, given or new."""
  if word_embedding_layer is None:
    word_embedding_layer = layers.OnDeviceEmbedding(
        vocab_size=vocab_size,
        embedding_width=width,
        initializer=tf_utils.clone_initializer(initializer),
        name='word_embeddings',
    )
  if embedding_block is None:
    embedding_block = (
        layers.PositionEmbedding(
            initializer=tf_utils.clone_initializer(initializer),
            max_length=max_sequence_length,
            name='position_embedding',
        ),
        layers.OnDeviceEmbedding(
            vocab_size=type_vocab_size,
            embedding_width=width,
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
  return (word_embedding_layer, *embedding_block)


def _projection(width: int, hidden_size: int, initializer):
  """The dense E -> H projection, None when E = H."""
  if width == hidden_size:
    return None
  return tf_keras.layers.EinsumDense(
      'abc,cd->abd',
      output_shape=(None, hidden_size),
      bias_axes='d',
      kernel_initializer=tf_utils.clone_initializer(initializer),
      name='embedding_projection',
  )


def _embed(word_ids, type_ids, embedding_layers, dropout_rate, projection):
  """Word + position + type embeddings, LayerNorm, dropout, projection."""
  word_layer, position_layer, type_layer, norm_layer = embedding_layers
  word_embeddings = word_layer(word_ids)
  embeddings = tf_keras.layers.Add()(
      [word_embeddings, position_layer(word_embeddings), type_layer(type_ids)]
  )
  embeddings = norm_layer(embeddings)
  embeddings = tf_keras.layers.Dropout(rate=dropout_rate)(embeddings)
  return embeddings if projection is None else projection(embeddings)


def _outputs(blocks, embeddings, mask, pooler_layer, return_attention_scores):
  """The blocks and the pooler on the embeddings: the outputs dict."""
  hidden_states = embeddings
  attention_mask = layers.SelfAttentionMask()(embeddings, mask)
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
  outputs = dict(
      sequence_output=hidden_states,
      pooled_output=pooler_layer(hidden_states[:, 0, :]),
      encoder_outputs=encoder_outputs,
  )
  if return_attention_scores:
    outputs['attention_scores'] = attention_outputs
  return outputs


def _serialized_blocks(blocks) -> Dict[str, Any]:
  """`blocks` (each distinct block once) and `block_order` of a config."""
  unique_blocks: List[tf_keras.layers.Layer] = []
  for block in blocks:
    if not any(block is seen for seen in unique_blocks):
      unique_blocks.append(block)
  return dict(
      blocks=[
          tf_keras.utils.serialize_keras_object(block)
          for block in unique_blocks
      ],
      block_order=[
          next(i for i, seen in enumerate(unique_blocks) if seen is block)
          for block in blocks
      ],
  )


@tf_keras.utils.register_keras_serializable(package='official_repro')
class TransformerEncoder(tf_keras.Model):
  """Functional text encoder with Model Garden `BertEncoder`'s interface.

  Inputs: `input_word_ids`, `input_mask`, `input_type_ids`, int32 `[B, T]`
  (a dict, or a list in that order). Outputs: `sequence_output` `[B, T, H]`,
  `pooled_output` `[B, H]` (tanh dense on [CLS]), `encoder_outputs` (L
  `[B, T, H]`) and, with `return_attention_scores`, `attention_scores` (L
  `[B, heads, T, T]`).
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

    `blocks` are the L blocks, input side first; one object may appear
    several times (ALBERT) or belong to another network. An existing
    `word_embedding_layer` (tied embeddings; `vocab_size` is then ignored)
    or `embedding_block` (position, type, LayerNorm: google-research/
    electra's tying of the whole embedding block) has width E
    (`embedding_width`, None: H). `**kwargs` go to `tf_keras.Model`.
    """
    if not blocks:
      raise ValueError('TransformerEncoder needs at least one block.')
    embedding_width = embedding_width or hidden_size
    initializer = tf_keras.initializers.TruncatedNormal(
        stddev=initializer_range
    )
    word_ids, mask, type_ids = (
        tf_keras.layers.Input(shape=(None,), dtype=tf.int32, name=name)
        for name in ('input_word_ids', 'input_mask', 'input_type_ids')
    )
    embedding_layers = _embedding_layers(
        initializer,
        vocab_size,
        embedding_width,
        max_sequence_length,
        type_vocab_size,
        word_embedding_layer,
        embedding_block,
    )
    embedding_projection = _projection(
        embedding_width, hidden_size, initializer
    )
    embeddings = _embed(
        word_ids, type_ids, embedding_layers, dropout_rate, embedding_projection
    )
    pooler_layer = tf_keras.layers.Dense(
        units=hidden_size,
        activation='tanh',
        kernel_initializer=tf_utils.clone_initializer(initializer),
        name='pooler_transform',
    )
    outputs = _outputs(
        blocks, embeddings, mask, pooler_layer, return_attention_scores
    )
    super().__init__(
        inputs=[word_ids, mask, type_ids], outputs=outputs, **kwargs
    )

    self._track_layers(
        embedding_layers, embedding_projection, blocks, pooler_layer
    )
    # Plain attribute, not tracked as a dependency (like BertEncoder's).
    self._setattr_tracking = False
    self._config = dict(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        **_serialized_blocks(blocks),
        embedding_width=embedding_width,
        max_sequence_length=max_sequence_length,
        type_vocab_size=type_vocab_size,
        dropout_rate=dropout_rate,
        initializer_range=initializer_range,
        return_attention_scores=return_attention_scores,
    )
    self._setattr_tracking = True

  def _track_layers(self, embedding_layers, projection, blocks, pooler_layer):
    """Model Garden `BertEncoder`'s attribute names (checkpoint layout)."""
    (
        self._embedding_layer,
        self._position_embedding_layer,
        self._type_embedding_layer,
        self._embedding_norm_layer,
    ) = embedding_layers
    if projection is not None:
      self._embedding_projection = projection
    self._transformer_layers = list(blocks)
    self._pooler_layer = pooler_layer

  @property
  def embedding_layers(self) -> Tuple[tf_keras.layers.Layer, ...]:
    """The word, position and type embeddings and their LayerNorm."""
    return (
        self._embedding_layer,
        self._position_embedding_layer,
        self._type_embedding_layer,
        self._embedding_norm_layer,
    )

  @property
  def embedding_projection(self) -> Optional[tf_keras.layers.Layer]:
    """The E -> H projection of the embeddings; None when E = H."""
    return getattr(self, '_embedding_projection', None)

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
    """Rebuilds an equal architecture (owning all its layers, sharing none)."""
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
