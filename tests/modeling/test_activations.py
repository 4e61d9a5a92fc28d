"""Activation names and the fused GELUs, against closed forms."""

import math

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from official_repro.metrics import flops
from official_repro.modeling import activations

_X = np.concatenate(
    [
        np.linspace(-12.0, 12.0, 97),
        np.random.default_rng(0).normal(size=200) * 3.0,
    ]
)


def _gelu_tanh_numpy(x):
  return (
      0.5
      * x
      * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
  )


def _gelu_erf_numpy(x):
  return np.array([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x])


_CLOSED_FORMS = dict(gelu_tanh=_gelu_tanh_numpy, gelu_erf=_gelu_erf_numpy)


@pytest.mark.parametrize('name', ['gelu_tanh', 'gelu_erf'])
def test_values_equal_the_closed_form(name):
  got = activations.get(name)(tf.constant(_X, tf.float32)).numpy()
  np.testing.assert_allclose(got, _CLOSED_FORMS[name](_X), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('name', ['gelu_tanh', 'gelu_erf'])
def test_gradient_equals_central_differences(name):
  # In float64 the hand-written derivative must match the closed form's
  # finite differences to the differencing error.
  x = tf.constant(_X, tf.float64)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = activations.get(name)(x)
  got = tape.gradient(y, x).numpy()
  step = 1e-6
  expected = (
      _CLOSED_FORMS[name](_X + step) - _CLOSED_FORMS[name](_X - step)
  ) / (2 * step)
  np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    'name, approximate', [('gelu_tanh', True), ('gelu_erf', False)]
)
def test_forward_and_backward_match_keras_in_a_graph(name, approximate):
  x = tf.constant(
      np.random.default_rng(1).normal(size=(2, 5, 8)) * 2, tf.float32
  )
  upstream = tf.constant(
      np.random.default_rng(2).normal(size=(2, 5, 8)), tf.float32
  )

  @tf.function
  def value_and_gradient(function):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = function(x)
    return y, tape.gradient(y, x, output_gradients=upstream)

  ours = value_and_gradient(activations.get(name))
  keras = value_and_gradient(
      lambda t: tf_keras.activations.gelu(t, approximate=approximate)
  )
  for got, expected in zip(ours, keras):
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('dtype', [tf.bfloat16, tf.float16])
def test_mixed_precision_dtypes_pass_through(dtype):
  x = tf.constant(_X[:16], dtype)
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = activations.gelu_tanh(x)
  gradient = tape.gradient(y, x)
  assert y.dtype == gradient.dtype == dtype
  np.testing.assert_allclose(
      tf.cast(y, tf.float32), _gelu_tanh_numpy(_X[:16]), rtol=2e-2, atol=2e-2
  )


def test_bare_gelu_is_rejected_and_names_resolve():
  with pytest.raises(ValueError, match='ambiguous'):
    activations.check_name('gelu', 'encoder.hidden_activation')
  with pytest.raises(ValueError, match="'gelu_fast' is not a known"):
    activations.check_name('gelu_fast')
  assert activations.model_garden_name('gelu_tanh') == 'gelu'
  assert activations.get('relu')(tf.constant([-1.0, 2.0])).numpy().tolist() == [
      0.0,
      2.0,
  ]


def test_keras_serialization_round_trip():
  layer = tf_keras.layers.Dense(3, activation=activations.gelu_tanh)
  restored = tf_keras.layers.Dense.from_config(layer.get_config())
  assert restored.activation is activations.gelu_tanh


def test_profiler_flops_count_sees_past_the_fused_gelu():
  def model(activation):
    inputs = tf_keras.Input([8])
    hidden = tf_keras.layers.Dense(16, activation=activation)(inputs)
    return tf_keras.Model({'x': inputs}, tf_keras.layers.Dense(4)(hidden))

  specs = {'x': tf.TensorSpec([1, 8])}
  keras_count = flops.profiled_forward_flops(
      model(lambda x: tf_keras.activations.gelu(x, approximate=True)), specs
  )
  # Both dense layers (2 x 8 x 16 + 16 and 2 x 16 x 4 + 4) and the GELU.
  assert keras_count > 272 + 132
  assert (
      flops.profiled_forward_flops(model(activations.gelu_tanh), specs)
      == keras_count
  )
  # Outside the profiler the activation is the fused one again.
  with tf.GradientTape() as tape:
    x = tf.constant([0.5])
    tape.watch(x)
    y = activations.gelu_tanh(x)
  assert activations._fused  # pylint: disable=protected-access
  np.testing.assert_allclose(tape.gradient(y, x), [0.8673], atol=1e-4)


@pytest.mark.parametrize('name', ['gelu_tanh', 'gelu_erf'])
def test_graphs_call_the_compiled_kernels_unless_unfused(name):
  def xla_calls(function):
    graph = (
        tf.function(function).get_concrete_function(tf.TensorSpec([2, 3])).graph
    )
    return [
        op
        for op in graph.get_operations()
        if op.type in ('PartitionedCall', 'StatefulPartitionedCall')
        and op.get_attr('_XlaMustCompile')
    ]

  activation = activations.get(name)
  assert xla_calls(activation)
  with activations.unfused():
    assert not xla_calls(activation)


def test_keras_functional_inputs_take_keras_ops():
  inputs = tf_keras.Input([4])
  model = tf_keras.Model(inputs, activations.gelu_tanh(inputs))
  np.testing.assert_allclose(
      model(np.ones([1, 4], np.float32)),
      _gelu_tanh_numpy(np.ones([1, 4])),
      rtol=1e-5,
  )


@pytest.mark.parametrize('name', ['gelu_tanh', 'gelu_erf'])
def test_building_a_functional_model_traces_no_compiled_kernel(name):
  # A kernel traced in Keras' shape-inference graph keeps that graph and the
  # layer's weights alive for the life of the process. float64: a dtype no
  # other test traces, so an earlier trace cannot hide one here.
  forward = getattr(activations, f'_{name}_forward')
  before = forward.experimental_get_tracing_count()
  inputs = tf_keras.Input([4], dtype=tf.float64)
  dense = tf_keras.layers.Dense(
      4, activation=activations.get(name), dtype=tf.float64
  )
  tf_keras.Model(inputs, dense(inputs))
  assert forward.experimental_get_tracing_count() == before
