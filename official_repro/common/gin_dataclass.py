"""Gin bindings for configuration dataclasses, derived from their fields.

A configuration is written once, as a dataclass (usually a Model Garden
`base_config.Config`). `register` makes a gin configurable of it whose
parameters are the dataclass fields with the same defaults, so that
`encoder.hidden_size = 256` in a gin file sets `EncoderConfig.hidden_size`
without a hand-written mirror function that repeats every field.

The dataclass itself stays free of gin: constructing it in Python never
picks up bindings (Model Garden builds configs internally, e.g. in
`replace` and `from_args`), only calling the registered factory does.
"""

import dataclasses
import inspect
import typing
from typing import Any, Callable, Iterable, Optional, Type, TypeVar

import gin

from official_repro.common import cli

ConfigT = TypeVar('ConfigT')


def _default(field: dataclasses.Field) -> Any:
  if field.default is not dataclasses.MISSING:
    return field.default
  if (
      field.default_factory is not dataclasses.MISSING
  ):  # pytype: disable=attribute-error
    return field.default_factory()  # pytype: disable=not-callable
  return gin.REQUIRED


def register(
    config_cls: Type[ConfigT],
    name: str,
    required: Iterable[str] = (),
    exclude: Iterable[str] = (),
    finalize: Optional[Callable[[ConfigT], ConfigT]] = None,
) -> Callable[..., ConfigT]:
  """Registers a gin configurable `name` that builds `config_cls`.

  Args:
    config_cls: a dataclass.
    name: the gin name (`name.field = value`).
    required: fields gin must bind (their dataclass default is a neutral
      placeholder such as 0).
    exclude: fields gin does not expose (set by code, e.g. from the data).
    finalize: applied to the built config (validation, derived values).

  Returns:
    The configurable factory: keyword arguments override gin bindings, which
    override the dataclass defaults.
  """
  required, exclude = set(required), set(exclude)
  fields = {field.name: field for field in dataclasses.fields(config_cls)}
  unknown = (required | exclude) - set(fields)
  if unknown:
    raise ValueError(f'{config_cls.__name__} has no fields {sorted(unknown)}.')
  hints = typing.get_type_hints(config_cls)
  parameters = [
      inspect.Parameter(
          field_name,
          inspect.Parameter.KEYWORD_ONLY,
          default=(gin.REQUIRED if field_name in required else _default(field)),
          annotation=hints.get(field_name, inspect.Parameter.empty),
      )
      for field_name, field in fields.items()
      if field_name not in exclude
  ]

  def factory(**kwargs) -> ConfigT:
    config = config_cls(**kwargs)
    return finalize(config) if finalize else config

  factory.__signature__ = inspect.Signature(parameters)
  factory.__name__ = name
  factory.__qualname__ = name
  factory.__module__ = config_cls.__module__
  factory.__doc__ = (
      f'Builds `{config_cls.__name__}` from gin bindings '
      f'(`{name}.<field>`); see its docstring.'
  )
  return gin.configurable(name)(factory)


def check_unbound(names: Iterable[str], selected_by: str) -> None:
  """Stops when gin binds a configurable that is not in use.

  A plug-in's settings (`convbert.kernel_size`, `electra.temperature`) are
  read only when the plug-in is selected; a binding of another one would be
  silently ignored.

  Args:
    names: gin names of the plug-ins that are not selected.
    selected_by: the binding that selects one, for the message (e.g.
      "encoder.backbone='bert'").

  Raises:
    UserError: naming the ignored bindings.
  """
  ignored = sorted(
      f'{name}.{field}' for name in names for field in gin.get_bindings(name)
  )
  if ignored:
    raise cli.UserError(
        f'{", ".join(ignored)} would be ignored: {selected_by} '
        'does not read them. Remove them or select what they '
        'configure.'
    )
