"""GroupedDense checked against independent Dense layers on split inputs."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from official_repro.modeling.layers import grouped_dense


def _random_weights(layer, seed=0):
  rng = np.random.default_rng(seed)
  layer.set_weights(
      [rng.normal(size=w.shape).astype(np.float32) for w in layer.get_weights()]
  )


def test_groups_one_equals_dense_with_same_parameter_count():
  inputs = np.random.default_rng(1).normal(size=(2, 3, 6)).astype(np.float32)
  grouped = grouped_dense.GroupedDense(4, groups=1)
  grouped(inputs)
  _random_weights(grouped)
  dense = tf_keras.layers.Dense(4)
  dense(inputs)
  kernel, bias = grouped.get_weights()
  dense.set_weights([kernel[0], bias])
  assert grouped.count_params() == dense.count_params() == 6 * 4 + 4
  np.testing.assert_allclose(
      grouped(inputs), dense(inputs), rtol=1e-5, atol=1e-5
  )


@pytest.mark.parametrize('groups', [2, 3])
def test_equals_independent_dense_layers_on_split_input(groups):
  in_features, units = 3 * groups, 4 * groups
  inputs = (
      np.random.default_rng(2)
      .normal(size=(2, 5, in_features))
      .astype(np.float32)
  )
  grouped = grouped_dense.GroupedDense(units, groups=groups)
  grouped(inputs)
  _random_weights(grouped)
  kernel, bias = grouped.get_weights()
  assert kernel.shape == (groups, in_features // groups, units // groups)

  pieces = []
  group_in, group_out = in_features // groups, units // groups
  for g in range(groups):
    dense = tf_keras.layers.Dense(group_out)
    piece = inputs[..., g * group_in : (g + 1) * group_in]
    dense(piece)
    dense.set_weights([kernel[g], bias[g * group_out : (g + 1) * group_out]])
    pieces.append(dense(piece).numpy())
  np.testing.assert_allclose(
      grouped(inputs), np.concatenate(pieces, -1), rtol=1e-5, atol=1e-5
  )
  assert grouped.count_params() == in_features * units // groups + units


def test_hand_computed_two_groups_do_not_mix():
  layer = grouped_dense.GroupedDense(2, groups=2, use_bias=False)
  layer(tf.zeros([1, 4]))
  # Group 0 sums its two inputs, group 1 takes 10x its first input.
  layer.set_weights([np.array([[[1.0], [1.0]], [[10.0], [0.0]]], np.float32)])
  out = layer(tf.constant([[1.0, 2.0, 3.0, 4.0]])).numpy()
  np.testing.assert_allclose(out, [[3.0, 30.0]])
  assert layer.bias is None


def test_unknown_batch_and_length_in_graph_mode():
  layer = grouped_dense.GroupedDense(4, groups=2)
  fn = tf.function(
      layer, input_signature=[tf.TensorSpec([None, None, 6], tf.float32)]
  )
  out = fn(tf.ones([3, 2, 6]))
  assert out.shape == (3, 2, 4)
  assert fn.get_concrete_function().structured_outputs.shape.as_list() == [
      None,
      None,
      4,
  ]


def test_input_features_not_divisible_by_groups_fails_at_build():
  layer = grouped_dense.GroupedDense(4, groups=2)
  with pytest.raises(ValueError, match=r'in_features=5 .*groups=2'):
    layer(tf.zeros([1, 5]))


@pytest.mark.parametrize(
    'units,groups,pattern',
    [
        (5, 2, r'units=5 .*groups=2'),
        (4, 0, r'groups=0'),
        (0, 1, r'units=0'),
    ],
)
def test_bad_construction_arguments(units, groups, pattern):
  with pytest.raises(ValueError, match=pattern):
    grouped_dense.GroupedDense(units, groups=groups)


def test_get_config_round_trip():
  layer = grouped_dense.GroupedDense(
      6,
      groups=3,
      use_bias=False,
      kernel_initializer=tf_keras.initializers.TruncatedNormal(stddev=0.05),
      name='gl',
  )
  config = layer.get_config()
  restored = grouped_dense.GroupedDense.from_config(config)
  assert restored.get_config() == config
  assert config['groups'] == 3 and config['units'] == 6
  revived = tf_keras.layers.deserialize(tf_keras.layers.serialize(layer))
  assert isinstance(revived, grouped_dense.GroupedDense)
  assert revived.get_config() == config
