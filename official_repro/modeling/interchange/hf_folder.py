"""Hugging Face model folders: weights, config and tokenizer, read and written.

Weights come from `model.safetensors` (sharded or not; PyTorch names and
layouts) or `tf_model.h5` (Keras names, turned into PyTorch's by Hugging
Face's rules), read with numpy-level `safetensors` and `h5py`, never
PyTorch, every file through `tf.io.gfile`. Our tokenizers are the original
BERT WordPiece and ALBERT SentencePiece ones, so tokenizer files that set
anything they do not reproduce are refused, naming the file and setting
(`check_tokenizer_json`, `check_tokenizer_config`,
`check_sentencepiece_config`).
"""

import dataclasses
import io
import json
import os
import re
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np
import safetensors.numpy
import tensorflow as tf

from official_repro.common import cli
from official_repro.common import json_files
from official_repro.data import sentencepiece_tokenization
from official_repro.data import tokenization
from official_repro.data import vocab
from official_repro.modeling.interchange import hf_layout

CONFIG_FILENAME = 'config.json'
SAFETENSORS_FILENAME = 'model.safetensors'
SAFETENSORS_INDEX_FILENAME = 'model.safetensors.index.json'
H5_FILENAME = 'tf_model.h5'
VOCAB_FILENAME = vocab.WORDPIECE_FILENAME
SENTENCEPIECE_FILENAME = vocab.SENTENCEPIECE_FILENAME
# Hugging Face's tokenizer classes that read `spiece.model` as ALBERT does.
_SENTENCEPIECE_CLASSES = ('AlbertTokenizer', 'AlbertTokenizerFast')
TOKENIZER_FILENAME = 'tokenizer.json'
TOKENIZER_CONFIG_FILENAME = 'tokenizer_config.json'

# Keys of a `tokenizers` file; the export layout's `tokenizer.json` of an
# encoder-only export (read by `--from=teams`) has none of them.
_HF_TOKENIZER_KEYS = frozenset(('model', 'normalizer', 'pre_tokenizer'))

# Buffers Hugging Face saves that are not weights.
_BUFFERS = re.compile(r'(^|\.)(position_ids|token_type_ids)$')


@dataclasses.dataclass
class HfFolder:
  """A Hugging Face model folder, read.

  Attributes:
    state: PyTorch name -> numpy array, in PyTorch layout.
    vocab_tokens: the WordPiece or SentencePiece vocabulary.
    lower_case: the tokenizer's casing, or None if no file says.
    mlm_activation: our name of the MLM head's activation where it is not
      the Hugging Face class's (reference-code checkpoints); None: the class's.
  """

  path: str
  config: Dict[str, Any]
  state: Dict[str, np.ndarray]
  weights_file: str
  vocab_tokens: vocab.Vocabulary
  lower_case: Optional[bool]
  mlm_activation: Optional[str] = None


def is_hf_folder(path: str) -> bool:
  """Whether `path` is a folder with `config.json` and Hugging Face weights."""
  if not tf.io.gfile.isdir(path):
    return False
  files = set(tf.io.gfile.listdir(path))
  return CONFIG_FILENAME in files and bool(
      files & {SAFETENSORS_FILENAME, SAFETENSORS_INDEX_FILENAME, H5_FILENAME}
  )


def _read_bytes(path: str) -> bytes:
  with tf.io.gfile.GFile(path, 'rb') as f:
    return f.read()


def _normalized(name: str) -> str:
  """Old checkpoints' LayerNorm `gamma`/`beta` under today's names."""
  return re.sub(
      r'LayerNorm\.gamma$',
      'LayerNorm.weight',
      re.sub(r'LayerNorm\.beta$', 'LayerNorm.bias', name),
  )


def _read_safetensors(path: str) -> Dict[str, np.ndarray]:
  try:
    return safetensors.numpy.load(_read_bytes(path))
  except Exception as error:  # pylint: disable=broad-except
    raise cli.UserError(f'{path}: not a safetensors file ({error}).') from error


def h5_name_to_pt(
    name: str, shape: Tuple[int, ...]
) -> Tuple[str, Callable[[np.ndarray], np.ndarray]]:
  """A Keras weight name of a Hugging Face TF model, as its PyTorch name.

  Hugging Face's rules (`modeling_tf_pytorch_utils`); returns the name and the
  Keras -> PyTorch layout function (2-D kernels transposed, grouped and
  pointwise kernels reversed, depthwise `[k, in, 1]` -> `[in, 1, k]`).
  """
  name = name.replace(':0', '')
  name = re.sub(r'/[^/]*___([^/]*)/', r'/\1/', name)
  name = name.replace('_._', '/')
  parts = [part for part in name.split('/') if part]
  if len(parts) > 1:
    parts = parts[1:]
  last = parts[-1]
  layout = np.asarray
  if last == 'depthwise_kernel':
    layout = hf_layout.depthwise_to_torch
  elif last == 'pointwise_kernel' or (last == 'kernel' and len(shape) >= 2):
    layout = hf_layout.transposed
  if last in ('kernel', 'embeddings', 'gamma'):
    parts[-1] = 'weight'
  elif last == 'beta':
    parts[-1] = 'bias'
  elif last in ('pointwise_kernel', 'depthwise_kernel'):
    parts[-1] = last.replace('_kernel', '.weight')
  return '.'.join(parts), layout


def _read_h5(path: str) -> Dict[str, np.ndarray]:
  """Weights of a Keras h5 file, by each layer group's `weight_names`."""
  import h5py  # pylint: disable=g-import-not-at-top

  state = {}
  try:
    with h5py.File(io.BytesIO(_read_bytes(path)), 'r') as f:
      for group in f.values():
        for weight_name in group.attrs.get('weight_names', []):
          weight_name = (
              weight_name.decode('utf8')
              if isinstance(weight_name, bytes)
              else str(weight_name)
          )
          array = np.asarray(group[weight_name])
          pt_name, layout = h5_name_to_pt(weight_name, array.shape)
          state[pt_name] = layout(array)
  except OSError as error:
    raise cli.UserError(f'{path}: not an HDF5 file ({error}).') from error
  if not state:
    raise cli.UserError(f'{path}: no Keras weights (weight_names) in it.')
  return state


def read_weights(path: str) -> Tuple[Dict[str, np.ndarray], str]:
  """The folder's weights by PyTorch name, and the file they came from."""
  index = os.path.join(path, SAFETENSORS_INDEX_FILENAME)
  single = os.path.join(path, SAFETENSORS_FILENAME)
  if tf.io.gfile.exists(single):
    state, source = _read_safetensors(single), single
  elif tf.io.gfile.exists(index):
    shards = sorted(set(json_files.read_json(index)['weight_map'].values()))
    state = {}
    for shard in shards:
      state.update(_read_safetensors(os.path.join(path, shard)))
    source = index
  else:
    source = os.path.join(path, H5_FILENAME)
    state = _read_h5(source)
  return (
      {
          _normalized(name): array
          for name, array in state.items()
          if not _BUFFERS.search(name)
      },
      source,
  )


def _vocab_from_tokenizer_json(tokenizer: Dict[str, Any], where: str):
  vocab = (tokenizer.get('model') or {}).get('vocab')
  if not isinstance(vocab, dict) or not vocab:
    raise cli.UserError(
        f'{where}: no WordPiece vocabulary (model.vocab); give the folder a '
        f'{VOCAB_FILENAME}.'
    )
  tokens = sorted(vocab, key=vocab.get)
  if [vocab[t] for t in tokens] != list(range(len(tokens))):
    raise cli.UserError(f'{where}: model.vocab ids are not 0..{len(tokens)-1}.')
  return tokens


def _not_bert(where: str, setting: str, value: Any, ours: str) -> cli.UserError:
  """The one-line refusal of a tokenizer setting ours does not reproduce."""
  return cli.UserError(
      f"{where}: {setting}={json.dumps(value)} ({ours}); this repository's "
      'tokenizers are the original BERT and ALBERT ones, so the folder '
      'cannot be used as is.'
  )


def check_tokenizer_json(tokenizer: Dict[str, Any], where: str) -> None:
  """Refuses a `tokenizer.json` that does not tokenize as BERT's original.

  Ours is `BertNormalizer` (accents stripped exactly when lower-casing),
  `BertPreTokenizer` and WordPiece (`[UNK]`, `##`, 100 characters); other
  normalizers or pre-tokenizers, `Sequence`s included, are refused. A model
  without `type` (older files) is WordPiece when it has
  `max_input_chars_per_word` and no `merges`.
  """
  normalizer = tokenizer.get('normalizer')
  normalizer = normalizer if isinstance(normalizer, dict) else {}
  if normalizer.get('type') != 'BertNormalizer':
    raise _not_bert(
        where, 'normalizer.type', normalizer.get('type'), 'ours: BertNormalizer'
    )
  for setting, ours in (
      ('clean_text', 'ours deletes control characters'),
      ('handle_chinese_chars', 'ours splits CJK characters'),
  ):
    if normalizer.get(setting, True) is not True:
      raise _not_bert(where, f'normalizer.{setting}', normalizer[setting], ours)
  lowercase = normalizer.get('lowercase', True)
  strip_accents = normalizer.get('strip_accents')
  if strip_accents is not None and strip_accents != lowercase:
    raise _not_bert(
        where,
        'normalizer.strip_accents',
        strip_accents,
        f'with lowercase={json.dumps(lowercase)}; ours strips accents '
        'exactly when it lower-cases',
    )
  pre_tokenizer = tokenizer.get('pre_tokenizer')
  pre_tokenizer = pre_tokenizer if isinstance(pre_tokenizer, dict) else {}
  if pre_tokenizer.get('type') != 'BertPreTokenizer':
    raise _not_bert(
        where,
        'pre_tokenizer.type',
        pre_tokenizer.get('type'),
        'ours: BertPreTokenizer',
    )
  model = tokenizer.get('model')
  model = model if isinstance(model, dict) else {}
  kind = model.get('type')
  if (
      kind is None
      and 'max_input_chars_per_word' in model
      and 'merges' not in model
  ):
    kind = 'WordPiece'
  if kind != 'WordPiece':
    raise _not_bert(where, 'model.type', kind, 'ours: WordPiece')
  for setting, value in (
      ('unk_token', tokenization.UNKNOWN_TOKEN),
      ('continuing_subword_prefix', tokenization.SUFFIX_INDICATOR),
      ('max_input_chars_per_word', tokenization.MAX_INPUT_CHARS_PER_WORD),
  ):
    if model.get(setting, value) != value:
      raise _not_bert(
          where,
          f'model.{setting}',
          model[setting],
          f'ours: {json.dumps(value)}',
      )


def check_tokenizer_config(
    config: Dict[str, Any], where: str, lower_case: Optional[bool]
) -> None:
  """Refuses a `tokenizer_config.json` of settings BERT's original lacks.

  `do_basic_tokenize` and `tokenize_chinese_chars` true or absent, and
  `strip_accents` null or equal to the casing (`lower_case`, default true).
  """
  for setting, ours in (
      ('do_basic_tokenize', 'ours always splits text before WordPiece'),
      ('tokenize_chinese_chars', 'ours splits CJK characters'),
  ):
    if config.get(setting, True) is not True:
      raise _not_bert(where, setting, config[setting], ours)
  casing = True if lower_case is None else lower_case
  strip_accents = config.get('strip_accents')
  if strip_accents is not None and strip_accents != casing:
    raise _not_bert(
        where,
        'strip_accents',
        strip_accents,
        f'with do_lower_case={json.dumps(casing)}; ours strips accents '
        'exactly when it lower-cases',
    )


def check_sentencepiece_config(config: Dict[str, Any], where: str) -> None:
  """Refuses a `tokenizer_config.json` ALBERT's original tokenizer is not.

  An ALBERT class if named, `keep_accents` false, `remove_space` true.
  """
  name = config.get('tokenizer_class')
  if name is not None and name not in _SENTENCEPIECE_CLASSES:
    raise _not_bert(
        where,
        'tokenizer_class',
        name,
        f"ours reads {SENTENCEPIECE_FILENAME} as ALBERT's tokenizer does",
    )
  for setting, value, ours in (
      ('keep_accents', False, "ours strips accents as ALBERT's does"),
      ('remove_space', True, "ours collapses spaces as ALBERT's does"),
  ):
    if config.get(setting, value) != value:
      raise _not_bert(where, setting, config[setting], ours)


def _read_sentencepiece_tokenizer(
    path: str,
) -> Tuple[vocab.Vocabulary, Optional[bool]]:
  """`read_tokenizer` of a folder with `spiece.model`."""
  model_path = os.path.join(path, SENTENCEPIECE_FILENAME)
  tokens = vocab.load_vocab(model_path)
  tokenizer_path = os.path.join(path, TOKENIZER_FILENAME)
  tokenizer = json_files.read_json(tokenizer_path, default={})
  pieces = [
      entry[0] for entry in (tokenizer.get('model') or {}).get('vocab', [])
  ]
  if pieces and pieces != list(tokens):
    raise cli.UserError(
        f'{tokenizer_path}: its {len(pieces)} pieces are not those of '
        f'{model_path} ({len(tokens)}); the folder mixes two tokenizers.'
    )
  # AlbertTokenizer's default is uncased.
  return tokens, _sentencepiece_casing(path, True)


def _read_unigram_tokenizer(
    path: str, tokenizer: Dict[str, Any]
) -> Tuple[vocab.Vocabulary, Optional[bool]]:
  """`read_tokenizer` of a folder with a Unigram `tokenizer.json` alone.

  The SentencePiece model is rebuilt from it; its normaliser must strip
  accents as ALBERT's does, and lower-cases with a Lowercase step.
  """
  where = os.path.join(path, TOKENIZER_FILENAME)
  steps = {
      step.get('type')
      for step in sentencepiece_tokenization.normalizer_steps(
          tokenizer.get('normalizer')
      )
  }
  if not {'NFKD', 'StripAccents'} <= steps:
    raise _not_bert(
        where,
        'normalizer',
        sorted(steps - {None}),
        "ours strips accents as ALBERT's does: NFKD, StripAccents",
    )
  try:
    model = sentencepiece_tokenization.model_from_tokenizer_json(tokenizer)
    pieces, aliases = sentencepiece_tokenization.read_model(model)
  except ValueError as e:
    raise cli.UserError(f'{where}: {e}.') from None
  tokens = vocab.Vocabulary(pieces, model, aliases)
  missing = [t for t in vocab.SPECIAL_TOKENS if t not in tokens.token_to_id]
  if missing:
    raise cli.UserError(f'{where}: no pieces {missing} among its vocab.')
  return tokens, _sentencepiece_casing(path, 'Lowercase' in steps)


def _sentencepiece_casing(path: str, default: bool) -> bool:
  """`do_lower_case` of a checked SentencePiece `tokenizer_config.json`."""
  config_path = os.path.join(path, TOKENIZER_CONFIG_FILENAME)
  config = json_files.read_json(config_path, default={})
  check_sentencepiece_config(config, config_path)
  return config.get('do_lower_case', default)


def read_tokenizer(path: str) -> Tuple[vocab.Vocabulary, Optional[bool]]:
  """(vocabulary, lower_case or None) of a folder's tokenizer files."""
  if tf.io.gfile.exists(os.path.join(path, SENTENCEPIECE_FILENAME)):
    return _read_sentencepiece_tokenizer(path)
  vocab_path = os.path.join(path, VOCAB_FILENAME)
  tokenizer_path = os.path.join(path, TOKENIZER_FILENAME)
  tokenizer = json_files.read_json(tokenizer_path, default={})
  model_type = (tokenizer.get('model') or {}).get('type')
  if model_type == 'Unigram' and not tf.io.gfile.exists(vocab_path):
    return _read_unigram_tokenizer(path, tokenizer)
  if model_type == 'BPE':
    raise cli.UserError(
        f'{tokenizer_path}: a BPE model without the '
        f'{SENTENCEPIECE_FILENAME} it was converted from: BPE merges do not '
        'give back a SentencePiece model, and byte-level BPE (GPT-2, RoBERTa) '
        'is neither tokenizer of ours.'
    )
  if _HF_TOKENIZER_KEYS & set(tokenizer):
    check_tokenizer_json(tokenizer, tokenizer_path)
  if tf.io.gfile.exists(vocab_path):
    with tf.io.gfile.GFile(vocab_path) as f:
      tokens = [line.rstrip('\n') for line in f]
    while tokens and not tokens[-1]:
      tokens.pop()
  elif tokenizer:
    tokens = _vocab_from_tokenizer_json(tokenizer, tokenizer_path)
  else:
    raise cli.UserError(
        f'{path}: neither {VOCAB_FILENAME} nor {TOKENIZER_FILENAME}; the '
        'model needs its vocabulary.'
    )
  config_path = os.path.join(path, TOKENIZER_CONFIG_FILENAME)
  config = json_files.read_json(config_path, default={})
  lower_case = config.get('do_lower_case')
  if lower_case is None and 'lowercase' in tokenizer.get('normalizer', {}):
    lower_case = bool(tokenizer['normalizer']['lowercase'])
  if config:
    check_tokenizer_config(config, config_path, lower_case)
  return vocab.Vocabulary(tokens), lower_case


def read_folder(path: str) -> HfFolder:
  """Reads a Hugging Face model folder (UserError naming a bad file)."""
  if not is_hf_folder(path):
    raise cli.UserError(
        f'{path}: not a Hugging Face model folder ({CONFIG_FILENAME} and '
        f'{SAFETENSORS_FILENAME} or {H5_FILENAME}).'
    )
  config = json_files.read_json(os.path.join(path, CONFIG_FILENAME))
  state, source = read_weights(path)
  tokens, lower_case = read_tokenizer(path)
  return HfFolder(path, config, state, source, tokens, lower_case)


def write_folder(
    path: str,
    config: Dict[str, Any],
    state: Dict[str, np.ndarray],
    vocab_tokens: Sequence[str],
    lower_case: bool,
) -> None:
  """Writes `config.json`, `model.safetensors` and the tokenizer files.

  Each through a temporary name (`json_files`): no partial file on failure.
  """
  tf.io.gfile.makedirs(path)
  weights = safetensors.numpy.save(
      {name: np.ascontiguousarray(array) for name, array in state.items()},
      metadata=dict(format='pt'),
  )
  json_files.write_bytes(os.path.join(path, SAFETENSORS_FILENAME), weights)
  json_files.write_json(os.path.join(path, CONFIG_FILENAME), config)
  vocabulary = vocab.as_vocabulary(vocab_tokens)
  vocabulary.write(os.path.join(path, vocabulary.filename))
  settings = dict(
      tokenizer_class='BertTokenizer',
      do_lower_case=bool(lower_case),
      model_max_length=config.get('max_position_embeddings', 512),
  )
  if vocabulary.kind == vocab.SENTENCEPIECE:
    # AlbertTokenizer's own defaults, but the pad and unknown pieces.
    settings.update(
        tokenizer_class='AlbertTokenizer',
        keep_accents=False,
        remove_space=True,
        pad_token=vocabulary[vocabulary.token_to_id[vocab.PAD_TOKEN]],
        unk_token=vocabulary[vocabulary.token_to_id[vocab.UNK_TOKEN]],
    )
  json_files.write_json(os.path.join(path, TOKENIZER_CONFIG_FILENAME), settings)
