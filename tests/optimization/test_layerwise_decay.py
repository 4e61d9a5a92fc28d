"""Layer-wise learning-rate decay: depths per variable and the scaled update."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from official.nlp.modeling import models
from official_repro.modeling.networks import encoders
from official_repro.optimization import layerwise_decay
from official_repro.optimization import warmup_times_decay

NUM_LAYERS = 3


def _classifier(backbone):
  config = encoders.EncoderConfig(
      backbone=backbone,
      hidden_size=16,
      num_layers=NUM_LAYERS,
      num_attention_heads=2,
      intermediate_size=32,
      embedding_width=8,
      vocab_size=40,
      max_position_embeddings=16,
  )
  encoder = encoders.build_encoder(config)
  return models.BertClassifier(network=encoder, num_classes=2), encoder


def test_bert_depths_follow_electra():
  model, encoder = _classifier('bert')
  depths = layerwise_decay.variable_depths(model, encoder)
  head = NUM_LAYERS + 2
  for name, depth in depths.items():
    if name.startswith('transformer/layer_'):
      layer = int(name.split('/')[1].split('_')[1])
      assert depth == layer + 1, name
    elif name.startswith(
        (
            'word_embeddings',
            'position_embedding',
            'type_embeddings',
            'embeddings/layer_norm',
            'embedding_projection',
        )
    ):
      assert depth == 0, name
    else:  # The pooler and the classifier are the task head.
      assert name.startswith(('pooler_transform', 'sentence_prediction')), name
      assert depth == head, name
  assert sorted(set(depths.values())) == [0, 1, 2, 3, head]


def test_shared_albert_block_gets_the_deepest_depth():
  model, encoder = _classifier('albert')
  depths = layerwise_decay.variable_depths(model, encoder)
  shared = {d for n, d in depths.items() if n.startswith('shared_transformer')}
  assert shared == {NUM_LAYERS}
  assert depths['word_embeddings/embeddings:0'] == 0


def test_multipliers_are_decay_to_the_distance_from_the_head():
  depths = {'emb:0': 0, 'layer0:0': 1, 'layer2:0': 3, 'head:0': 5}
  multipliers = layerwise_decay.layerwise_multipliers(depths, 3, 0.8)
  assert multipliers == pytest.approx(
      {'emb:0': 0.8**5, 'layer0:0': 0.8**4, 'layer2:0': 0.8**2, 'head:0': 1.0}
  )
  assert set(
      layerwise_decay.layerwise_multipliers(depths, 3, None).values()
  ) == {1.0}
  with pytest.raises(ValueError, match='layerwise_lr_decay'):
    layerwise_decay.layerwise_multipliers(depths, 3, 1.5)


def test_replica_suffix_is_ignored():
  assert (
      layerwise_decay.canonical_variable_name(
          'transformer/layer_0/output/kernel/replica_1:0'
      )
      == 'transformer/layer_0/output/kernel:0'
  )
  assert layerwise_decay.canonical_variable_name('a/replica_b:0') == (
      'a/replica_b:0'
  )


@pytest.mark.parametrize('weight_decay_rate', [0.0, 0.1])
def test_update_is_scaled_by_the_multiplier(weight_decay_rate):
  """Adam's first step moves each weight by lr*m; decay is scaled alike."""
  low = tf.Variable(np.ones(3, np.float32), name='low')
  full = tf.Variable(np.ones(3, np.float32), name='full')
  optimizer = layerwise_decay.LayerwiseAdamWeightDecay(
      lr_multipliers={'low:0': 0.25},
      learning_rate=0.1,
      epsilon=1e-12,
      weight_decay_rate=weight_decay_rate,
      gradient_clip_norm=0.0,
  )
  gradient = tf.constant([0.5, -2.0, 3.0])
  optimizer.apply_gradients([(gradient, low), (gradient, full)])
  # First Adam step: m/sqrt(v) = sign(g); decoupled decay adds wd * w.
  step = 0.1 * (np.sign(gradient.numpy()) + weight_decay_rate)
  np.testing.assert_allclose(1.0 - full.numpy(), step, rtol=1e-5)
  np.testing.assert_allclose(1.0 - low.numpy(), 0.25 * step, rtol=1e-5)


def test_unknown_encoder_layout():
  encoder = tf_keras.Sequential(name='plain')
  with pytest.raises(ValueError, match='transformer_layers'):
    layerwise_decay.encoder_layers(encoder)


def test_config_round_trip_keeps_hyperparameters_and_multipliers():
  optimizer = layerwise_decay.LayerwiseAdamWeightDecay(
      lr_multipliers={'low:0': 0.25, 'mid:0': 0.5},
      learning_rate=3e-4,
      weight_decay_rate=0.01,
      epsilon=1e-6,
      beta_2=0.98,
      exclude_from_weight_decay=['LayerNorm', 'bias'],
      gradient_clip_norm=0.5,
  )
  config = optimizer.get_config()
  clone = layerwise_decay.LayerwiseAdamWeightDecay.from_config(config)
  assert clone.get_config() == config
  assert clone.lr_multipliers == {'low:0': 0.25, 'mid:0': 0.5}
  assert (
      config['weight_decay_rate'],
      config['epsilon'],
      config['beta_2'],
      config['gradient_clip_norm'],
  ) == (0.01, 1e-6, 0.98, 0.5)
  assert config['learning_rate'] == pytest.approx(3e-4)
  # The exclusions act in the clone: LayerNorm and biases are not decayed.
  assert clone._do_use_weight_decay('dense/kernel')  # pylint: disable=protected-access
  assert not clone._do_use_weight_decay('dense/bias')  # pylint: disable=protected-access
  restored = tf_keras.optimizers.deserialize(
      tf_keras.optimizers.serialize(optimizer), use_legacy_optimizer=True
  )
  assert isinstance(restored, layerwise_decay.LayerwiseAdamWeightDecay)
  assert restored.get_config() == config


def test_config_round_trip_keeps_the_original_update_and_schedule():
  optimizer = layerwise_decay.LayerwiseAdamWeightDecay(
      lr_multipliers={},
      learning_rate=warmup_times_decay.WarmupTimesPolynomialDecay(
          1e-4, 100, 10
      ),
      bias_correction=False,
  )
  restored = tf_keras.optimizers.deserialize(
      tf_keras.optimizers.serialize(optimizer), use_legacy_optimizer=True
  )
  assert restored.bias_correction is False
  schedule = restored._get_hyper('learning_rate')  # pylint: disable=protected-access
  assert isinstance(schedule, warmup_times_decay.WarmupTimesPolynomialDecay)
  assert (
      schedule.get_config()
      == optimizer._get_hyper(  # pylint: disable=protected-access
          'learning_rate'
      ).get_config()
  )
