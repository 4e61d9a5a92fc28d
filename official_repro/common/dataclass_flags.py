"""absl flags defined from a dataclass's fields, defaults and help included.

A field made by `option(default, help)` gets a flag (`define_flags`), read
back by `from_flags`, so each default is stated once. Its type picks the
flag: bool/int/float/str (`Optional[X]` as X), `choices` an enum, a tuple a
repeatable string (comma-separated with `listed`) and a list a comma-separated
one. A field without a default gets a flag without one (None).
"""

import dataclasses
import typing
from typing import Any, Dict, Iterable

from absl import flags

_DEFINERS = {
    bool: flags.DEFINE_bool,
    int: flags.DEFINE_integer,
    float: flags.DEFINE_float,
    str: flags.DEFINE_string,
}


def option(
    default,
    help_text: str,
    flag: str = '',
    choices: Iterable = (),
    listed: bool = False,
):
  """A dataclass field with a flag (named `flag` if not the field's name)."""
  return dataclasses.field(
      default=default,
      metadata={
          'help': help_text,
          'flag': flag,
          'choices': tuple(choices),
          'listed': listed,
      },
  )


def _flag_kind(hint) -> type:
  """The flag type of a field's type hint (`Optional[X]` gives X)."""
  origin = typing.get_origin(hint)
  if origin in (tuple, list):
    return origin
  args = [a for a in typing.get_args(hint) if a is not type(None)]
  if args:
    return _flag_kind(args[0])
  return hint


def _flag_fields(cls):
  """`(field, flag name, flag kind)` of each field of `cls` with a flag."""
  hints = typing.get_type_hints(cls)
  for field in dataclasses.fields(cls):
    if 'help' in field.metadata:
      name = field.metadata['flag'] or field.name
      yield field, name, _flag_kind(hints[field.name])


def define_flags(cls, flag_values=flags.FLAGS) -> None:
  """Defines a flag for each field of the dataclass `cls` made by `option`."""
  for field, name, kind in _flag_fields(cls):
    text, choices = field.metadata['help'], field.metadata['choices']
    default = None if field.default is dataclasses.MISSING else field.default
    if choices:
      flags.DEFINE_enum(
          name, default, list(choices), text, flag_values=flag_values
      )
    elif kind is tuple:
      listed = field.metadata['listed']
      define = flags.DEFINE_list if listed else flags.DEFINE_multi_string
      define(name, list(default or ()), text, flag_values=flag_values)
    elif kind is list:
      flags.DEFINE_list(name, default, text, flag_values=flag_values)
    elif kind in _DEFINERS:
      _DEFINERS[kind](name, default, text, flag_values=flag_values)
    else:
      raise TypeError(
          f'{cls.__name__}.{field.name}: no flag type for {kind!r} (bool, '
          'int, float, str, a tuple or a list, or give choices).'
      )


def flag_values_of(cls, flag_values=flags.FLAGS) -> Dict[str, Any]:
  """{field name: parsed value} of `cls`'s fields whose flags are defined."""
  values = {}
  for field, name, kind in _flag_fields(cls):
    if name in flag_values:
      value = flag_values[name].value
      values[field.name] = tuple(value or ()) if kind is tuple else value
  return values


def from_flags(cls, flag_values=flags.FLAGS):
  """An instance of `cls` from the parsed flags (other fields: defaults)."""
  return cls(**flag_values_of(cls, flag_values))
