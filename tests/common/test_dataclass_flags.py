"""Flags from a dataclass's fields: one default, every field type."""

import dataclasses
from typing import List, Optional, Tuple

from absl import flags
import pytest

from official_repro.common import dataclass_flags


@dataclasses.dataclass(frozen=True)
class _Options:
  count: int = dataclass_flags.option(3, 'How many.')
  rate: float = dataclass_flags.option(0.5, 'How fast.')
  name: Optional[str] = dataclass_flags.option(None, 'Which one.')
  verbose: bool = dataclass_flags.option(False, 'Say more.')
  mode: str = dataclass_flags.option('a', 'How.', choices=('a', 'b'))
  patterns: Tuple[str, ...] = dataclass_flags.option(
      (), 'Repeatable.', flag='pattern'
  )
  tasks: Optional[List[str]] = dataclass_flags.option(None, 'Listed.')
  names: Tuple[str, ...] = dataclass_flags.option(
      ('x', 'y'), 'Comma-separated.', listed=True
  )
  internal: int = 7  # no flag


def _parse(*argv):
  flag_values = flags.FlagValues()
  dataclass_flags.define_flags(_Options, flag_values)
  flag_values(['command', *argv])
  return flag_values


def test_defaults_are_the_fields_defaults():
  flag_values = _parse()
  assert dataclass_flags.from_flags(_Options, flag_values) == _Options()
  assert 'internal' not in flag_values and 'patterns' not in flag_values
  assert flag_values['count'].help == 'How many.'


def test_every_field_type_parses():
  flag_values = _parse(
      '--count=5',
      '--rate=0.25',
      '--name=x',
      '--verbose',
      '--mode=b',
      '--pattern=p',
      '--pattern=q',
      '--tasks=sst2,mrpc',
      '--names=u,v,w',
  )
  assert dataclass_flags.from_flags(_Options, flag_values) == _Options(
      count=5,
      rate=0.25,
      name='x',
      verbose=True,
      mode='b',
      patterns=('p', 'q'),
      tasks=['sst2', 'mrpc'],
      names=('u', 'v', 'w'),
  )


@pytest.mark.parametrize('argv', [['--mode=c'], ['--count=x']])
def test_a_bad_value_is_refused(argv):
  with pytest.raises(flags.IllegalFlagValueError):
    _parse(*argv)


def test_values_of_flags_left_undefined_are_not_given():
  flag_values = flags.FlagValues()
  flags.DEFINE_integer('count', 9, 'Only this one.', flag_values=flag_values)
  flag_values(['command'])
  assert dataclass_flags.flag_values_of(_Options, flag_values) == {'count': 9}


def test_a_field_type_without_a_flag_type_is_named():
  @dataclasses.dataclass(frozen=True)
  class Odd:
    mapping: dict = dataclass_flags.option(None, 'No flag type.')

  with pytest.raises(TypeError, match='Odd.mapping'):
    dataclass_flags.define_flags(Odd, flags.FlagValues())


def test_a_field_without_a_default_gets_a_flag_without_one():
  @dataclasses.dataclass(frozen=True)
  class Required:
    path: str = dataclass_flags.option(dataclasses.MISSING, 'Required.')

  flag_values = flags.FlagValues()
  dataclass_flags.define_flags(Required, flag_values)
  flag_values(['command', '--path=p'])
  assert flag_values['path'].default is None
  assert dataclass_flags.from_flags(Required, flag_values) == Required('p')
