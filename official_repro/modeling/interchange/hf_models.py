"""Hugging Face BERT, ALBERT, ELECTRA and ConvBERT models as our networks.

Import (`read` or `from_folder`, then `build`): architecture from
`config.json` (`hf_config.encoder_config`), casing and vocabulary from the
tokenizer files, every weight through `hf_layout`'s table. Heads we know
(MLM, ELECTRA's RTD) are converted, task heads (`TASK_HEADS`) named and
left; any other, missing or misshapen weight is refused in one line.
Export (`export`): our encoder and optionally one head as the Hugging Face
class computing the same function (`hf_config.model_type_for`). Hugging
Face's ELECTRA and ConvBERT generator heads apply the exact GELU whatever
the config says (`mlm_activation`).
"""

import dataclasses
import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
import tf_keras

from official.nlp.modeling import layers
from official_repro.common import cli
from official_repro.modeling import activations
from official_repro.modeling.heads import rtd
from official_repro.modeling.interchange import hf_config
from official_repro.modeling.interchange import hf_folder
from official_repro.modeling.interchange import hf_layout
from official_repro.modeling.networks import encoders

# Weights of fine-tuning or auxiliary heads a folder may hold that no
# network of ours takes: named in the conversion's report, not converted.
TASK_HEADS = re.compile(
    r'^(cls\.seq_relationship|classifier|qa_outputs|sop_classifier|'
    r'sequence_summary|pre_classifier)\.'
)
# The decoder weights tied to the word embeddings (checked equal, not read).
TIED_DECODERS = (
    'cls.predictions.decoder.weight',
    'predictions.decoder.weight',
    'generator_lm_head.weight',
)
# The classes whose checkpoints hold each head.
_MLM_CLASSES = ('ForMaskedLM', 'ForPreTraining')


@dataclasses.dataclass
class Imported:
  """A released model, read and described in our terms.

  `architecture` is its config as ours, `state` its weights by PyTorch name
  and layout under `prefix` ('electra.', or ''), `heads` the heads we convert
  ('mlm', 'rtd').
  """

  source: str
  architecture: hf_config.HfArchitecture
  state: Dict[str, np.ndarray]
  prefix: str
  vocab_tokens: Sequence[str]
  lower_case: bool
  heads: Tuple[str, ...]
  mlm_activation: str

  @property
  def encoder_config(self) -> encoders.EncoderConfig:
    return self.architecture.encoder

  @property
  def task_heads(self) -> List[str]:
    """The weights of task heads left out of the conversion."""
    return sorted(name for name in self.state if TASK_HEADS.match(name))


def _mlm_activation(model_type: str, encoder_activation: str) -> str:
  """What Hugging Face's MLM head of `model_type` applies."""
  if model_type in ('electra', 'convbert'):
    return 'gelu_erf'
  return encoder_activation


def read(path: str, lower_case: Optional[bool] = None) -> Imported:
  """Reads a Hugging Face folder and checks it against its config.

  `lower_case` (`--lower_case`) is refused when the tokenizer files say
  otherwise and needed when they say nothing.
  """
  return from_folder(hf_folder.read_folder(path), lower_case)


def from_folder(
    folder: hf_folder.HfFolder, lower_case: Optional[bool] = None
) -> Imported:
  """`read` of a folder already read (or of a TF1 checkpoint as one)."""
  path = folder.path
  where = f'{path}/{hf_folder.CONFIG_FILENAME}'
  architecture = hf_config.encoder_config(folder.config, where)
  if folder.lower_case is not None and lower_case is not None:
    if folder.lower_case != lower_case:
      raise cli.UserError(
          f'{path}: the tokenizer is '
          f'{"uncased" if folder.lower_case else "cased"} '
          f'(do_lower_case={folder.lower_case}), but --lower_case='
          f'{lower_case} was given; drop the flag.'
      )
  casing = folder.lower_case if folder.lower_case is not None else lower_case
  if casing is None:
    raise cli.UserError(
        f'{path}: no tokenizer file says whether it lower-cases '
        f'({hf_folder.TOKENIZER_CONFIG_FILENAME} do_lower_case); pass '
        '--lower_case or --nolower_case.'
    )
  vocab_size = architecture.encoder.vocab_size
  if len(folder.vocab_tokens) != vocab_size:
    raise cli.UserError(
        f'{path}: the vocabulary has {len(folder.vocab_tokens)} tokens but '
        f'{where} says vocab_size {vocab_size}; give the folder the '
        'vocabulary the model was trained with.'
    )
  model_type = architecture.model_type
  prefix = (
      f'{model_type}.'
      if any(name.startswith(f'{model_type}.') for name in folder.state)
      else ''
  )
  names = set(folder.state)
  classes = ' '.join(architecture.architectures)
  heads = []
  mlm_dense = hf_layout.MLM_HEAD_NAMES[model_type][0]
  if f'{mlm_dense}.weight' in names or (
      not names and any(c in classes for c in _MLM_CLASSES)
  ):
    heads.append('mlm')
  if 'discriminator_predictions.dense.weight' in names:
    heads.append('rtd')
  return Imported(
      source=folder.weights_file,
      architecture=architecture,
      state=folder.state,
      prefix=prefix,
      vocab_tokens=folder.vocab_tokens,
      lower_case=bool(casing),
      heads=tuple(heads),
      mlm_activation=folder.mlm_activation
      or _mlm_activation(model_type, architecture.encoder.hidden_activation),
  )


def assign(
    params: Sequence[hf_layout.Parameter],
    state: Dict[str, np.ndarray],
    source: str,
) -> List[str]:
  """Assigns each parameter from `state`; returns the names read.

  A variable under several names (ALBERT's output bias) is read from the first
  present; an optional parameter may be absent.
  """
  read_names, assigned = [], set()
  for param in params:
    if param.name not in state:
      if param.optional or id(param.variable) in assigned:
        continue
      raise cli.UserError(
          f'{source}: no weight {param.name!r} (for our '
          f'{param.variable.name}); the file holds another architecture or '
          'size than its config says.'
      )
    read_names.append(param.name)
    if id(param.variable) in assigned:
      continue
    weight = np.asarray(state[param.name])
    try:
      value = param.to_ours(weight)
    except ValueError:  # Our layout's reshape fails on a weight of other size.
      value = None
    if value is None or tuple(value.shape) != tuple(param.variable.shape):
      ours = 'cannot be' if value is None else f'is {tuple(value.shape)}'
      raise cli.UserError(
          f'{source}: {param.name} has shape {tuple(weight.shape)}, which as '
          f'our {param.variable.name} {ours}; expected '
          f'{tuple(param.variable.shape)}.'
      )
    param.variable.assign(value.astype(param.variable.dtype.as_numpy_dtype))
    assigned.add(id(param.variable))
  return read_names


def build_encoder(config: encoders.EncoderConfig) -> tf_keras.Model:
  """Our encoder of `config`, built (its variables created)."""
  encoder = encoders.build_encoder(config)
  ids = tf.constant([[1, 2]], tf.int32)
  encoder(
      dict(
          input_word_ids=ids,
          input_mask=tf.ones_like(ids),
          input_type_ids=tf.zeros_like(ids),
      )
  )
  return encoder


def build_mlm_head(
    encoder: tf_keras.Model, activation: str, name: str = 'cls/predictions'
) -> layers.MaskedLM:
  """An (unbuilt -> built) Model Garden `MaskedLM` on `encoder`'s table."""
  head = layers.MaskedLM(
      embedding_table=encoder.get_embedding_table(),
      activation=activations.get(activation),
      output='logits',
      name=name,
  )
  width = encoder.get_config()['hidden_size']
  head(tf.zeros([1, 2, width]), masked_positions=tf.zeros([1, 1], tf.int32))
  return head


def build_rtd_head(
    hidden_size: int, activation: str
) -> rtd.ReplacedTokenDetectionHead:
  """A built replaced-token-detection head of width `hidden_size`."""
  head = rtd.ReplacedTokenDetectionHead(
      hidden_size=hidden_size, activation=activation, name='discriminator_rtd'
  )
  head(tf.zeros([1, 2, hidden_size]))
  return head


@dataclasses.dataclass
class Networks:
  """What an import builds: the encoder, and its heads where converted."""

  encoder: tf_keras.Model
  mlm_head: Optional[layers.MaskedLM] = None
  rtd_head: Optional[rtd.ReplacedTokenDetectionHead] = None


def _check_tied_decoders(imported: Imported) -> List[str]:
  table = imported.state.get(
      f'{imported.prefix}embeddings.word_embeddings.weight'
  )
  tied = []
  for name in TIED_DECODERS:
    if name in imported.state:
      if table is None or not np.array_equal(imported.state[name], table):
        raise cli.UserError(
            f'{imported.source}: {name} differs from the word embeddings; '
            'an MLM decoder not tied to them is not supported.'
        )
      tied.append(name)
  return tied


def build(imported: Imported) -> Networks:
  """Our networks with the released weights; checks every weight is used."""
  model_type = imported.architecture.model_type
  encoder = build_encoder(imported.encoder_config)
  params = hf_layout.encoder_parameters(encoder, model_type, imported.prefix)
  networks = Networks(encoder)
  if 'mlm' in imported.heads:
    networks.mlm_head = build_mlm_head(encoder, imported.mlm_activation)
    params += hf_layout.mlm_head_parameters(networks.mlm_head, model_type)
  if 'rtd' in imported.heads:
    networks.rtd_head = build_rtd_head(
        imported.encoder_config.hidden_size,
        imported.encoder_config.hidden_activation,
    )
    params += hf_layout.rtd_head_parameters(networks.rtd_head)
  used = set(assign(params, imported.state, imported.source))
  used |= set(_check_tied_decoders(imported))
  used |= set(imported.task_heads)
  extra = sorted(set(imported.state) - used)
  if extra:
    raise cli.UserError(
        f'{imported.source}: {len(extra)} weights belong to no network of a '
        f'{model_type} model as its config describes it (first: {extra[0]}); '
        'the config and the weights disagree.'
    )
  return networks


def export_state(
    encoder: tf_keras.Model,
    model_type: str,
    prefix: str,
    mlm_head: Optional[layers.MaskedLM] = None,
    rtd_head: Optional[rtd.ReplacedTokenDetectionHead] = None,
    classifier: Optional[tf_keras.Model] = None,
) -> Dict[str, np.ndarray]:
  """Our networks' weights by Hugging Face name, in PyTorch layout."""
  params = hf_layout.encoder_parameters(encoder, model_type, prefix)
  if mlm_head is not None:
    params += hf_layout.mlm_head_parameters(mlm_head, model_type)
  if rtd_head is not None:
    params += hf_layout.rtd_head_parameters(rtd_head)
  if classifier is not None:
    params += hf_layout.classifier_parameters(classifier)
  return {
      p.name: np.asarray(p.to_theirs(p.variable.numpy()), np.float32)
      for p in params
  }


# Hugging Face's class names per model type: (base model, masked LM).
_CLASS_NAMES = dict(
    bert=('BertModel', 'BertForMaskedLM'),
    electra=('ElectraModel', 'ElectraForMaskedLM'),
    albert=('AlbertModel', 'AlbertForMaskedLM'),
    convbert=('ConvBertModel', 'ConvBertForMaskedLM'),
)


# Hugging Face's sequence classifiers that are ours (pooler, then a dense
# layer); ELECTRA's and ConvBERT's put a GELU layer on [CLS] instead.
_CLASSIFIER_CLASSES = dict(
    bert='BertForSequenceClassification',
    albert='AlbertForSequenceClassification',
)


def hf_class(model_type: str, head: Optional[str]) -> str:
  """The class a folder's weights are for: the base model or its head's."""
  if head == 'classifier':
    if model_type not in _CLASSIFIER_CLASSES:
      raise cli.UserError(
          f'A classifier on a {model_type} encoder has no Hugging Face class '
          f"computing it: {model_type}'s sequence classifier applies GELU on "
          "[CLS] where ours applies BERT's tanh pooler; export it with "
          '--format=saved_model.'
      )
    return _CLASSIFIER_CLASSES[model_type]
  if head == 'rtd':
    if model_type != 'electra':
      raise ValueError(f'No replaced-token-detection class for {model_type}.')
    return 'ElectraForPreTraining'
  return _CLASS_NAMES[model_type][1 if head == 'mlm' else 0]


def mlm_head_difference(
    model_type: str, encoder_activation: str, head_activation: str
) -> Optional[str]:
  """What Hugging Face's MLM head computes otherwise than ours, if anything.

  ELECTRA's and ConvBERT's generator heads apply the exact GELU; BERT's and
  ALBERT's the config's `hidden_act`, which is the encoder's.
  """
  theirs = _mlm_activation(model_type, encoder_activation)
  if theirs == head_activation:
    return None
  return (
      f"the MLM head applies {head_activation} here; Hugging Face's "
      f'{hf_class(model_type, "mlm")} applies {theirs} there'
  )


def _single_head(mlm_head, rtd_head, classifier) -> Optional[str]:
  """The one head given ('mlm', 'rtd', 'classifier'), None, or UserError."""
  heads = [
      name
      for name, network in (
          ('mlm', mlm_head),
          ('rtd', rtd_head),
          ('classifier', classifier),
      )
      if network is not None
  ]
  if len(heads) > 1:
    raise cli.UserError(
        f'One folder holds one head, not {" and ".join(heads)}: export the '
        'discriminator (RTD head) and the generator (MLM head) to two '
        'folders.'
    )
  return heads[0] if heads else None


def _label_fields(labels: Optional[Sequence[str]]) -> Dict[str, object]:
  """A classifier's `config.json` label fields."""
  labels = list(labels or ())
  return dict(
      id2label={str(i): label for i, label in enumerate(labels)},
      label2id={label: i for i, label in enumerate(labels)},
      problem_type=(
          'regression' if len(labels) == 1 else 'single_label_classification'
      ),
  )


def export(
    path: str,
    encoder: tf_keras.Model,
    encoder_config: encoders.EncoderConfig,
    vocab_tokens: Sequence[str],
    lower_case: bool,
    electra: bool = False,
    mlm_head: Optional[layers.MaskedLM] = None,
    rtd_head: Optional[rtd.ReplacedTokenDetectionHead] = None,
    classifier: Optional[tf_keras.Model] = None,
    labels: Optional[Sequence[str]] = None,
) -> Dict[str, str]:
  """Writes our networks as a Hugging Face folder; returns its type and class.

  `encoder_config` has `vocab_size` set; `electra`: an ELECTRA-style network
  (the ELECTRA classes hold it). At most one head: `mlm_head`
  (`*ForMaskedLM`), `rtd_head` (`ElectraForPreTraining`) or a fine-tuned
  `BertClassifier` `classifier` (`*ForSequenceClassification`) with its
  `labels` (one: a regression, as STS-B).
  """
  head = _single_head(mlm_head, rtd_head, classifier)
  model_type = hf_config.model_type_for(
      encoder_config, (electra or bool(rtd_head)) and head != 'classifier'
  )
  architecture = hf_class(model_type, head)
  extra = {} if classifier is None else _label_fields(labels)
  if len(vocab_tokens) != encoder_config.vocab_size:
    raise cli.UserError(
        f'The vocabulary has {len(vocab_tokens)} tokens; the encoder '
        f'{encoder_config.vocab_size}.'
    )
  state = export_state(
      encoder,
      model_type,
      f'{model_type}.' if head else '',
      mlm_head=mlm_head,
      rtd_head=rtd_head,
      classifier=classifier,
  )
  hf_folder.write_folder(
      path,
      hf_config.hf_config(encoder_config, model_type, architecture, **extra),
      state,
      vocab_tokens,
      lower_case,
  )
  return {'model_type': model_type, 'class': architecture}
