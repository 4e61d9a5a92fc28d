"""TEAMS task: loss, metrics, layer sharing, FLOPs terms, training, export."""

import random

import numpy as np
import pytest
import tensorflow as tf

from official.nlp.configs import encoders as mg_encoders
from official_repro.metrics import flops
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import pretrained
from official_repro.tasks import objectives
from official_repro.tasks import teams
from tests.training import test_finetuning as finetuning_fixtures


def _log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _labels_and_outputs():
  rng = np.random.RandomState(0)
  labels = dict(
      masked_lm_ids=tf.constant([[1, 2], [0, 2]]),
      masked_lm_weights=tf.constant([[1.0, 1.0], [1.0, 0.0]]),
      masked_lm_positions=tf.constant([[1, 2], [0, 0]]),
      input_mask=tf.constant([[1, 1, 1, 0], [1, 1, 0, 0]]),
  )
  outputs = dict(
      mlm_logits=tf.constant(rng.normal(size=(2, 2, 3)), tf.float32),
      rtd_logits=tf.constant(rng.normal(size=(2, 4)), tf.float32),
      rtd_labels=tf.constant([[0, 1, 0, 1], [1, 0, 0, 0]]),
      mws_logits=tf.constant(rng.normal(size=(2, 2, 4)), tf.float32),
  )
  return labels, outputs


def test_loss_is_mlm_plus_lambda1_rtd_plus_lambda2_mws():
  labels, outputs = _labels_and_outputs()
  weights = labels['masked_lm_weights'].numpy()
  ids = labels['masked_lm_ids'].numpy()
  mlm_nll = -np.take_along_axis(
      _log_softmax(outputs['mlm_logits'].numpy()), ids[..., None], -1
  )[..., 0]
  mlm = (mlm_nll * weights).sum() / weights.sum()
  logits = outputs['rtd_logits'].numpy()
  targets = outputs['rtd_labels'].numpy()
  probability = 1 / (1 + np.exp(-logits))
  bce = -(
      targets * np.log(probability) + (1 - targets) * np.log(1 - probability)
  )
  real = labels['input_mask'].numpy()
  rtd = (bce * real).sum() / real.sum()  # over the 5 real tokens
  mws_nll = -_log_softmax(outputs['mws_logits'].numpy())[..., 0]
  mws = (mws_nll * weights).sum() / weights.sum()  # the 3 real slots
  for generator, lambda1, lambda2 in (
      (1.0, 5.0, 2.0),
      (1.0, 0.0, 2.0),
      (0.5, 5.0, 0.0),
  ):
    task = teams.TeamsPretrainTask(
        teams.TeamsPretrainConfig(
            model=teams.TeamsModelConfig(
                generator_loss_weight=generator,
                rtd_loss_weight=lambda1,
                mws_loss_weight=lambda2,
            )
        )
    )
    metrics = task.build_metrics()
    loss = task.build_losses(labels, outputs, metrics).numpy()
    np.testing.assert_allclose(
        loss, generator * mlm + lambda1 * rtd + lambda2 * mws, rtol=1e-5
    )
    by_name = {m.name: m.result().numpy() for m in metrics}
    np.testing.assert_allclose(by_name['rtd_loss'], rtd, rtol=1e-5)
    np.testing.assert_allclose(by_name['mws_loss'], mws, rtol=1e-5)


def test_mws_accuracy_counts_real_slots_where_the_original_wins():
  labels, outputs = _labels_and_outputs()
  outputs['mws_logits'] = tf.constant(
      [
          [[3.0, 1.0, 0.0, 2.0], [0.0, 1.0, 0.0, 0.0]],
          [[5.0, 1.0, 1.0, 1.0], [0.0, 9.0, 0.0, 0.0]],
      ]
  )  # last slot is padding
  task = teams.TeamsPretrainTask(teams.TeamsPretrainConfig())
  metrics = task.build_metrics()
  task.process_metrics(
      metrics, labels, dict(outputs, masked_lm_ids=labels['masked_lm_ids'])
  )
  by_name = {m.name: m.result().numpy() for m in metrics}
  assert by_name['mws_accuracy'] == pytest.approx(2 / 3)


def _small_config(**model):
  encoder = encoders.EncoderConfig(
      hidden_size=256,
      num_layers=12,
      num_attention_heads=4,
      intermediate_size=1024,
      embedding_width=128,
      vocab_size=30522,
  )
  model.setdefault('generator_layer_fraction', 0.5)
  model.setdefault('layer_sharing', 'partial')
  model.setdefault('num_negatives', 5)
  return teams.TeamsPretrainConfig(
      model=teams.TeamsModelConfig(discriminator=encoder, **model)
  )


def test_generator_and_exported_discriminator_configs():
  config = _small_config()
  assert config.model.generator().num_layers == 6
  assert config.model.generator().hidden_size == 256
  assert config.model.num_shared_layers() == 3
  assert config.model.exported_discriminator().num_layers == 12
  on_top = _small_config(task_heads='attention_on_top')
  assert on_top.model.exported_discriminator().num_layers == 13
  objective = objectives.get('teams')
  assert objective.exported_encoder_config(on_top.model).num_layers == 13


def test_generator_num_layers_replaces_the_fraction_left_at_1():
  config = _small_config(generator_layer_fraction=1.0, generator_num_layers=4)
  assert config.model.generator().num_layers == 4
  assert config.model.num_shared_layers() == 2  # 'partial': 4 // 2


def test_unknown_layer_sharing_is_refused():
  config = _small_config(layer_sharing='half')
  with pytest.raises(ValueError, match=r'^num_shared_layers_for: layer_shar'):
    config.model.num_shared_layers()
  with pytest.raises(ValueError, match=r"^teams.layer_sharing='half'"):
    teams.OBJECTIVE.finalized(config)


def test_generator_num_layers_and_a_fraction_are_refused_together():
  config = _small_config(generator_num_layers=4)  # and the fraction 0.5
  with pytest.raises(
      ValueError,
      match=r'^generator_depth: generator_num_layers=4 and '
      r'generator_layer_fraction=0\.5',
  ):
    config.model.generator()
  with pytest.raises(
      ValueError,
      match=r'^teams\.generator_num_layers=4 and '
      r'teams\.generator_layer_fraction=0\.5',
  ):
    teams.OBJECTIVE.finalized(config)


@pytest.mark.parametrize(
    'settings, message',
    [
        (
            dict(task_heads='conv'),
            "teams.task_heads='conv'; expected one of ['attention', ",
        ),
        (
            dict(num_negatives=0),
            'teams.num_negatives must be a positive int (K, the non-original '
            'candidates), got 0.',
        ),
        (
            dict(task_heads='ffn', exported_representations='rtd'),
            "teams.exported_representations='rtd' needs attention task heads: "
            "with teams.task_heads='ffn'",
        ),
        (dict(temperature=-1.0), 'teams.temperature must be > 0, got -1.0.'),
    ],
)
def test_the_pretrainers_settings_are_checked_when_read(settings, message):
  """Refused by binding when the config is read, before a model is built."""
  with pytest.raises(ValueError) as raised:
    teams.OBJECTIVE.finalized(_small_config(**settings))
  assert str(raised.value).startswith(message), str(raised.value)


def test_flops_add_the_mws_head_and_the_task_layer_to_electras_terms():
  seq, predictions = 512, 76
  config = _small_config()
  terms = objectives.get('teams').flops(config, seq, predictions)
  assert set(terms) == {'generator', 'discriminator'}
  discriminator = terms['discriminator'].shape
  assert terms['generator'].shape.layers == 6
  assert terms['generator'].shape.hidden == 256
  # The MWS head by hand: transform (dense 256 -> 128 with bias, GELU 8,
  # LayerNorm 5 per element), 6 dot products of width 128, softmax of 6
  # (5 each) and the loss (2 each), at 76 of 512 tokens.
  mws = (
      76
      / 512
      * (2 * 256 * 128 + 128 + 8 * 128 + 5 * 128 + 2 * 128 * 6 + 5 * 6 + 2 * 6)
  )
  assert terms['discriminator'].heads['mws'] == pytest.approx(mws)
  assert terms['discriminator'].heads['task_layer'] == pytest.approx(
      flops.block_flops(discriminator)
  )
  assert terms['discriminator'].heads['rtd'] == pytest.approx(
      flops.rtd_head_flops(discriminator)
  )
  ffn = objectives.get('teams').flops(
      _small_config(task_heads='ffn'), seq, predictions
  )
  assert (
      0
      < ffn['discriminator'].heads['task_ffn_heads']
      < 2 * (flops.block_flops(discriminator))
  )
  on_top = objectives.get('teams').flops(
      _small_config(task_heads='attention_on_top'), seq, predictions
  )
  assert on_top['discriminator'].shape.layers == 13


def test_stock_config_counts_the_original_in_candidate_size():
  config = _small_config()
  stock = objectives.get('teams').stock_task_config(config, None, 76)
  assert stock.model.candidate_size == 6
  assert stock.model.num_shared_generator_hidden_layers == 3
  full = objectives.get('teams').stock_task_config(
      _small_config(layer_sharing='full'), None, 76
  )
  assert full.model.num_shared_generator_hidden_layers == 6
  assert stock.model.num_discriminator_task_agnostic_layers == 11
  assert stock.model.generator.num_layers == 6
  with pytest.raises(ValueError, match='variants=ours'):
    objectives.get('teams').stock_task_config(
        _small_config(negative_sampling='hardest'), None, 76
    )


# Every objective trains on every backbone in the slow tier
# (tests/training/test_mixed_precision.py); exporting from the other
# backbones is checked with the slow tests.
@pytest.mark.parametrize(
    'backbone',
    [
        'bert',
        pytest.param('convbert', marks=pytest.mark.slow),
        pytest.param('albert', marks=pytest.mark.slow),
    ],
)
def test_two_training_steps_and_export(
    run_tiny_pretraining, tmp_path, backbone
):
  bindings = [
      f'encoder.backbone = {backbone!r}',
      'teams.generator_layer_fraction = 1.0',
      'teams.generator_num_layers = 2',
  ]
  if backbone == 'convbert':
    bindings.append('convbert.kernel_size = 3')
  result = run_tiny_pretraining(tmp_path, ['gin/pretrain/teams.gin'], bindings)
  assert result['global_step'] == 2
  assert np.isfinite(result['train']['training_loss'])
  for name in (
      'masked_lm_accuracy',
      'rtd_loss',
      'discriminator_auc',
      'mws_loss',
      'mws_accuracy',
  ):
    assert np.isfinite(result['eval'][name]), name
  resolved = pretrained.resolve(str(tmp_path))
  assert resolved.config.backbone == backbone
  assert resolved.config.num_layers == 2
  assert resolved.checkpoint_path.endswith('encoder-2')
  if backbone == 'bert':  # The exported encoder fine-tunes (GLUE fixture).
    data_dir = finetuning_fixtures._write_glue(  # pylint: disable=protected-access
        tmp_path / 'glue', random.Random(0)
    )
    results = finetuning_fixtures._finetune(  # pylint: disable=protected-access
        'mrpc', resolved, data_dir, str(tmp_path / 'ft')
    )
    (run,) = results['runs']
    assert run['train_steps'] > 0
    assert np.isfinite(run['selected']['accuracy'])


@pytest.mark.slow
@pytest.mark.parametrize(
    'bindings, num_layers',
    [
        (["teams.exported_representations = 'rtd'"], 2),
        (["teams.task_heads = 'attention_on_top'"], 3),
    ],
)
def test_export_restores_into_model_garden_bert_encoder(
    run_tiny_pretraining, tmp_path, bindings, num_layers
):
  run_tiny_pretraining(
      tmp_path / 'run', ['gin/pretrain/teams.gin'], bindings, mode='train'
  )
  resolved = pretrained.resolve(str(tmp_path / 'run'))
  assert resolved.config.num_layers == num_layers
  stock = mg_encoders.build_encoder(
      encoders.to_model_garden_config(resolved.config)
  )
  ids = tf.constant([[2, 5, 6, 3]])
  inputs = dict(
      input_word_ids=ids,
      input_mask=tf.ones_like(ids),
      input_type_ids=tf.zeros_like(ids),
  )
  stock(inputs)
  status = tf.train.Checkpoint(encoder=stock).read(resolved.checkpoint_path)
  status.assert_existing_objects_matched()
  reader = tf.train.load_checkpoint(resolved.checkpoint_path)
  table = reader.get_tensor(
      'encoder/layer_with_weights-0/embeddings/.ATTRIBUTES/VARIABLE_VALUE'
  )
  np.testing.assert_array_equal(stock.get_embedding_table().numpy(), table)
