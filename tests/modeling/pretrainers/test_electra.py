"""ELECTRA pretrainer: generator scaling, sampling, labels, tying."""

import numpy as np
import pytest
import tensorflow as tf

from official_repro.modeling import arguments
from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import electra
from official_repro.modeling.pretrainers import networks
from official_repro.modeling.pretrainers import sampling
from tests.plugins import rezero_backbone  # noqa: F401  (registers the plug-in)


def _discriminator_config(backbone='bert'):
  return encoders.validate(
      encoders.EncoderConfig(
          backbone=backbone,
          hidden_size=32,
          num_layers=2,
          num_attention_heads=4,
          intermediate_size=64,
          embedding_width=16,
          vocab_size=40,
          max_position_embeddings=16,
      )
  )


def _batch():
  ids = np.array(
      [[2, 5, 6, 4, 8, 9, 3, 0], [2, 10, 4, 12, 13, 4, 3, 3]], np.int32
  )
  return dict(
      input_word_ids=tf.constant(ids),
      input_mask=tf.constant((np.arange(8) < [[7], [8]]).astype(np.int32)),
      input_type_ids=tf.zeros([2, 8], tf.int32),
      masked_lm_positions=tf.constant([[3, 0], [2, 5]], tf.int32),
      masked_lm_ids=tf.constant([[7, 0], [11, 14]], tf.int32),
      masked_lm_weights=tf.constant([[1.0, 0.0], [1.0, 1.0]]),
  )


def _pretrainer(backbone='bert', **kwargs):
  config = _discriminator_config(backbone)
  return electra.ElectraPretrainer(
      config, networks.scale_generator(config, 0.5), **kwargs
  )


@pytest.mark.parametrize('backbone', ['bert', 'albert'])
def test_labels_mark_exactly_the_changed_tokens(backbone):
  model = _pretrainer(backbone)
  inputs = _batch()
  outputs = model(inputs, training=False)
  original = sampling.restore_original_ids(
      inputs['input_word_ids'],
      inputs['masked_lm_positions'],
      inputs['masked_lm_ids'],
      inputs['masked_lm_weights'],
  ).numpy()
  corrupted = outputs['discriminator_ids'].numpy()
  labels = outputs['rtd_labels'].numpy()
  real = inputs['input_mask'].numpy()
  np.testing.assert_array_equal(labels, (corrupted != original) * real)
  # Only masked positions can change; a sample equal to the original is 0.
  unmasked = np.ones_like(original, bool)
  unmasked[0, 3] = unmasked[1, 2] = unmasked[1, 5] = False
  np.testing.assert_array_equal(corrupted[unmasked], original[unmasked])
  assert outputs['rtd_logits'].shape == (2, 8)
  assert outputs['mlm_logits'].shape == (2, 2, 40)


def test_sample_equal_to_original_gets_label_zero():
  model = _pretrainer()
  inputs = dict(_batch(), masked_lm_ids=tf.constant([[7, 0], [7, 7]]))
  model(inputs)
  # A generator that always predicts the original token 7.
  bias = np.zeros(40, np.float32)
  bias[7] = 1e4
  model.mlm_head.bias.assign(bias)
  outputs = model(inputs, training=False)
  assert outputs['rtd_labels'].numpy().sum() == 0


@pytest.mark.slow
@pytest.mark.parametrize('backbone', ['bert', 'albert'])
def test_tied_embedding_gets_gradients_from_both_losses(backbone):
  model = _pretrainer(backbone)
  inputs = _batch()
  model(inputs)
  table = model.discriminator.get_embedding_table()
  assert model.generator.get_embedding_table() is table
  assert sum(v is table for v in model.trainable_variables) == 1
  with tf.GradientTape(persistent=True) as tape:
    outputs = model(inputs, training=True)
    mlm_loss = tf.reduce_sum(outputs['mlm_logits'])
    rtd_loss = tf.reduce_sum(outputs['rtd_logits'])
  assert tape.gradient(mlm_loss, table) is not None  # generator side
  assert tape.gradient(rtd_loss, table) is not None  # discriminator side
  # The sample is drawn under stop-gradient: RTD gives the generator's own
  # (untied) weights no gradient.
  own = [v for v in model.generator.trainable_variables if v is not table]
  assert all(tape.gradient(rtd_loss, v) is None for v in own)


def test_config_round_trip_rebuilds_an_equal_model():
  model = _pretrainer('albert', temperature=0.8, disallow_original=True)
  clone = electra.ElectraPretrainer.from_config(model.get_config())
  inputs = _batch()
  model(inputs)
  clone(inputs)
  assert clone.get_config() == model.get_config()
  assert [v.shape for v in clone.trainable_variables] == [
      v.shape for v in model.trainable_variables
  ]
  # The tie is part of the config: one embedding table in the clone too.
  assert clone.generator.get_embedding_table() is (
      clone.discriminator.get_embedding_table()
  )


@pytest.mark.slow
@pytest.mark.parametrize('backbone', encoders.backbone_names())
def test_shared_generator_blocks_get_gradients_from_both_losses(backbone):
  # TEAMS-style partial sharing: the generator (full width, its own depth)
  # takes the discriminator's bottom block objects.
  config = _discriminator_config(backbone)
  if backbone == 'convbert':
    config = config.with_options(dict(config.options_dict(), kernel_size=3))
  model = electra.ElectraPretrainer(
      config,
      networks.scale_generator(config, 1.0, generator_num_layers=2),
      num_shared_layers=1,
  )
  inputs = _batch()
  model(inputs)
  shared_block = model.discriminator.transformer_layers[0]
  assert model.generator.transformer_layers[0] is shared_block
  assert model.generator.transformer_layers[1] is not (
      model.discriminator.transformer_layers[1]
  )
  model_variables = {v.ref() for v in model.trainable_variables}
  shared = shared_block.trainable_variables
  assert shared and all(v.ref() in model_variables for v in shared)
  with tf.GradientTape(persistent=True) as tape:
    outputs = model(inputs, training=True)
    mlm_loss = tf.reduce_sum(outputs['mlm_logits'])
    rtd_loss = tf.reduce_sum(outputs['rtd_logits'])
  for loss in (mlm_loss, rtd_loss):
    gradients = tape.gradient(loss, shared)
    # Every shared variable is on both paths; some get a zero gradient at
    # initialisation (ReZero's residual weight starts at 0), none is cut off.
    assert all(g is not None for g in gradients)
    assert any(float(tf.reduce_max(tf.abs(g))) > 0 for g in gradients)


def test_sharing_blocks_needs_equal_widths():
  config = _discriminator_config()
  with pytest.raises(
      arguments.ArgumentError,
      match=r'^build_networks: num_shared_layers=1 needs a generator as wide '
      r'.*\(generator_size 1\.0\)\.$',
  ):
    electra.ElectraPretrainer(
        config, networks.scale_generator(config, 0.5), num_shared_layers=1
    )


def test_a_temperature_of_zero_is_refused_by_argument_name():
  config = _discriminator_config()
  with pytest.raises(arguments.ArgumentError) as raised:
    electra.ElectraPretrainer(config, config, temperature=0.0)
  assert str(raised.value) == (
      'ElectraPretrainer: temperature must be > 0, got 0.0.'
  )


@pytest.mark.slow
@pytest.mark.parametrize('backbone', ['bert', 'albert'])
def test_tied_embedding_block_is_one_set_of_layers_trained_by_both(backbone):
  """google-research/electra's tying: the whole embedding block is shared.

  Position and type tables and the embedding LayerNorm become the
  discriminator's objects (the generator keeps its embedding projection),
  each gets gradients from both losses, and the config rebuilds the tie.
  """
  untied = _pretrainer(backbone)
  model = _pretrainer(backbone, tie_embedding_block=True)
  inputs = _batch()
  untied(inputs)
  model(inputs)
  block = model.discriminator.embedding_block
  assert model.generator.embedding_block == block
  assert (
      untied.generator.embedding_block != untied.discriminator.embedding_block
  )
  shared = [v for layer in block for v in layer.trainable_variables]
  assert len(shared) == 4  # position, type, LayerNorm gamma and beta
  assert len(model.trainable_variables) == len(untied.trainable_variables) - 4
  with tf.GradientTape(persistent=True) as tape:
    outputs = model(inputs, training=True)
    mlm_loss = tf.reduce_sum(outputs['mlm_logits'])
    rtd_loss = tf.reduce_sum(outputs['rtd_logits'])
  for loss in (mlm_loss, rtd_loss):
    assert all(g is not None for g in tape.gradient(loss, shared))
  clone = electra.ElectraPretrainer.from_config(model.get_config())
  clone(inputs)
  assert clone.generator.embedding_block == clone.discriminator.embedding_block


def test_tying_the_embedding_block_needs_the_word_table_and_equal_shapes():
  config = _discriminator_config()
  with pytest.raises(ValueError, match='set tie_embeddings = True'):
    _pretrainer(tie_embeddings=False, tie_embedding_block=True)
  generator = networks.scale_generator(config, 0.5).replace(
      max_position_embeddings=config.max_position_embeddings // 2
  )
  with pytest.raises(ValueError, match='max_position_embeddings'):
    electra.ElectraPretrainer(config, generator, tie_embedding_block=True)
