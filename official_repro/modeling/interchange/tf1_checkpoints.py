"""The original TF1 checkpoints of ELECTRA and ConvBERT, read by variable name.

google-research/electra and yitu-opensource/ConvBert save both networks in
one TF1 checkpoint (`electra/...` the discriminator and shared embeddings,
`generator/...`, `discriminator_predictions/...` the RTD head,
`generator_predictions/...` the MLM head); the names map onto Hugging
Face's as its own converters map them (`load_tf_weights_in_electra`,
`load_tf_weights_in_convbert`), kernels transposed except the grouped ones,
optimizer slots skipped. With no config in them, the architecture is read
off the shapes with the reference's head size of 64 (`config_overrides`,
a `config.json` beside them, replaces what cannot be); the activation is the
reference's exact GELU; a `vocab.txt` without upper-case letters outside
its special tokens is taken as uncased.
"""

import os
import re
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import tensorflow as tf

from official_repro.common import cli
from official_repro.common import json_files
from official_repro.modeling.interchange import hf_folder
from official_repro.modeling.interchange import hf_layout

KINDS = ('electra_tf1', 'convbert_tf1')
NETWORKS = ('discriminator', 'generator')
# The head size of every released ELECTRA and ConvBERT model.
HEAD_SIZE = 64
# The Hugging Face class of each checkpoint network.
_CLASSES = dict(
    electra_tf1=dict(
        discriminator='ElectraForPreTraining', generator='ElectraForMaskedLM'
    ),
    convbert_tf1=dict(
        discriminator='ConvBertModel', generator='ConvBertForMaskedLM'
    ),
)
_SKIPPED = re.compile(r'(^|/)(global_step|adam_m|adam_v|temperature)($|/)')


def checkpoint_prefix(path: str) -> Optional[str]:
  """The TF1 checkpoint `path` names (a prefix or a directory), or None."""
  if tf.io.gfile.isdir(path):
    return tf.train.latest_checkpoint(path) or next(
        (
            p[: -len('.index')]
            for p in sorted(tf.io.gfile.glob(os.path.join(path, '*.index')))
        ),
        None,
    )
  return path if tf.io.gfile.exists(path + '.index') else None


def detect(path: str) -> Optional[str]:
  """'electra_tf1', 'convbert_tf1' or None, by the checkpoint's variables."""
  prefix = checkpoint_prefix(path)
  if prefix is None:
    return None
  try:
    names = set(tf.train.load_checkpoint(prefix).get_variable_to_shape_map())
  except (tf.errors.OpError, ValueError):
    return None
  if 'electra/embeddings/word_embeddings' not in names:
    return None
  if any('/conv_attn_key/' in name for name in names):
    return 'convbert_tf1'
  return 'electra_tf1'


def _hf_name(name: str, network: str) -> Optional[str]:
  """The Hugging Face name of a TF1 variable of `network`, or None (skip)."""
  if _SKIPPED.search(name):
    return None
  if name.startswith('generator_predictions/'):
    if network != 'generator':
      return None
    name = name.replace(
        'generator_predictions/output_bias', 'generator_lm_head/bias'
    )
  elif name.startswith('discriminator_predictions/'):
    if network != 'discriminator':
      return None
    name = name.replace('/dense_1/', '/dense_prediction/')
  elif name.startswith('generator/'):
    if network != 'generator':
      return None
    name = 'electra/' + name[len('generator/') :]
  elif name.startswith('electra/'):
    if network == 'generator' and not name.startswith('electra/embeddings/'):
      return None
  else:
    return None
  name = re.sub(r'/layer_(\d+)/', r'/layer/\1/', name)
  name = name.replace('/conv_attn_key/', '/key_conv_attn_layer/')
  name = name.replace('/conv_attn_kernel/', '/conv_kernel_layer/')
  name = name.replace('/conv_attn_point/', '/conv_out_layer/')
  name = name.replace('/g_dense/', '/dense/')
  name = re.sub(r'/(depthwise|pointwise)_kernel$', r'/\1/weight', name)
  name = re.sub(r'/(kernel|gamma)$', '/weight', name)
  name = re.sub(r'/beta$', '/bias', name)
  name = re.sub(r'_embeddings$', '_embeddings/weight', name)
  return name.replace('/', '.')


def _pt_layout(tf1_name: str, array: np.ndarray) -> np.ndarray:
  if tf1_name.endswith('/depthwise_kernel'):
    return hf_layout.depthwise_to_torch(array)
  if tf1_name.endswith('/pointwise_kernel') or (
      tf1_name.endswith('/kernel') and '/g_dense/' not in tf1_name
  ):
    return hf_layout.transposed(array)
  return array


def read_state(
    prefix: str, network: str
) -> Tuple[Dict[str, np.ndarray], Dict[str, List[int]]]:
  """`(Hugging Face name -> PyTorch-layout array, TF1 shapes by name)`."""
  reader = tf.train.load_checkpoint(prefix)
  shapes = reader.get_variable_to_shape_map()
  state = {}
  for name in sorted(shapes):
    hf_name = _hf_name(name, network)
    if hf_name is not None:
      state[hf_name] = _pt_layout(name, reader.get_tensor(name))
  return state, shapes


def _architecture(
    kind: str,
    network: str,
    state: Dict[str, np.ndarray],
    overrides: Dict[str, Any],
) -> Dict[str, Any]:
  """A Hugging Face config of the network, read off its weights' shapes."""
  word = state['electra.embeddings.word_embeddings.weight']
  query = state['electra.encoder.layer.0.attention.self.query.weight']
  intermediate = state['electra.encoder.layer.0.intermediate.dense.weight']
  hidden = query.shape[1]
  layers = 1 + max(
      int(m.group(1))
      for m in (re.match(r'electra\.encoder\.layer\.(\d+)\.', n) for n in state)
      if m
  )
  grouped = intermediate.ndim == 3  # ConvBERT's [G, in/G, out/G]
  config = dict(
      model_type='convbert' if kind == 'convbert_tf1' else 'electra',
      architectures=[_CLASSES[kind][network]],
      intermediate_size=(
          intermediate.shape[0] * intermediate.shape[2]
          if grouped
          else intermediate.shape[0]
      ),
      vocab_size=word.shape[0],
      embedding_size=word.shape[1],
      hidden_size=hidden,
      num_hidden_layers=layers,
      num_attention_heads=max(1, hidden // HEAD_SIZE),
      max_position_embeddings=state[
          'electra.embeddings.position_embeddings.weight'
      ].shape[0],
      type_vocab_size=state[
          'electra.embeddings.token_type_embeddings.weight'
      ].shape[0],
      hidden_act='gelu',
  )
  if kind == 'convbert_tf1':
    config.update(
        num_groups=intermediate.shape[0] if grouped else 1,
        conv_kernel_size=state[
            'electra.encoder.layer.0.attention.self.key_conv_attn_layer'
            '.depthwise.weight'
        ].shape[2],
        head_ratio=max(1, hidden // query.shape[0]),
    )
  config.update(overrides)
  return config


def _lower_case_of_vocab(tokens: List[str]) -> bool:
  return not any(
      re.search(r'[A-Z]', token)
      for token in tokens
      if not (token.startswith('[') and token.endswith(']'))
  )


def checked_prefix(path: str, network: str, what: str = 'checkpoint') -> str:
  """The checkpoint prefix at `path`; UserError for a bad `network` or none."""
  if network not in NETWORKS:
    raise cli.UserError(
        f'--network must be one of {NETWORKS}, not {network!r}.'
    )
  prefix = checkpoint_prefix(path)
  if prefix is None:
    raise cli.UserError(f'--input {path}: no {what} (*.index).')
  return prefix


def _checked_prefix(path: str, kind: str, network: str) -> str:
  """The checkpoint prefix at `path`, or UserError unless it is a `kind`."""
  prefix = checked_prefix(path, network, 'TF1 checkpoint')
  found = detect(prefix)
  if found is None:
    raise cli.UserError(
        f'--input {path}: no electra/embeddings/word_embeddings variable; '
        'not an ELECTRA or ConvBERT TF1 checkpoint.'
    )
  if found != kind:
    raise cli.UserError(
        f'--input {path}: a {found} checkpoint, not {kind}; pass '
        f'--from={found}.'
    )
  return prefix


def read(
    path: str,
    kind: str,
    network: str = 'discriminator',
    config_file: Optional[str] = None,
) -> hf_folder.HfFolder:
  """A TF1 checkpoint (`path`: prefix or directory) as a Hugging Face folder.

  `kind` 'electra_tf1' or 'convbert_tf1'; `network` 'discriminator' (RTD
  head) or 'generator' (MLM head); `config_file` replaces what the shapes say
  (default: `config.json` beside the checkpoint).
  """
  prefix = _checked_prefix(path, kind, network)
  state, shapes = read_state(prefix, network)
  if network == 'generator' and not any(
      name.startswith('generator/encoder/') for name in shapes
  ):
    raise cli.UserError(
        f'--input {path}: no generator/encoder variables; this checkpoint '
        'holds no separate generator network.'
    )
  directory = (
      path if tf.io.gfile.isdir(path) else os.path.dirname(prefix) or '.'
  )
  config_file = config_file or os.path.join(
      directory, hf_folder.CONFIG_FILENAME
  )
  overrides = json_files.read_json(config_file, default={})
  tokens, _ = hf_folder.read_tokenizer(directory)
  config = _architecture(kind, network, state, overrides)
  if kind == 'convbert_tf1':  # ConvBERT's base model is `convbert.`
    state = {
        re.sub(r'^electra\.', 'convbert.', name): array
        for name, array in state.items()
    }
  return hf_folder.HfFolder(
      path=path,
      config=config,
      state=state,
      weights_file=prefix,
      vocab_tokens=tokens,
      lower_case=_lower_case_of_vocab(tokens),
      mlm_activation='gelu_erf',
  )
