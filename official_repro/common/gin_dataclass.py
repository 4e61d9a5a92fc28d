"""Configuration dataclasses as gin configurables, and unused plug-in settings.

A configuration is written once, as a dataclass (usually a Model Garden
`base_config.Config`), and `external_configurable` makes it the gin
configurable `name` as it is: `encoder.hidden_size = 256` in a gin file sets
`EncoderConfig.hidden_size`, with the field's type and default, and no
hand-written mirror function repeats the fields. It is
`gin.external_configurable` with a denylist: the fields gin does not bind
(set by code, e.g. from the data), and the constructor parameters that are
not fields (Model Garden's `Config` takes `default_params` and
`restrictions`, which gin would otherwise offer and write into every
operative config). The dataclass itself stays free of gin: gin wraps a
subclass and returns instances of the class, so constructing it in Python
never picks up bindings (Model Garden builds configs internally, e.g. in
`replace` and `from_args`), only calling the configurable does. A field gin
must bind is passed `gin.REQUIRED` where the configurable is called, and
the built config is checked there.
"""

import dataclasses
import inspect
from typing import Iterable, Type, TypeVar

import gin

from official_repro.common import cli

ConfigT = TypeVar('ConfigT')


def external_configurable(
    config_cls: Type[ConfigT], name: str, exclude: Iterable[str] = ()
) -> Type[ConfigT]:
  """Makes the dataclass `config_cls` the gin configurable `name`.

  Args:
    config_cls: a dataclass.
    name: the gin name (`name.field = value`).
    exclude: fields gin does not bind (set by code, e.g. from the data).

  Returns:
    The configurable: calling it builds a `config_cls` from its keyword
    arguments, then the gin bindings, then the dataclass defaults.

  Raises:
    ValueError: `exclude` names a field `config_cls` does not have.
  """
  exclude = list(exclude)
  fields = {field.name for field in dataclasses.fields(config_cls)}
  unknown = set(exclude) - fields
  if unknown:
    raise ValueError(f'{config_cls.__name__} has no fields {sorted(unknown)}.')
  not_fields = [
      parameter
      for parameter in inspect.signature(config_cls).parameters
      if parameter not in fields
  ]
  return gin.external_configurable(
      config_cls, name, denylist=exclude + not_fields or None
  )


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
