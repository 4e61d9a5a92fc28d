"""Errors about the arguments a layer, model or config was given.

Modeling code checks what it is given and names it as its caller wrote it:
`ElectraPretrainer: temperature must be > 0, got 0.0.` It knows nothing of
where the value came from. Code that passes on values of its own settings
(the configuration files' bindings, a command's flags) catches the error and
words the same message with the names of those settings instead
(`electra.temperature must be > 0, got 0.0.`), so that the user is told what
to change.

So an `ArgumentError`'s message is a function of how each argument is named:
the raising code writes it once, as `lambda name: f'{name("temperature")}
must be > 0, got {temperature}.'`, and `str(error)` names every argument as
given. `renamed` words it with other names, in a `with` block around the
calls whose arguments the caller knows.
"""

import contextlib
from typing import Any, Callable, Iterator

from official_repro.common import cli

# How a message names an argument: its name as the raiser knows it -> the
# name the reader knows.
Namer = Callable[[str], str]


def as_given(argument: str) -> str:
  """The argument's own name (the plain message)."""
  return argument


class ArgumentError(cli.UserError):
  """An argument value a layer, model or config cannot take.

  `str(error)` is `<owner>: <message>`, the arguments named as given. A
  `cli.UserError` (so a `ValueError`): a command prints it as one line.

  Attributes:
    owner: what takes the arguments ('ElectraPretrainer', 'EncoderConfig').
  """

  def __init__(self, owner: str, message: Callable[[Namer], str]):
    """Makes the error.

    Args:
      owner: what takes the arguments.
      message: `name -> message`, naming each argument `name(argument)`.
    """
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

  For the caller that knows what the arguments it passes are called where
  they came from: the error becomes a `cli.UserError` whose message (no
  owner) names each argument `name(argument)`.

  Args:
    name: the names of the caller's settings.

  Raises:
    UserError: for an `ArgumentError` in the block.
  """
  try:
    yield
  except ArgumentError as error:
    raise cli.UserError(error.text(name)) from error


def checked(owner: str, argument: str, check: Callable[[str], Any]) -> Any:
  """Runs a check that names what it checks; its error becomes an ArgumentError.

  For checks shared with other callers that take the name of the setting
  they check (`activations.check_name(value, setting)`).

  Args:
    owner: what takes the argument.
    argument: the argument `check` checks.
    check: `setting name -> result`; raises `ValueError` naming the
      setting.

  Returns:
    What `check` returns.

  Raises:
    ArgumentError: `check`'s message, naming `argument`.
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
