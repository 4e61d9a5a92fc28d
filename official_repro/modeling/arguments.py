"""Arguments of layers, models and configs: checks, errors, layer configs.

Modeling code names an argument as its caller wrote it
(`ElectraPretrainer: temperature must be > 0, got 0.0.`); code passing on
its own settings (gin bindings, flags) words the same message with their
names (`electra.temperature ...`) via `renamed`. So a message is a function
of the namer: `lambda name: f'{name("temperature")} must be > 0, ...'`.
"""

import contextlib
import inspect
from typing import Any, Callable, Dict, Iterator

import tf_keras

from official_repro.common import cli

# How a message names an argument: its name as the raiser knows it -> the
# name the reader knows.
Namer = Callable[[str], str]


def as_given(argument: str) -> str:
  """The argument's own name (the plain message)."""
  return argument


class ArgumentError(cli.UserError):
  """An argument value a layer, model or config cannot take.

  `str(error)` is `<owner>: <message>`; a `cli.UserError`, printed as one line.
  """

  def __init__(self, owner: str, message: Callable[[Namer], str]):
    """`message` is `name -> message`, naming each argument `name(argument)`."""
    self.owner = owner
    self._message = message
    super().__init__(f'{owner}: {message(as_given)}')

  def text(self, name: Namer = as_given) -> str:
    """The message without the owner, each argument named `name(argument)`."""
    return self._message(name)

  def __reduce__(self):
    # Pickled (e.g. to another process) as the plain message.
    return cli.UserError, self.args


@contextlib.contextmanager
def renamed(name: Namer) -> Iterator[None]:
  """Rewords an `ArgumentError` raised in the block with `name`.

  It becomes a `cli.UserError` (no owner) naming each argument
  `name(argument)`.
  """
  try:
    yield
  except ArgumentError as error:
    raise cli.UserError(error.text(name)) from error


def checked(owner: str, argument: str, check: Callable[[str], Any]) -> Any:
  """`check(setting name)`, its ValueError turned into an ArgumentError.

  For checks shared with callers that take the setting's name
  (`activations.check_name(value, setting)`).
  """
  try:
    return check(argument)
  except ValueError:
    pass

  def message(name: Namer) -> str:
    try:
      check(name(argument))
    except ValueError as error:
      return str(error)
    raise AssertionError(f'{check} passed the second time.')

  raise ArgumentError(owner, message)


def check_sizes(**sizes: int) -> None:
  """Raises ValueError naming the first of `sizes` below 1."""
  for name, size in sizes.items():
    if size < 1:
      raise ValueError(f'{name} must be >= 1, got {name}={size}.')


def check_rates(**rates: float) -> None:
  """Raises ValueError naming the first of `rates` (dropout) outside [0, 1)."""
  for name, rate in rates.items():
    if not 0.0 <= rate < 1.0:
      raise ValueError(f'{name} must be in [0, 1), got {name}={rate}.')


def check_divisible(divisor: str, value: int, **sizes: int) -> None:
  """Raises ValueError naming the first of `sizes` `value` does not divide."""
  for name, size in sizes.items():
    if size % value:
      raise ValueError(f'{name}={size} must be divisible by {divisor}={value}.')


class ConfigFromArguments:
  """Keras layer mixin: `get_config` is every constructor argument.

  Each argument is read back from `self._<name>`; initializers and callables
  (activations) are serialized.
  """

  def get_config(self) -> Dict[str, Any]:
    config = super().get_config()
    parameters = inspect.signature(type(self).__init__).parameters
    for name, parameter in list(parameters.items())[1:]:  # After `self`.
      if parameter.kind == parameter.VAR_KEYWORD:
        continue
      value = getattr(self, f'_{name}')
      if isinstance(value, tf_keras.initializers.Initializer):
        value = tf_keras.initializers.serialize(value)
      elif callable(value):
        value = tf_keras.activations.serialize(value)
      config[name] = value
    return config
