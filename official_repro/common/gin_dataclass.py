"""Configuration dataclasses as gin configurables, and unused plug-in settings.

`external_configurable` makes a dataclass (usually Model Garden's
`base_config.Config`) a gin configurable as it is, so no hand-written mirror
repeats its fields: `gin.external_configurable` with excluded fields and
non-field constructor parameters denied. The class stays free of gin:
constructing it in Python (as Model Garden does internally) never picks up
bindings; only calling the configurable does.
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
  """The gin configurable `name` of a dataclass, but its `exclude` fields."""
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
  """Refuses bindings of the unselected plug-ins `names` (they'd be ignored)."""
  ignored = sorted(
      f'{name}.{field}' for name in names for field in gin.get_bindings(name)
  )
  if ignored:
    raise cli.UserError(
        f'{", ".join(ignored)} would be ignored: {selected_by} '
        'does not read them. Remove them or select what they '
        'configure.'
    )
