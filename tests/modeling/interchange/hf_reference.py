"""Tiny random Hugging Face models, the references of the interchange tests.

`transformers` (a test-only dependency) builds each model's TF class. Its
weights are made as a released checkpoint holds them: random arrays in
PyTorch names and layouts, loaded into the TF model by Hugging Face's own
PyTorch-to-TF mapping (`load_pytorch_state_dict_in_tf2_model`), which is
the ground truth of which array is which. The same arrays are what a
`model.safetensors` holds (`write_folder`). Its TF loader cannot read
safetensors 0.8's `safe_open` objects, so references are always built from
the arrays, never from a folder.
"""

import json
import os
from typing import Dict, Tuple

import numpy as np
import safetensors.numpy
import tensorflow as tf

import transformers
from transformers import modeling_tf_pytorch_utils as pt_utils

from tests.data import tokenizer_texts

# Special tokens, the words of the test fixtures' sentences, then fillers:
# 50 tokens, so that fine-tuning a reference model reads real words.
_WORDS = sorted(
    set(
        'the quick brown fox jumps over a lazy dog while birds sing in old '
        'trees near river and children play games on green grass under '
        'bright summer skies .'.split()
    )
)
VOCAB = [
    '[PAD]',
    '[UNK]',
    '[CLS]',
    '[SEP]',
    '[MASK]',
    *_WORDS,
    *[f'w{i}' for i in range(45 - len(_WORDS))],
]

_SIZES = dict(
    vocab_size=len(VOCAB),
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=16,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)

# model type -> (config class, {our name of a class: TF class name}).
_CLASSES = dict(
    bert=('BertConfig', dict(model='TFBertModel', mlm='TFBertForMaskedLM')),
    electra=(
        'ElectraConfig',
        dict(
            model='TFElectraModel',
            rtd='TFElectraForPreTraining',
            mlm='TFElectraForMaskedLM',
        ),
    ),
    albert=(
        'AlbertConfig',
        dict(model='TFAlbertModel', mlm='TFAlbertForMaskedLM'),
    ),
    convbert=(
        'ConvBertConfig',
        dict(model='TFConvBertModel', mlm='TFConvBertForMaskedLM'),
    ),
)


def config(model_type: str, **overrides):
  """A tiny config of `model_type` (E = 16 where the type has one)."""
  settings = dict(_SIZES)
  if model_type != 'bert':
    settings['embedding_size'] = 16
  if model_type == 'convbert':
    settings.update(conv_kernel_size=3, head_ratio=2, num_groups=2)
  settings.update(overrides)
  return getattr(transformers, _CLASSES[model_type][0])(**settings)


def _pt_shape(name: str, tf_shape, transpose) -> Tuple[int, ...]:
  """The PyTorch shape of a TF weight (Hugging Face's transposes, inverted)."""
  if name.endswith('depthwise.weight'):  # Conv1d [in, 1, k] <- TF [k, in, 1]
    return (tf_shape[1], tf_shape[2], tf_shape[0])
  if name.endswith('key_conv_attn_layer.bias'):  # [out, 1] <- TF [out]
    return (tf_shape[0], 1)
  if transpose is pt_utils.TransposeType.CONV1D:
    return tuple(reversed(tf_shape))
  if transpose is pt_utils.TransposeType.SIMPLE:
    return tuple(reversed(tf_shape))
  return tuple(tf_shape)


def build(
    model_type: str, kind: str = 'model', seed: int = 0, **overrides
) -> Tuple[tf.keras.Model, Dict[str, np.ndarray]]:
  """A TF model with random weights and those weights in PyTorch form.

  Args:
    model_type: 'bert', 'electra', 'albert' or 'convbert'.
    kind: 'model' (the base model), 'mlm' (`*ForMaskedLM`) or 'rtd'
      (`ElectraForPreTraining`).
    seed: of the weights.
    **overrides: config settings.

  Returns:
    `(model, state)`: `state` maps PyTorch names to arrays, as the
    model's `model.safetensors` holds them.
  """
  hf_config = config(model_type, **overrides)
  class_name = _CLASSES[model_type][1][kind]
  hf_config.architectures = [class_name[len('TF') :]]  # as save_pretrained
  model = getattr(transformers, class_name)(hf_config)
  model(model.dummy_inputs, training=False)
  prefix = model.base_model_prefix + '.'
  rng = np.random.RandomState(seed)
  state = {}
  for weight in model.weights:
    name, transpose = pt_utils.convert_tf_weight_name_to_pt_weight_name(
        weight.name, start_prefix_to_remove='', tf_weight_shape=weight.shape
    )
    if kind == 'model' and name.startswith(prefix):
      name = name[len(prefix) :]
    if name in state:
      continue
    values = rng.normal(0.0, 0.2, _pt_shape(name, weight.shape, transpose))
    if name.endswith('LayerNorm.weight') or 'layer_norm.weight' in name:
      values += 1.0
    state[name] = values.astype(np.float32)
  if model_type == 'albert' and 'predictions.bias' in state:
    state['predictions.decoder.bias'] = state['predictions.bias']
  pt_utils.load_pytorch_state_dict_in_tf2_model(model, state)
  return model, state


def write_folder(
    path: str, hf_config, state: Dict[str, np.ndarray], lower_case=True
) -> str:
  """A Hugging Face folder: config, safetensors weights, vocab, casing."""
  os.makedirs(path, exist_ok=True)
  hf_config.to_json_file(os.path.join(path, 'config.json'))
  safetensors.numpy.save_file(state, os.path.join(path, 'model.safetensors'))
  with open(os.path.join(path, 'vocab.txt'), 'w') as f:
    f.write('\n'.join(VOCAB) + '\n')
  with open(os.path.join(path, 'tokenizer_config.json'), 'w') as f:
    json.dump(dict(do_lower_case=lower_case), f)
  return path


def inputs(seed: int = 1):
  """Word ids `[2, 10]` with padding in the second row, and mask and types."""
  rng = np.random.RandomState(seed)
  ids = rng.randint(5, len(VOCAB), (2, 10)).astype(np.int32)
  ids[:, 0] = 2
  mask = np.ones_like(ids)
  mask[1, 7:] = 0
  ids[1, 7:] = 0
  types = np.zeros_like(ids)
  types[:, 5:] = 1
  return ids, mask, types * mask


def assert_same_sequence_output(encoder, hf_model, ids, mask, types):
  """Our encoder's sequence output is the Hugging Face model's last layer.

  Compared on the real (unpadded) tokens, within 1e-5.

  Args:
    encoder: our encoder network (Keras), called on a dict of inputs.
    hf_model: a `transformers` TF model of the same weights.
    ids: int `[B, T]` token ids.
    mask: int `[B, T]`, 1 = real token.
    types: int `[B, T]` segment ids.
  """
  ours = encoder(
      dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)
  )['sequence_output'].numpy()
  theirs = hf_model(
      input_ids=ids,
      attention_mask=mask,
      token_type_ids=types,
      output_hidden_states=True,
  ).hidden_states[-1]
  real = mask.astype(bool)
  np.testing.assert_allclose(ours[real], theirs.numpy()[real], atol=1e-5)


def sentencepiece_model(vocab_size: int = 60) -> bytes:
  """A unigram model with ALBERT's special pieces, of the fixtures' words."""
  return tokenizer_texts.train_sentencepiece(
      [' '.join(_WORDS)] * 20 + _WORDS, vocab_size
  )


def write_sentencepiece_folder(
    path: str, hf_config, state: Dict[str, np.ndarray], model: bytes
) -> str:
  """An ALBERT release's folder, its tokenizer saved by Hugging Face.

  `spiece.model` and what `AlbertTokenizerFast.save_pretrained` writes
  beside it (`tokenizer.json`, `tokenizer_config.json`, uncased).
  """
  os.makedirs(path, exist_ok=True)
  hf_config.to_json_file(os.path.join(path, 'config.json'))
  safetensors.numpy.save_file(state, os.path.join(path, 'model.safetensors'))
  model_file = os.path.join(path, 'spiece.model')
  with open(model_file, 'wb') as f:
    f.write(model)
  transformers.AlbertTokenizerFast(vocab_file=model_file).save_pretrained(path)
  return path
