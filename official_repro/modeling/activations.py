"""Activation names with one meaning each.

`'gelu'` means the tanh approximation in Model Garden
(`tf_utils.get_activation`) and in the BERT, ELECTRA and ALBERT reference
code, but the exact erf form in Keras and in the ConvBERT reference. Configs
of this repository therefore name the form: `'gelu_tanh'` or `'gelu_erf'`;
a bare `'gelu'` is rejected. Other names (`'relu'`, `'tanh'`, ...) are
Model Garden's.
"""

from typing import Callable

import tensorflow as tf
import tf_keras

from official.modeling import tf_utils


@tf_keras.utils.register_keras_serializable(package='official_repro')
def gelu_tanh(x: tf.Tensor) -> tf.Tensor:
  """GELU, tanh approximation (BERT, ELECTRA, ALBERT reference code)."""
  return tf_keras.activations.gelu(x, approximate=True)


@tf_keras.utils.register_keras_serializable(package='official_repro')
def gelu_erf(x: tf.Tensor) -> tf.Tensor:
  """GELU, exact erf form (ConvBERT reference code)."""
  return tf_keras.activations.gelu(x, approximate=False)


_OWN = dict(gelu_tanh=gelu_tanh, gelu_erf=gelu_erf)

# Model Garden's names (`tf_utils.get_activation`) for ours that it has.
_MODEL_GARDEN_NAMES = dict(gelu_tanh='gelu')


def check_name(name: str, setting: str = 'activation') -> str:
  """Returns `name` if it is a known, unambiguous activation name.

  Args:
    name: the activation name.
    setting: how error messages name the setting (e.g. 'encoder.hidden_activation').

  Raises:
    ValueError: for 'gelu' (ambiguous) or a name nobody defines.
  """
  if name == 'gelu':
    raise ValueError(
        f"{setting}='gelu' is ambiguous (tanh approximation in BERT/ELECTRA/"
        "ALBERT, exact erf in ConvBERT): use 'gelu_tanh' or 'gelu_erf'.")
  if name not in _OWN:
    try:
      tf_utils.get_activation(name)
    except ValueError as error:
      raise ValueError(f'{setting}={name!r} is not a known activation.'
                       ) from error
  return name


def get(name: str) -> Callable[[tf.Tensor], tf.Tensor]:
  """The activation function of a name (see `check_name`)."""
  check_name(name)
  return _OWN.get(name) or tf_utils.get_activation(name)


def model_garden_name(name: str) -> str:
  """The name Model Garden's configs use for activation `name`.

  Raises:
    ValueError: for the exact GELU, which Model Garden's configs cannot name.
  """
  check_name(name)
  if name == 'gelu_erf':
    raise ValueError("Model Garden's configs have no exact (erf) GELU; use "
                     "'gelu_tanh'.")
  return _MODEL_GARDEN_NAMES.get(name, name)
