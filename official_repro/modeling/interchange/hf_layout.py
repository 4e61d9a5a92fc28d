"""Which Hugging Face parameter each of our variables is, and its layout.

One table serves import and export, so the two are inverse by construction:
each `Parameter` pairs one of our variables with its Hugging Face
(`state_dict`) name and the layout conversions between them: dense kernels
`[in, out]` vs `[out, in]`; Model Garden's per-head attention kernels and
biases vs flat matrices; ConvBERT's depthwise `[k, H, 1]` vs `Conv1d`
`[H, 1, k]`, pointwise `[1, H, out]` vs `[out, H, 1]` (grouped feed-forward
kernels as they are); embeddings and LayerNorms as they are. `prefix` is the
base model's (`bert.`, `electra.`, `albert.`, `convbert.`, or '').
"""

import dataclasses
from typing import Callable, List

import numpy as np
import tensorflow as tf
import tf_keras


@dataclasses.dataclass(frozen=True)
class Parameter:
  """One variable of ours and its Hugging Face counterpart.

  `to_ours` / `to_theirs` convert the layout; an `optional` one (the pooler of
  a `*ForMaskedLM`) may be absent and keeps its initialization.
  """

  name: str
  variable: tf.Variable
  to_ours: Callable[[np.ndarray], np.ndarray]
  to_theirs: Callable[[np.ndarray], np.ndarray]
  optional: bool = False


def _same(array: np.ndarray) -> np.ndarray:
  return array


def transposed(array: np.ndarray) -> np.ndarray:
  """All axes reversed (a dense kernel `[in, out]` <-> `[out, in]`)."""
  return np.ascontiguousarray(array.T)


def depthwise_to_torch(array: np.ndarray) -> np.ndarray:
  """Keras depthwise `[k, in, 1]` -> PyTorch `Conv1d` `[in, 1, k]`."""
  return np.ascontiguousarray(np.transpose(array, (1, 2, 0)))


def _variable(layer: tf_keras.layers.Layer, suffix: str) -> tf.Variable:
  """The one weight of `layer` whose name ends with `/suffix`."""
  found = [
      w
      for w in layer.weights
      if w.name.split(':')[0] == suffix
      or w.name.split(':')[0].endswith('/' + suffix)
  ]
  if len(found) != 1:
    raise ValueError(
        f'{layer.name}: {len(found)} weights named */{suffix}; expected one '
        f'(has {[w.name for w in layer.weights]}).'
    )
  return found[0]


def _plain(name: str, variable: tf.Variable) -> Parameter:
  return Parameter(name, variable, _same, _same)


def _dense(
    name: str, layer, suffix: str, input_axes: int = 1
) -> List[Parameter]:
  """A kernel whose first `input_axes` axes are its input, and its bias.

  Hugging Face's weight is the `[out, in]` matrix of the kernel flattened to
  `[in, out]`: a dense kernel transposed, Model Garden's per-head attention
  kernels `[H, heads, size]` and `[heads, size, H]` reshaped too.
  """
  kernel = _variable(layer, f'{suffix}/kernel')
  bias = _variable(layer, f'{suffix}/bias')
  shape, bias_shape = tuple(kernel.shape), tuple(bias.shape)
  rows = int(np.prod(shape[:input_axes]))
  return [
      Parameter(
          f'{name}.weight',
          kernel,
          lambda w: w.T.reshape(shape),
          lambda k: np.ascontiguousarray(k.reshape(rows, -1).T),
      ),
      Parameter(
          f'{name}.bias',
          bias,
          lambda b: b.reshape(bias_shape),
          lambda b: b.reshape(-1),
      ),
  ]


def _layer_norm(name: str, layer, suffix: str) -> List[Parameter]:
  return [
      _plain(f'{name}.weight', _variable(layer, f'{suffix}/gamma')),
      _plain(f'{name}.bias', _variable(layer, f'{suffix}/beta')),
  ]


def _grouped(name: str, layer, suffix: str) -> List[Parameter]:
  """A grouped feed-forward kernel `[G, in/G, out/G]` (as is for G > 1)."""
  if _variable(layer, f'{suffix}/kernel').shape[0] == 1:
    return _dense(name, layer, suffix, input_axes=2)
  return [
      _plain(f'{name}.weight', _variable(layer, f'{suffix}/kernel')),
      _plain(f'{name}.bias', _variable(layer, f'{suffix}/bias')),
  ]


def _bert_block(name: str, block) -> List[Parameter]:
  """BERT and ELECTRA's `encoder.layer.<i>` (Model Garden's block)."""
  attention = f'{name}.attention'
  return [
      *_dense(f'{attention}.self.query', block, 'self_attention/query'),
      *_dense(f'{attention}.self.key', block, 'self_attention/key'),
      *_dense(f'{attention}.self.value', block, 'self_attention/value'),
      *_dense(
          f'{attention}.output.dense',
          block,
          'self_attention/attention_output',
          2,
      ),
      *_layer_norm(
          f'{attention}.output.LayerNorm', block, 'self_attention_layer_norm'
      ),
      *_dense(f'{name}.intermediate.dense', block, 'intermediate'),
      *_dense(f'{name}.output.dense', block, 'output'),
      *_layer_norm(f'{name}.output.LayerNorm', block, 'output_layer_norm'),
  ]


def _albert_block(name: str, block) -> List[Parameter]:
  """ALBERT's one shared layer."""
  return [
      *_dense(f'{name}.attention.query', block, 'self_attention/query'),
      *_dense(f'{name}.attention.key', block, 'self_attention/key'),
      *_dense(f'{name}.attention.value', block, 'self_attention/value'),
      *_dense(
          f'{name}.attention.dense', block, 'self_attention/attention_output', 2
      ),
      *_layer_norm(
          f'{name}.attention.LayerNorm', block, 'self_attention_layer_norm'
      ),
      *_dense(f'{name}.ffn', block, 'intermediate'),
      *_dense(f'{name}.ffn_output', block, 'output'),
      *_layer_norm(f'{name}.full_layer_layer_norm', block, 'output_layer_norm'),
  ]


def _convbert_block(name: str, block) -> List[Parameter]:
  """ConvBERT's `encoder.layer.<i>`: mixed attention, grouped feed-forward."""
  attention = f'{name}.attention.self'
  conv = f'{attention}.key_conv_attn_layer'
  return [
      *_dense(f'{attention}.query', block, 'mixed_attention/query'),
      *_dense(f'{attention}.key', block, 'mixed_attention/key'),
      *_dense(f'{attention}.value', block, 'mixed_attention/value'),
      Parameter(
          f'{conv}.depthwise.weight',
          _variable(block, 'span_key/depthwise_kernel'),
          lambda w: np.ascontiguousarray(np.transpose(w, (2, 0, 1))),
          depthwise_to_torch,
      ),
      Parameter(
          f'{conv}.pointwise.weight',
          _variable(block, 'span_key/pointwise_kernel'),
          transposed,
          transposed,
      ),
      Parameter(
          f'{conv}.bias',
          _variable(block, 'span_key/bias'),
          lambda b: b.reshape(-1),
          lambda b: b.reshape(-1, 1),
      ),
      *_dense(f'{attention}.conv_kernel_layer', block, 'kernel_generator'),
      *_dense(f'{attention}.conv_out_layer', block, 'conv_value'),
      *_dense(
          f'{name}.attention.output.dense',
          block,
          'mixed_attention/attention_output',
      ),
      *_layer_norm(
          f'{name}.attention.output.LayerNorm', block, 'attention_layer_norm'
      ),
      *_grouped(f'{name}.intermediate.dense', block, 'intermediate'),
      *_grouped(f'{name}.output.dense', block, 'output'),
      *_layer_norm(f'{name}.output.LayerNorm', block, 'output_layer_norm'),
  ]


def encoder_parameters(
    encoder: tf_keras.Model, model_type: str, prefix: str
) -> List[Parameter]:
  """Every variable of `encoder` that `model_type` has, with its name.

  The pooler is left out where Hugging Face has none (ELECTRA, ConvBERT) and
  optional where it has one.
  """
  embeddings = f'{prefix}embeddings'
  params = [
      _plain(
          f'{embeddings}.word_embeddings.weight', encoder.get_embedding_table()
      ),
      _plain(
          f'{embeddings}.position_embeddings.weight',
          _variable(encoder, 'position_embedding/embeddings'),
      ),
      _plain(
          f'{embeddings}.token_type_embeddings.weight',
          _variable(encoder, 'type_embeddings/embeddings'),
      ),
      *_layer_norm(f'{embeddings}.LayerNorm', encoder, 'embeddings/layer_norm'),
  ]
  projection = [
      w for w in encoder.weights if w.name.startswith('embedding_projection/')
  ]
  if projection:
    name = (
        f'{prefix}encoder.embedding_hidden_mapping_in'
        if model_type == 'albert'
        else f'{prefix}embeddings_project'
    )
    params += _dense(name, encoder, 'embedding_projection')
  blocks = encoder.transformer_layers
  if model_type == 'albert':
    params += _albert_block(
        f'{prefix}encoder.albert_layer_groups.0.albert_layers.0', blocks[0]
    )
  else:
    block_parameters = (
        _convbert_block if model_type == 'convbert' else _bert_block
    )
    for index, block in enumerate(blocks):
      params += block_parameters(f'{prefix}encoder.layer.{index}', block)
  pooler = dict(bert=f'{prefix}pooler.dense', albert=f'{prefix}pooler')
  if model_type in pooler:
    params += [
        dataclasses.replace(p, optional=True)
        for p in _dense(pooler[model_type], encoder, 'pooler_transform')
    ]
  return params


# The MLM head's names per model type: (transform dense, LayerNorm, output
# bias); the decoder weight is the tied word-embedding table.
MLM_HEAD_NAMES = dict(
    bert=(
        'cls.predictions.transform.dense',
        'cls.predictions.transform.LayerNorm',
        ('cls.predictions.bias',),
    ),
    albert=(
        'predictions.dense',
        'predictions.LayerNorm',
        ('predictions.bias', 'predictions.decoder.bias'),
    ),
    electra=(
        'generator_predictions.dense',
        'generator_predictions.LayerNorm',
        ('generator_lm_head.bias',),
    ),
    convbert=(
        'generator_predictions.dense',
        'generator_predictions.LayerNorm',
        ('generator_lm_head.bias',),
    ),
)


def mlm_head_parameters(head, model_type: str) -> List[Parameter]:
  """Model Garden's `MaskedLM` head: transform, LayerNorm, output bias.

  ALBERT's output bias has two names; the first is read.
  """
  dense, norm, biases = MLM_HEAD_NAMES[model_type]
  return [
      *_dense(dense, head, 'transform/dense'),
      *_layer_norm(norm, head, 'transform/LayerNorm'),
      *(_plain(name, _variable(head, 'output_bias/bias')) for name in biases),
  ]


def rtd_head_parameters(head) -> List[Parameter]:
  """ELECTRA's discriminator head (`discriminator_predictions`)."""
  return [
      *_dense('discriminator_predictions.dense', head, 'transform'),
      *_dense('discriminator_predictions.dense_prediction', head, 'logit'),
  ]


def classifier_parameters(classifier) -> List[Parameter]:
  """Model Garden's `BertClassifier` output layer, on the encoder's pooler."""
  return _dense('classifier', classifier, 'sentence_prediction/logits')
