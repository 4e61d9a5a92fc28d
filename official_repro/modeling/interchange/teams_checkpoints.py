"""Model Garden TEAMS checkpoints (`official/projects/teams`) as our networks.

A trainer checkpoint (`Checkpoint(model=TeamsPretrainer)` plus its
`params.yaml`) or encoder export (`Checkpoint(encoder=...)`) is restored
into Model Garden's own `TeamsPretrainer` built from the config, and its
`EncoderScaffold` copied into ours layer by layer; the result is returned
as a Hugging Face folder would hold it (`hf_models`). Converted: the
discriminator's MWS side (003 footnote 3) or the generator with its MLM
head; not the RTD side's extra layer and head or the MWS head. Model
Garden's projection has no bias (ours gets zero); its `'gelu'` is tanh.
"""

import os
from typing import Any, Dict, Optional

import numpy as np
import tensorflow as tf
import yaml

from official.nlp.configs import encoders as mg_encoders
from official.projects.teams import teams as stock_teams
from official.projects.teams import teams_task as stock_teams_task
from official_repro.common import cli
from official_repro.modeling import activations
from official_repro.modeling.interchange import hf_config
from official_repro.modeling.interchange import hf_folder
from official_repro.modeling.interchange import hf_models
from official_repro.modeling.interchange import tf1_checkpoints
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks.backbones import bert as bert_backbone

KIND = 'teams'
PARAMS_FILENAME = 'params.yaml'


def detect(path: str) -> Optional[str]:
  """`'teams'` for a Model Garden TEAMS trainer checkpoint at `path`, else None.

  An encoder-only export looks like any functional encoder, so it is read when
  named (`--from=teams`), not detected.
  """
  prefix = tf1_checkpoints.checkpoint_prefix(path)
  if prefix is None:
    return None
  try:
    names = [name for name, _ in tf.train.list_variables(prefix)]
  except (tf.errors.OpError, ValueError):
    return None
  if any(n.startswith('model/discriminator_mws_network/') for n in names):
    return KIND
  return None


def _model_config(path: str, config_file: Optional[str]) -> Dict[str, Any]:
  directory = path if tf.io.gfile.isdir(path) else os.path.dirname(path)
  config_file = config_file or os.path.join(directory, PARAMS_FILENAME)
  if not tf.io.gfile.exists(config_file):
    raise cli.UserError(
        f'{config_file} does not exist: a TEAMS checkpoint carries no '
        'architecture; give its Model Garden params.yaml (--config_file).'
    )
  with tf.io.gfile.GFile(config_file) as f:
    params = yaml.safe_load(f)
  model = ((params or {}).get('task') or {}).get('model') or {}
  if 'discriminator' not in model:
    # A fine-tuning config names the TEAMS encoder `encoder: {any: ...}`.
    encoder = model.get('encoder') or {}
    encoder = encoder.get('any') or encoder.get('bert')
    if not encoder:
      raise cli.UserError(
          f'{config_file}: no task.model.discriminator (pretraining) or '
          'task.model.encoder (fine-tuning); expected the params.yaml of a '
          'Model Garden TEAMS run.'
      )
    model = dict(discriminator=encoder)
  return model


def _encoder_config(
    bert: mg_encoders.BertEncoderConfig,
) -> encoders.EncoderConfig:
  activation = activations.check_name(
      'gelu_tanh'
      if bert.hidden_activation == 'gelu'
      else bert.hidden_activation
  )
  return encoders.validate(
      encoders.EncoderConfig(
          embedding_width=(
              None
              if not bert.embedding_size
              or bert.embedding_size == bert.hidden_size
              else bert.embedding_size
          ),
          hidden_activation=activation,
          **{
              field: getattr(bert, field)
              for field in bert_backbone.MODEL_GARDEN_FIELDS
          },
      )
  )


def _copy_scaffold(scaffold, encoder) -> None:
  """An `EncoderScaffold` into our encoder, layer by layer."""
  embedding = scaffold.embedding_network
  names = (
      'word_embeddings',
      'position_embedding',
      'type_embeddings',
      'embeddings/layer_norm',
  )
  for ours, name in zip(encoder.embedding_layers, names):
    ours.set_weights(embedding.get_layer(name).get_weights())
  projection = encoder.embedding_projection
  if projection is not None:
    (kernel,) = embedding.get_layer('embedding_projection').get_weights()
    projection.set_weights([kernel, np.zeros(kernel.shape[-1], kernel.dtype)])
  for ours, theirs in zip(encoder.transformer_layers, scaffold.hidden_layers):
    ours.set_weights(theirs.get_weights())
  encoder.pooler_layer.set_weights(scaffold.pooler_layer.get_weights())


def _restore_stock(path: str, prefix: str, model: Dict[str, Any], network: str):
  """(scaffold, pretrainer or None): Model Garden's TEAMS networks, restored."""
  names = [name for name, _ in tf.train.list_variables(prefix)]
  encoder_only = not any(n.startswith('model/') for n in names)
  if network == 'generator' and (encoder_only or 'generator' not in model):
    raise cli.UserError(
        f'--input {path}: an encoder checkpoint holds no generator; give '
        "the TEAMS run's training checkpoint and its params.yaml."
    )
  if encoder_only:
    scaffold = stock_teams.get_encoder(
        mg_encoders.BertEncoderConfig(**model['discriminator'])
    )
    checkpoint = tf.train.Checkpoint(encoder=scaffold)
    pretrainer = None
  else:
    # Model Garden builds a TEAMS pretrainer from its config only in the task
    # module's private `_build_pretrainer` (its task needs a whole config).
    pretrainer = stock_teams_task._build_pretrainer(  # pylint: disable=protected-access
        stock_teams.TeamsPretrainerConfig(**model)
    )
    scaffold = (
        pretrainer.discriminator_mws_network
        if network == 'discriminator'
        else pretrainer.generator_network
    )
    checkpoint = tf.train.Checkpoint(model=pretrainer)
  ids = tf.constant([[2, 3]], tf.int32)
  if pretrainer is not None:
    pretrainer(
        dict(
            input_word_ids=ids,
            input_mask=tf.ones_like(ids),
            input_type_ids=tf.zeros_like(ids),
            masked_lm_positions=tf.constant([[1]]),
            masked_lm_ids=tf.constant([[3]]),
            masked_lm_weights=tf.constant([[1.0]]),
        )
    )
  else:
    scaffold([ids, tf.ones_like(ids), tf.zeros_like(ids)])
  status = checkpoint.read(prefix)
  try:
    status.assert_existing_objects_matched()
  except AssertionError as error:
    raise cli.UserError(
        f'--input {path} does not hold the TEAMS model its config '
        f'describes: {str(error)[:300]}'
    ) from error
  status.expect_partial()
  return scaffold, pretrainer


def read(
    path: str, network: str = 'discriminator', config_file: Optional[str] = None
) -> hf_folder.HfFolder:
  """A TEAMS checkpoint (`path`: prefix or directory) as a Hugging Face folder.

  `network` 'discriminator' (its MWS side) or 'generator' (with its MLM head;
  trainer checkpoints only); `config_file` the run's `params.yaml` (default:
  beside the checkpoint).
  """
  prefix = tf1_checkpoints.checked_prefix(path, network)
  model = _model_config(path, config_file)
  scaffold, pretrainer = _restore_stock(path, prefix, model, network)
  bert = mg_encoders.BertEncoderConfig(**model[network])
  config = _encoder_config(bert)
  encoder = hf_models.build_encoder(config)
  _copy_scaffold(scaffold, encoder)
  model_type = hf_config.model_type_for(config, electra=True)
  mlm_head = None
  if network == 'generator':
    mlm_head = hf_models.build_mlm_head(encoder, config.hidden_activation)
    mlm_head.set_weights(pretrainer.masked_lm.get_weights())
  state = hf_models.export_state(
      encoder, model_type, f'{model_type}.', mlm_head=mlm_head
  )
  directory = path if tf.io.gfile.isdir(path) else os.path.dirname(prefix)
  tokens, lower_case = hf_folder.read_tokenizer(directory)
  return hf_folder.HfFolder(
      path=path,
      config=hf_config.hf_config(
          config,
          model_type,
          hf_models.hf_class(model_type, 'mlm' if mlm_head else None),
      ),
      state=state,
      weights_file=prefix,
      vocab_tokens=tokens,
      lower_case=lower_case,
      mlm_activation=config.hidden_activation,
  )
