"""Parsing gin files with clear errors, and saving the operative config."""

import difflib
import importlib
import inspect
import os
import re
from typing import Any, List, Sequence, Union
import typing

import gin
import tensorflow as tf

from official_repro.common import cli
from official_repro.common import json_files

REPO_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)

# Modules defining gin configurables outside the registries, imported (with
# the registries' packages) before parsing so an unknown name is a typo.
_CONFIGURABLE_MODULES = (
    'official_repro.data.pretrain_dataloader',
    'official_repro.optimization.optimizer_config',
    'official_repro.tasks.encoder_gin',
    'official_repro.training.experiment',
)


class GinConfigError(cli.UserError):
  """A gin file or binding could not be applied."""


_UNKNOWN_CONFIGURABLE = re.compile(r"No configurable matching '([^']+)'")
_UNKNOWN_PARAMETER = re.compile(
    r"Configurable '([^']+)' doesn't have a parameter named '([^']+)'"
)
# A field of a config dataclass that code sets (gin_dataclass's `exclude`).
_DENIED_PARAMETER = re.compile(
    r"Configurable '([^']+)' has denylisted kwarg '([^']+)'"
)


def _parameter_names(configurable: str) -> List[str]:
  """The parameters gin binds of a configurable (signature less denylist)."""
  try:
    # Private: `gin.get_configurable` returns the wrapper, not the denylist.
    info = gin.config._REGISTRY.get_match(configurable)  # pylint: disable=protected-access
    denied = set(info.denylist or ())
    return [
        name
        for name in inspect.signature(info.wrapped).parameters
        if name not in denied
    ]
  except (AttributeError, KeyError, ValueError, TypeError):
    return []


def suggestion(message: str) -> str:
  """A ' Did you mean ...?' hint (or the parameters taken) for a gin error."""
  match = _UNKNOWN_CONFIGURABLE.search(message)
  if match:
    # Private: gin has no public list of the configurables' names.
    registry = gin.config._REGISTRY  # pylint: disable=protected-access
    names = sorted(
        {selector.split('.')[-1] for selector, _ in registry.items()}
    )
    close = difflib.get_close_matches(match.group(1), names, n=1)
    return f' Did you mean {close[0]!r}?' if close else ''
  match = _UNKNOWN_PARAMETER.search(message)
  if match:
    configurable, parameter = match.groups()
    close = difflib.get_close_matches(
        parameter, _parameter_names(configurable), n=1
    )
    return (
        f' Did you mean {configurable}.{close[0]}?'
        if close
        else f' {configurable} takes: '
        f'{", ".join(_parameter_names(configurable))}.'
    )
  match = _DENIED_PARAMETER.search(message)
  if match:
    configurable = match.group(1)
    return (
        f' It is set by the code, not by gin; {configurable} takes: '
        f'{", ".join(_parameter_names(configurable))}.'
    )
  return ''


# Gin's words for a value it cannot read, and the token it stopped at.
_UNREADABLE_VALUE = re.compile(
    r"malformed node or string.*Failed to parse token '([^']*)'", re.S
)


def _one_line(error: Exception) -> str:
  """Gin's message in one line; an unreadable value is named, with quotes."""
  text = str(error).strip()
  unreadable = _UNREADABLE_VALUE.search(text)
  if unreadable:
    token = unreadable.group(1)
    return f"cannot read the value {token}; write a string in quotes: '{token}'"
  return text.splitlines()[0]


def register_configurables() -> None:
  """Imports every module that defines gin names (see above)."""
  from official_repro.tasks import objectives  # pylint: disable=g-import-not-at-top

  for module in _CONFIGURABLE_MODULES:
    importlib.import_module(module)
  objectives.load_builtin_objectives()


def _is_gfile_file(path: str) -> bool:
  return tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path)


# Reads gin files (and their includes) on gs:// and other filesystems.
gin.config.register_file_reader(tf.io.gfile.GFile, _is_gfile_file)


def _no_gin_hint() -> str:
  """Why a gin file is missing when the package was installed without gin/."""
  if tf.io.gfile.isdir(os.path.join(REPO_ROOT, 'gin')):
    return ''
  return (
      f'; {REPO_ROOT} has no gin/ folder (a `pip install .` leaves it out): '
      'run from a checkout installed with `pip install -r requirements.txt`'
  )


def parse_config(gin_files: Sequence[str], gin_params: Sequence[str]) -> None:
  """Parses --gin_file files then --gin_param bindings.

  `include` paths resolve against the including file's folder and the
  repository root. GinConfigError names the file or binding and the reason.
  """
  register_configurables()
  gin.add_config_file_search_path(REPO_ROOT)
  for path in gin_files:
    if not tf.io.gfile.exists(path):
      raise GinConfigError(f'--gin_file {path}: no such file{_no_gin_hint()}.')
    gin.add_config_file_search_path(
        os.path.dirname(path if '://' in path else os.path.abspath(path))
    )
    try:
      gin.parse_config_file(path)
    except (ValueError, IOError, SyntaxError) as error:
      raise GinConfigError(
          f'--gin_file {path}: {_location(error)}{_one_line(error)}'
          f'{suggestion(str(error))}'
      ) from error
  for binding in gin_params:
    try:
      gin.parse_config(binding)
    except (ValueError, SyntaxError) as error:
      raise GinConfigError(
          f'--gin_param {binding!r}: {_one_line(error)}'
          f'{suggestion(str(error))}'
      ) from error
  check_types()


def _accepts(annotation: Any, value: Any) -> bool:
  """Whether `value` fits a simple annotation (others and gin refs pass)."""
  if annotation in (inspect.Parameter.empty, Any) or type(
      value
  ).__module__.startswith('gin'):
    return True
  if typing.get_origin(annotation) is Union:
    return any(
        _accepts(option, value) for option in typing.get_args(annotation)
    )
  if annotation is type(None):
    return value is None
  if annotation is bool:
    return isinstance(value, bool)
  if annotation is int:
    return isinstance(value, int) and not isinstance(value, bool)
  if annotation is float:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
  if annotation is str:
    return isinstance(value, str)
  return True


def check_types() -> None:
  """Stops at a bound value of the wrong simple type, naming the binding.

  Gin would apply `learning_rate = '1e-3'` as a string and TensorFlow fail
  much later.
  """
  # Private: gin has no public list of the bound selectors, nor (see
  # `_parameter_names`) of a configurable's wrapped function.
  for (_, selector), bindings in gin.config._CONFIG.items():  # pylint: disable=protected-access
    configurable = gin.config._REGISTRY.get_match(selector)  # pylint: disable=protected-access
    if configurable is None:
      continue
    try:
      signature = inspect.signature(configurable.wrapped)
      hints = typing.get_type_hints(configurable.wrapped)
    except (TypeError, ValueError, NameError):
      continue
    for name, value in bindings.items():
      if name not in signature.parameters:
        continue
      annotation = hints.get(name, signature.parameters[name].annotation)
      if not _accepts(annotation, value):
        expected = getattr(annotation, '__name__', None) or str(
            annotation
        ).replace('typing.', '')
        raise GinConfigError(
            f'{configurable.name}.{name} = {value!r} is a '
            f'{type(value).__name__}; expected {expected}'
            + (
                ' (write the number without quotes)'
                if isinstance(value, str) and _is_number(value)
                else ''
            )
            + '.'
        )


def _is_number(text: str) -> bool:
  try:
    float(text)
  except ValueError:
    return False
  return True


def _location(error: Exception) -> str:
  """'<file>:<line>: ' of the gin line an error is about, or ''."""
  match = re.search(r'In file \"?([^\",\n]+)\"?, line (\d+)', str(error))
  return f'{match.group(1)}:{match.group(2)}: ' if match else ''


def save_config(model_dir: str, filename: str, operative: bool) -> str:
  """Writes the operative (or full) gin config into `model_dir`; its path."""
  text = gin.operative_config_str() if operative else gin.config_str()
  path = os.path.join(model_dir, filename)
  tf.io.gfile.makedirs(model_dir)
  json_files.write_text(path, text)
  return path
