"""ELECTRA task: loss weighting and short training runs on both backbones."""

import os

import numpy as np
import pytest
import tensorflow as tf

from official.nlp.data import pretrain_dataloader as stock_dataloader
from official_repro.common import cli
from official_repro.modeling import arguments
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import pretrained
from official_repro.tasks import electra
from official_repro.tasks import pretraining


def _outputs_and_labels():
  labels = dict(
      masked_lm_ids=tf.constant([[1, 2]]),
      masked_lm_weights=tf.constant([[1.0, 0.0]]),
      masked_lm_positions=tf.constant([[1, 0]]),
      input_mask=tf.constant([[1, 1, 1, 0]]),
  )
  outputs = dict(
      mlm_logits=tf.constant([[[0.0, 2.0, 0.0], [5.0, 0.0, 0.0]]]),
      rtd_logits=tf.constant([[0.5, -1.0, 2.0, 9.0]]),
      rtd_labels=tf.constant([[0, 1, 1, 1]]),
  )
  return labels, outputs


def test_loss_is_weighted_mlm_plus_rtd_over_real_tokens():
  labels, outputs = _outputs_and_labels()
  mlm = -np.log(np.exp(2.0) / (np.exp(2.0) + 2.0))  # only slot 0 is real
  logits = np.array([0.5, -1.0, 2.0])  # the padded 4th token is excluded
  targets = np.array([0.0, 1.0, 1.0])
  rtd = np.mean(
      np.maximum(logits, 0)
      - logits * targets
      + np.log1p(np.exp(-np.abs(logits)))
  )
  for weights in ((1.0, 50.0), (2.0, 5.0)):
    task = electra.ElectraPretrainTask(
        electra.ElectraPretrainConfig(
            model=electra.ElectraModelConfig(
                generator_loss_weight=weights[0],
                rtd_loss_weight=weights[1],
            )
        )
    )
    metrics = task.build_metrics()
    loss = task.build_losses(labels, outputs, metrics).numpy()
    np.testing.assert_allclose(
        loss, weights[0] * mlm + weights[1] * rtd, rtol=1e-5
    )
    by_name = {m.name: m.result().numpy() for m in metrics}
    np.testing.assert_allclose(by_name['rtd_loss'], rtd, rtol=1e-5)


def test_replaced_fraction_metric():
  labels, outputs = _outputs_and_labels()
  task = electra.ElectraPretrainTask(electra.ElectraPretrainConfig())
  metrics = task.build_metrics()
  task.process_metrics(metrics, labels, outputs)
  by_name = {m.name: m.result().numpy() for m in metrics}
  assert by_name['replaced_fraction'] == 1.0  # position 1 is replaced
  # Logits 0.5, -1, 2 vs labels 0, 1, 1: only the third is right.
  assert by_name['discriminator_accuracy'] == pytest.approx(1 / 3)


def _model_config(**model):
  encoder = encoders.EncoderConfig(
      hidden_size=64,
      num_layers=12,
      num_attention_heads=1,
      intermediate_size=256,
      vocab_size=100,
  )
  return electra.ElectraModelConfig(discriminator=encoder, **model)


@pytest.mark.parametrize(
    'fraction, count, depth',
    [(0.5, None, 6), (1.0, 3, 3), (1.0, None, 12)],
)
def test_generator_depth_is_the_fraction_or_the_count(fraction, count, depth):
  model = _model_config(
      generator_layer_fraction=fraction, generator_num_layers=count
  )
  assert model.generator().num_layers == depth


def _read(model):
  """The objective's check of a config read from gin."""
  return electra.OBJECTIVE.finalized(electra.ElectraPretrainConfig(model=model))


def test_generator_count_and_fraction_are_refused_together():
  model = _model_config(generator_layer_fraction=0.5, generator_num_layers=3)
  with pytest.raises(
      arguments.ArgumentError,
      match=r'^generator_depth: generator_num_layers=3 and '
      r'generator_layer_fraction=0\.5 both set',
  ):
    model.generator()
  with pytest.raises(
      cli.UserError,
      match=r'^electra\.generator_num_layers=3 and '
      r'electra\.generator_layer_fraction=0\.5 both set the generator depth: '
      r'a count needs electra\.generator_layer_fraction = 1\.0',
  ):
    _read(model)


@pytest.mark.parametrize(
    'settings, message',
    [
        (  # a quarter-width generator shares no layers
            dict(layer_sharing='partial'),
            "electra.layer_sharing='partial' shares 6 layers, which needs a "
            'generator as wide as the discriminator, got hidden sizes 16 and '
            "64; set electra.layer_sharing = 'none', or "
            'electra.generator_size = 1.0 (a generator as wide as the '
            'discriminator).',
        ),
        (  # the embedding block is tied beside the word table only
            dict(tie_embeddings=False, tie_embedding_block=True),
            'electra.tie_embedding_block = True shares the position and type '
            'embeddings beside a shared word table; set '
            'electra.tie_embeddings = True too, or '
            'electra.tie_embedding_block = False.',
        ),
    ],
)
def test_generator_shape_mistakes_name_the_fix_when_read(settings, message):
  """A UserError naming the bindings when the config is read from gin."""
  model = _model_config(generator_size=0.25, **settings)
  with pytest.raises(cli.UserError) as raised:
    _read(model)
  assert str(raised.value) == message
  # The model config's own check names its fields.
  with pytest.raises(arguments.ArgumentError) as raised:
    pretraining.check_generator_shape(
        electra.ElectraPretrainConfig(model=model)
    )
  assert str(raised.value).split(': ', 1)[1] == message.replace('electra.', '')


def test_the_pretrainers_settings_are_checked_when_read():
  with pytest.raises(cli.UserError) as raised:
    _read(_model_config(generator_size=0.25, temperature=0.0))
  assert str(raised.value) == 'electra.temperature must be > 0, got 0.0.'


def test_model_gardens_electra_is_not_offered_a_tied_embedding_block():
  """Its ElectraPretrainTask ties the word table only: refused, not mapped."""
  config = electra.ElectraPretrainConfig(
      model=_model_config(generator_size=0.25, tie_embedding_block=True)
  )
  with pytest.raises(cli.UserError, match='electra.tie_embedding_block = F'):
    electra.OBJECTIVE.stock_task_config(config, None, 20)
  untied = config.replace(model=config.model.replace(tie_embedding_block=False))
  stock = electra.OBJECTIVE.stock_task_config(
      untied, stock_dataloader.BertPretrainDataConfig(seq_length=32), 20
  )
  assert stock.model.tie_embeddings


@pytest.mark.slow
@pytest.mark.parametrize(
    'layer_sharing, shared', [('none', 0), ('partial', 3), ('full', 6)]
)
def test_layer_sharing_counts_the_generators_layers(layer_sharing, shared):
  # TEAMS' settings on ELECTRA: a 6-layer generator of full width.
  model = _model_config(
      generator_layer_fraction=0.5, layer_sharing=layer_sharing
  )
  assert model.num_shared_layers() == shared
  pretrainer = electra.ElectraPretrainTask(
      electra.ElectraPretrainConfig(model=model)
  ).build_model()
  generator_blocks = pretrainer.generator.transformer_layers
  discriminator_blocks = pretrainer.discriminator.transformer_layers
  same = [a is b for a, b in zip(generator_blocks, discriminator_blocks)]
  assert same == [True] * shared + [False] * (6 - shared)


# Every objective trains on every backbone in the slow tier
# (tests/training/test_mixed_precision.py).
@pytest.mark.parametrize(
    'backbone', ['bert', pytest.param('albert', marks=pytest.mark.slow)]
)
def test_two_training_steps(run_tiny_electra, tmp_path, backbone):
  result = run_tiny_electra(
      tmp_path,
      ['electra.temperature = 0.8', f'encoder.backbone = {backbone!r}'],
  )
  assert result['global_step'] == 2
  for name in (
      'masked_lm_accuracy',
      'rtd_loss',
      'discriminator_auc',
      'replaced_fraction',
  ):
    assert np.isfinite(result['eval'][name]), name
  # A training checkpoint fine-tunes as the encoder exported at its step
  # (learning curves): ckpt-2 restores the export's weights, ckpt-1 others.
  weights = {}
  for name in ('ckpt-1', 'ckpt-2', ''):
    resolved = pretrained.resolve(os.path.join(tmp_path, name))
    assert resolved.config.backbone == backbone
    encoder = encoders.build_encoder(resolved.config)
    pretrained.restore(encoder, resolved.checkpoint_path)
    weights[name] = encoder.get_weights()
  assert resolved.checkpoint_path.endswith('encoder-2')
  for exported, at_step_2 in zip(weights[''], weights['ckpt-2']):
    np.testing.assert_array_equal(exported, at_step_2)
  assert any(
      not np.array_equal(a, b) for a, b in zip(weights['ckpt-1'], weights[''])
  )
