"""Hugging Face `config.json` for BERT, ALBERT, ELECTRA and ConvBERT models.

An imported model's architecture comes from its `config.json`, never from a
command's settings. `encoder_config` and `hf_config` are inverse on every
setting both sides have; what our encoders cannot be is refused by name.
Hugging Face's `"gelu"` is the exact GELU and `"gelu_new"` (and kin) the
tanh one; ours are `'gelu_erf'` and `'gelu_tanh'`.
"""

import dataclasses
from typing import Any, Dict, Optional

from official_repro.common import cli
from official_repro.modeling.networks import encoders

MODEL_TYPES = ('bert', 'albert', 'electra', 'convbert')

# The backbone each model type's encoder is built with.
BACKBONES = dict(
    bert='bert', electra='bert', albert='albert', convbert='convbert'
)

ACTIVATIONS_FROM_HF = {
    'gelu': 'gelu_erf',
    'gelu_new': 'gelu_tanh',
    'gelu_fast': 'gelu_tanh',
    'gelu_pytorch_tanh': 'gelu_tanh',
    'relu': 'relu',
    'tanh': 'tanh',
}
ACTIVATIONS_TO_HF = {
    'gelu_erf': 'gelu',
    'gelu_tanh': 'gelu_new',
    'relu': 'relu',
    'tanh': 'tanh',
}

# The LayerNorm epsilon of Model Garden's transformer layers and heads.
LAYER_NORM_EPSILON = 1e-12

# (our `EncoderConfig` field, its `config.json` key, Hugging Face's default;
# None: required).
_FIELDS = (
    ('hidden_size', 'hidden_size', None),
    ('num_layers', 'num_hidden_layers', None),
    ('num_attention_heads', 'num_attention_heads', None),
    ('intermediate_size', 'intermediate_size', None),
    ('vocab_size', 'vocab_size', None),
    ('max_position_embeddings', 'max_position_embeddings', 512),
    ('type_vocab_size', 'type_vocab_size', 2),
    ('dropout_rate', 'hidden_dropout_prob', 0.1),
    ('attention_dropout_rate', 'attention_probs_dropout_prob', 0.1),
    ('initializer_range', 'initializer_range', 0.02),
)
# The same for ConvBERT's options.
_CONVBERT_OPTIONS = (
    ('head_ratio', 'head_ratio', 2),
    ('kernel_size', 'conv_kernel_size', 9),
    ('num_groups', 'num_groups', 1),
)


def _read_fields(config: Dict[str, Any], fields) -> Dict[str, Any]:
  """Our names -> the `config.json` values (or defaults) of `fields`."""
  return {
      ours: config[theirs] if default is None else config.get(theirs, default)
      for ours, theirs, default in fields
  }


@dataclasses.dataclass(frozen=True)
class HfArchitecture:
  """What a `config.json` describes.

  Attributes:
    architectures: the saved classes (e.g. `["ElectraForPreTraining"]`).
    encoder: the encoder, as our config.
    num_labels: the classifier's outputs, if the config names labels.
    id2label: the classifier's label names by output index.
  """

  model_type: str
  architectures: tuple
  encoder: encoders.EncoderConfig
  num_labels: Optional[int] = None
  id2label: Optional[Dict[int, str]] = None


def _activation(name: str, where: str) -> str:
  if name not in ACTIVATIONS_FROM_HF:
    raise cli.UserError(
        f'{where}: hidden_act {name!r} has no counterpart here; supported: '
        f'{sorted(ACTIVATIONS_FROM_HF)}.'
    )
  return ACTIVATIONS_FROM_HF[name]


def _checked_model_type(config: Dict[str, Any], where: str) -> str:
  """The model type, or UserError naming a setting our encoders lack."""
  model_type = config.get('model_type')
  if model_type not in MODEL_TYPES:
    raise cli.UserError(
        f'{where}: model_type {model_type!r} is not one of {MODEL_TYPES}; '
        'convert a BERT, ALBERT, ELECTRA or ConvBERT model.'
    )
  position = config.get('position_embedding_type', 'absolute')
  if position != 'absolute':
    raise cli.UserError(
        f'{where}: position_embedding_type {position!r}; only learned '
        'absolute position embeddings are supported.'
    )
  epsilon = config.get('layer_norm_eps', LAYER_NORM_EPSILON)
  if abs(epsilon - LAYER_NORM_EPSILON) > 1e-20:
    raise cli.UserError(
        f'{where}: layer_norm_eps {epsilon}; our layers (Model Garden '
        f"'s) use {LAYER_NORM_EPSILON}, so the outputs would differ."
    )
  if model_type == 'albert':
    for field in ('num_hidden_groups', 'inner_group_num'):
      if config.get(field, 1) != 1:
        raise cli.UserError(
            f'{where}: {field} = {config[field]}; our ALBERT shares one '
            'block across all layers (1 group of 1 layer).'
        )
  return model_type


def encoder_config(config: Dict[str, Any], where: str) -> HfArchitecture:
  """Our `EncoderConfig` of a parsed `config.json` (`where`: its file)."""
  model_type = _checked_model_type(config, where)
  options = {}
  if model_type == 'convbert':
    options = _read_fields(config, _CONVBERT_OPTIONS)
  default_act = 'gelu_new' if model_type == 'albert' else 'gelu'
  embedding = config.get('embedding_size')
  if model_type == 'bert':
    embedding = None
  encoder = encoders.validate(
      encoders.EncoderConfig(
          backbone=BACKBONES[model_type],
          embedding_width=(
              None
              if embedding is None or embedding == config['hidden_size']
              else embedding
          ),
          hidden_activation=_activation(
              config.get('hidden_act', default_act), where
          ),
          options=options,
          **_read_fields(config, _FIELDS),
      )
  )
  id2label = config.get('id2label')
  return HfArchitecture(
      model_type=model_type,
      architectures=tuple(config.get('architectures') or ()),
      encoder=encoder,
      num_labels=len(id2label) if id2label else None,
      id2label=(
          {int(key): value for key, value in id2label.items()}
          if id2label
          else None
      ),
  )


def model_type_for(encoder: encoders.EncoderConfig, electra: bool) -> str:
  """The Hugging Face model type that is exactly `encoder`.

  `electra`: an ELECTRA-style network, which the ELECTRA classes hold.
  """
  if encoder.backbone == 'albert':
    return 'albert'
  if encoder.backbone == 'convbert':
    options = encoder.options_dict()
    for option in ('conv_only', 'attention_only'):
      if options.get(option):
        raise cli.UserError(
            f'The encoder has the ConvBERT option {option} = True: Hugging '
            'Face ConvBERT has every block mixed (attention and convolution '
            'heads); it cannot hold this ablation.'
        )
    return 'convbert'
  if encoder.backbone != 'bert':
    raise cli.UserError(
        f'The encoder backbone {encoder.backbone!r} has no Hugging Face '
        'class; BERT, ALBERT and ConvBERT encoders export.'
    )
  if electra or encoder.width != encoder.hidden_size:
    # BERT has no embedding projection; ELECTRA's classes do.
    return 'electra'
  return 'bert'


def hf_config(
    encoder: encoders.EncoderConfig,
    model_type: str,
    architecture: str,
    **extra: Any,
) -> Dict[str, Any]:
  """The `config.json` of `encoder` as a Hugging Face `model_type` model.

  `architecture` is the class the weights are for; `**extra` further fields.
  """
  if encoder.hidden_activation not in ACTIVATIONS_TO_HF:
    raise cli.UserError(
        f'The encoder hidden_activation {encoder.hidden_activation!r} has no '
        'Hugging Face name.'
    )
  config = dict(
      model_type=model_type,
      architectures=[architecture],
      **{theirs: getattr(encoder, ours) for ours, theirs, _ in _FIELDS},
      hidden_act=ACTIVATIONS_TO_HF[encoder.hidden_activation],
      layer_norm_eps=LAYER_NORM_EPSILON,
      position_embedding_type='absolute',
  )
  if model_type != 'bert':
    config['embedding_size'] = encoder.width
  if model_type == 'albert':
    config.update(num_hidden_groups=1, inner_group_num=1)
  if model_type == 'convbert':
    options = encoder.options_dict()
    config.update({key: options[ours] for ours, key, _ in _CONVBERT_OPTIONS})
  config.update(extra)
  return config
