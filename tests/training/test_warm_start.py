"""Pretraining from a released encoder: started from it, or refused first."""

import os

import gin
import numpy as np
import pytest
import tensorflow as tf

from official_repro import train
from official_repro.common import cli
from official_repro.data import create_pretraining_data
from official_repro.training import gin_utils
from official_repro.training import saved_runs
from tests.modeling.interchange import hf_reference

_SIZES = [
    'encoder.hidden_size = 32',
    'encoder.num_layers = 2',
    'encoder.num_attention_heads = 4',
    'encoder.intermediate_size = 64',
    'encoder.max_position_embeddings = 16',
    "encoder.hidden_activation = 'gelu_erf'",  # Hugging Face's "gelu"
    "masked_lm.mlm_activation = 'gelu_erf'",
]


@pytest.fixture(scope='module')
def release_and_records(tmp_path_factory):
  """A Hugging Face BERT masked LM and records in its vocabulary."""
  root = tmp_path_factory.mktemp('warm_start')
  model, state = hf_reference.build('bert', 'mlm')
  folder = hf_reference.write_folder(str(root / 'bert'), model.config, state)
  corpus = root / 'corpus'
  corpus.mkdir()
  words = hf_reference.VOCAB[5:30]
  rng = np.random.RandomState(0)
  (corpus / 'a.txt').write_text(
      '\n\n'.join(' '.join(rng.choice(words, 30)) + ' .' for _ in range(40))
  )
  create_pretraining_data.prepare_pretraining_data(
      [str(corpus)],
      str(root / 'records'),
      vocab_file=os.path.join(folder, 'vocab.txt'),
      max_seq_length=16,
  )
  return folder, str(root / 'records')


def _run(model_dir, records, init_checkpoint, *bindings):
  gin.clear_config()
  try:
    return train.run(
        tf.distribute.get_strategy(),
        [os.path.join(gin_utils.REPO_ROOT, 'gin/pretrain/masked_lm.gin')],
        [
            *_SIZES,
            f'pretrain_data.input_path = {records!r}',
            'pretrain_data.max_seq_length = 16',
            'pretrain_data.train_batch_size = 4',
            'experiment.train_steps = 1',
            'experiment.steps_per_loop = 1',
            'experiment.checkpoint_interval = 1',
            'optimization.learning_rate = 0.0',
            *bindings,
        ],
        str(model_dir),
        'train',
        init_checkpoint=init_checkpoint,
    )
  finally:
    gin.clear_config()


@pytest.mark.slow
def test_a_run_starts_from_the_released_encoder_and_mlm_head(
    release_and_records, tmp_path
):
  """At learning rate 0 the trained run still is the release, bit for bit."""
  folder, records = release_and_records
  _run(tmp_path / 'run', records, folder)
  run = saved_runs.load(str(tmp_path / 'run'))
  _, state = hf_reference.build('bert', 'mlm')
  np.testing.assert_array_equal(
      run.model.encoder_network.get_embedding_table().numpy(),
      state['bert.embeddings.word_embeddings.weight'],
  )
  (bias,) = [w for w in run.model.masked_lm.weights if 'output_bias' in w.name]
  np.testing.assert_array_equal(bias.numpy(), state['cls.predictions.bias'])
  (query,) = [
      w
      for w in run.model.encoder_network.weights
      if 'layer_1/self_attention/query/kernel' in w.name
  ]
  np.testing.assert_array_equal(
      query.numpy().reshape(32, 32),
      state['bert.encoder.layer.1.attention.self.query.weight'].T,
  )


def test_another_architecture_is_refused_before_anything_is_written(
    release_and_records, tmp_path
):
  folder, records = release_and_records
  with pytest.raises(cli.UserError) as error:
    _run(tmp_path / 'run', records, folder, 'encoder.hidden_size = 64')
  assert 'encoder.hidden_size = 64 here, 32 there' in str(error.value)
  assert not (tmp_path / 'run').exists()
