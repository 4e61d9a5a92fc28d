"""Model Garden TEAMS checkpoints: restored by object, copied into ours."""

import numpy as np
import pytest
import tensorflow as tf
import yaml

from official.nlp.configs import encoders as mg_encoders
from official.projects.teams import teams as stock_teams
from official.projects.teams import teams_task as stock_teams_task
from official_repro.common import cli
from official_repro.modeling.interchange import hf_models
from official_repro.modeling.interchange import teams_checkpoints
from tests.modeling.interchange import hf_reference

_BERT = dict(
    vocab_size=len(hf_reference.VOCAB),
    hidden_size=32,
    num_layers=3,
    num_attention_heads=4,
    intermediate_size=64,
    max_position_embeddings=16,
    embedding_size=16,
    dropout_rate=0.0,
    attention_dropout_rate=0.0,
)
_MODEL = dict(
    candidate_size=4,
    num_shared_generator_hidden_layers=1,
    num_discriminator_task_agnostic_layers=2,
    generator=dict(_BERT, num_layers=2),
    discriminator=_BERT,
)


def _inputs():
  ids, mask, types = hf_reference.inputs()
  return dict(
      input_word_ids=tf.constant(ids),
      input_mask=tf.constant(mask),
      input_type_ids=tf.constant(types),
      masked_lm_positions=tf.constant([[1, 2], [3, 0]]),
      masked_lm_ids=tf.constant([[5, 6], [7, 0]]),
      masked_lm_weights=tf.constant([[1.0, 1.0], [1.0, 0.0]]),
  )


@pytest.fixture(scope='module')
def teams_run(tmp_path_factory):
  """A Model Garden TEAMS run: its checkpoint, params.yaml and vocabulary."""
  directory = tmp_path_factory.mktemp('teams_run')
  config = stock_teams.TeamsPretrainerConfig(
      candidate_size=4,
      num_shared_generator_hidden_layers=1,
      num_discriminator_task_agnostic_layers=2,
      generator=mg_encoders.BertEncoderConfig(**dict(_BERT, num_layers=2)),
      discriminator=mg_encoders.BertEncoderConfig(**_BERT),
  )
  pretrainer = stock_teams_task._build_pretrainer(config)  # pylint: disable=protected-access
  pretrainer(_inputs())
  rng = np.random.RandomState(0)
  for variable in pretrainer.variables:
    variable.assign(rng.normal(0, 0.2, variable.shape).astype(np.float32))
  tf.train.Checkpoint(model=pretrainer).write(str(directory / 'ckpt-100'))
  (directory / 'params.yaml').write_text(
      yaml.safe_dump(dict(task=dict(model=_MODEL)))
  )
  (directory / 'vocab.txt').write_text('\n'.join(hf_reference.VOCAB) + '\n')
  (directory / 'tokenizer_config.json').write_text('{"do_lower_case": true}')
  return directory, pretrainer


@pytest.mark.slow
def test_the_mws_discriminator_converts_with_its_outputs(teams_run):
  directory, pretrainer = teams_run
  assert teams_checkpoints.detect(str(directory)) == 'teams'
  folder = teams_checkpoints.read(str(directory))
  networks = hf_models.build(hf_models.from_folder(folder))
  inputs = _inputs()
  ours = networks.encoder(inputs)['sequence_output'].numpy()
  theirs = pretrainer.discriminator_mws_network(
      [inputs['input_word_ids'], inputs['input_mask'], inputs['input_type_ids']]
  )['sequence_output'].numpy()
  real = inputs['input_mask'].numpy().astype(bool)
  np.testing.assert_allclose(ours[real], theirs[real], atol=1e-5)


@pytest.mark.slow
def test_the_generator_converts_with_its_mlm_head(teams_run):
  directory, pretrainer = teams_run
  folder = teams_checkpoints.read(str(directory), network='generator')
  networks = hf_models.build(hf_models.from_folder(folder))
  inputs = _inputs()
  sequence = networks.encoder(inputs)['sequence_output']
  positions = inputs['masked_lm_positions']
  theirs = pretrainer.masked_lm(
      pretrainer.generator_network(
          [
              inputs['input_word_ids'],
              inputs['input_mask'],
              inputs['input_type_ids'],
          ]
      )['sequence_output'],
      positions,
  )
  np.testing.assert_allclose(
      networks.mlm_head(sequence, masked_positions=positions).numpy(),
      theirs.numpy(),
      atol=1e-5,
  )


@pytest.mark.slow
def test_an_encoder_checkpoint_converts_and_has_no_generator(
    teams_run, tmp_path
):
  directory, pretrainer = teams_run
  tf.train.Checkpoint(encoder=pretrainer.discriminator_mws_network).write(
      str(tmp_path / 'encoder-1')
  )
  for name in ('vocab.txt', 'tokenizer_config.json'):
    (tmp_path / name).write_bytes((directory / name).read_bytes())
  # A fine-tuning config names the encoder `task.model.encoder.any`.
  (tmp_path / 'params.yaml').write_text(
      yaml.safe_dump(dict(task=dict(model=dict(encoder=dict(any=_BERT)))))
  )
  folder = teams_checkpoints.read(str(tmp_path))
  networks = hf_models.build(hf_models.from_folder(folder))
  inputs = _inputs()
  real = inputs['input_mask'].numpy().astype(bool)
  np.testing.assert_allclose(
      networks.encoder(inputs)['sequence_output'].numpy()[real],
      pretrainer.discriminator_mws_network(
          [
              inputs['input_word_ids'],
              inputs['input_mask'],
              inputs['input_type_ids'],
          ]
      )['sequence_output'].numpy()[real],
      atol=1e-5,
  )
  assert folder.config['model_type'] == 'electra'  # E = 16 != H = 32
  with pytest.raises(cli.UserError, match='holds no generator'):
    teams_checkpoints.read(str(tmp_path), network='generator')


def test_no_params_yaml_is_one_line_naming_it(teams_run, tmp_path):
  directory, _ = teams_run
  for suffix in ('.index', '.data-00000-of-00001'):
    (tmp_path / f'ckpt-100{suffix}').write_bytes(
        (directory / f'ckpt-100{suffix}').read_bytes()
    )
  with pytest.raises(cli.UserError, match='params.yaml does not exist'):
    teams_checkpoints.read(str(tmp_path))
