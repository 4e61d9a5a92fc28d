"""Activation names with one meaning each.

`'gelu'` is the tanh approximation in Model Garden and the BERT, ELECTRA and
ALBERT references but the exact erf form in Keras and ConvBERT, so configs
name the form (`'gelu_tanh'`, `'gelu_erf'`) and a bare `'gelu'` is rejected;
other names are Model Garden's. Both GELUs run as one XLA-compiled kernel
forward and one hand-derived backward (`tf.custom_gradient`; not on TPUs),
which cut the activation's share of an ELECTRA-small CPU step
(`experiments/reports/profile_electra_small.md`). The TF profiler cannot see
through compiled calls, so `profiled_forward_flops` traces inside
`unfused()`.
"""

import contextlib
import math
from typing import Callable, Iterator

import tensorflow as tf
import tf_keras

from official.modeling import tf_utils

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_TANH_CUBIC = 0.044715
_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@tf.function(jit_compile=True, reduce_retracing=True)
def _gelu_tanh_forward(x):
  """Tanh GELU `0.5 x (1 + tanh(u))` and `tanh(u)`, u = sqrt(2/pi)(x + cx^3)."""
  tanh_u = tf.tanh(_SQRT_2_OVER_PI * (x + _TANH_CUBIC * x * x * x))
  return 0.5 * x * (1.0 + tanh_u), tanh_u


@tf.function(jit_compile=True, reduce_retracing=True)
def _gelu_tanh_backward(upstream, x, tanh_u):
  """`0.5 (1 + t) + 0.5 x (1 - t^2) du/dx`, the tanh GELU's derivative."""
  du_dx = _SQRT_2_OVER_PI * (1.0 + 3.0 * _TANH_CUBIC * x * x)
  return upstream * (
      0.5 * (1.0 + tanh_u) + 0.5 * x * (1.0 - tanh_u * tanh_u) * du_dx
  )


@tf.function(jit_compile=True, reduce_retracing=True)
def _gelu_erf_forward(x):
  """`0.5 x (1 + erf(x / sqrt(2)))`."""
  return 0.5 * x * (1.0 + tf.math.erf(x * _SQRT_HALF))


@tf.function(jit_compile=True, reduce_retracing=True)
def _gelu_erf_backward(upstream, x):
  """`d/dx = Phi(x) + x phi(x)`."""
  cdf = 0.5 * (1.0 + tf.math.erf(x * _SQRT_HALF))
  pdf = _INV_SQRT_2PI * tf.exp(-0.5 * x * x)
  return upstream * (cdf + x * pdf)


_fused = True


@contextlib.contextmanager
def unfused() -> Iterator[None]:
  """GELUs traced inside are Keras' unfused ops (for graph analysis)."""
  global _fused
  previous, _fused = _fused, False
  try:
    yield
  finally:
    _fused = previous


def _in_keras_shape_inference() -> bool:
  """Whether Keras is inferring a functional layer's output shape.

  A compiled function traced in Keras' `<layer>_scratch_graph` would keep
  that graph, and every weight read, in its cache forever.
  """
  graph = tf.compat.v1.get_default_graph()
  return getattr(graph, 'name', '').endswith('_scratch_graph')


def _use_fused(x) -> bool:
  """Fuse a TF tensor outside `unfused()`, shape inference and TPUs."""
  return (
      _fused
      and isinstance(x, tf.Tensor)
      and not _in_keras_shape_inference()
      and not isinstance(
          tf.distribute.get_strategy(), tf.distribute.TPUStrategy
      )
  )


@tf.custom_gradient
def _fused_gelu_tanh(x):
  output, tanh_u = _gelu_tanh_forward(x)
  return output, lambda upstream: _gelu_tanh_backward(upstream, x, tanh_u)


@tf.custom_gradient
def _fused_gelu_erf(x):
  return _gelu_erf_forward(x), lambda upstream: _gelu_erf_backward(upstream, x)


@tf_keras.utils.register_keras_serializable(package='official_repro')
def gelu_tanh(x: tf.Tensor) -> tf.Tensor:
  """GELU, tanh approximation (BERT, ELECTRA, ALBERT reference code)."""
  if not _use_fused(x):
    return tf_keras.activations.gelu(x, approximate=True)
  return _fused_gelu_tanh(x)


@tf_keras.utils.register_keras_serializable(package='official_repro')
def gelu_erf(x: tf.Tensor) -> tf.Tensor:
  """GELU, exact erf form (ConvBERT reference code)."""
  if not _use_fused(x):
    return tf_keras.activations.gelu(x, approximate=False)
  return _fused_gelu_erf(x)


_OWN = dict(gelu_tanh=gelu_tanh, gelu_erf=gelu_erf)

# Model Garden's names (`tf_utils.get_activation`) for ours that it has.
_MODEL_GARDEN_NAMES = dict(gelu_tanh='gelu')


def check_name(name: str, setting: str = 'activation') -> str:
  """Returns `name` if it is a known, unambiguous activation name.

  `setting` names the setting in error messages (e.g. 'hidden_activation').
  """
  if name == 'gelu':
    raise ValueError(
        f"{setting}='gelu' is ambiguous (tanh approximation in BERT/ELECTRA/"
        "ALBERT, exact erf in ConvBERT): use 'gelu_tanh' or 'gelu_erf'."
    )
  if name not in _OWN:
    try:
      tf_utils.get_activation(name)
    except ValueError as error:
      raise ValueError(
          f'{setting}={name!r} is not a known activation.'
      ) from error
  return name


def get(name: str) -> Callable[[tf.Tensor], tf.Tensor]:
  """The activation function of a name (see `check_name`)."""
  check_name(name)
  return _OWN.get(name) or tf_utils.get_activation(name)


def model_garden_name(name: str) -> str:
  """The name Model Garden's configs use for `name` (the exact GELU: none)."""
  check_name(name)
  if name == 'gelu_erf':
    raise ValueError(
        "Model Garden's configs have no exact (erf) GELU; use " "'gelu_tanh'."
    )
  return _MODEL_GARDEN_NAMES.get(name, name)
