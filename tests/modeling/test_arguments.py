"""Argument errors: named as given, reworded by whoever knows the settings."""

import pickle

import pytest

from official_repro.common import cli
from official_repro.modeling import arguments


def _error(temperature=0.0):
  return arguments.ArgumentError(
      'ElectraPretrainer',
      lambda name: f'{name("temperature")} must be > 0, got {temperature}.',
  )


def test_the_plain_message_names_the_owner_and_the_argument():
  error = _error()
  assert str(error) == 'ElectraPretrainer: temperature must be > 0, got 0.0.'
  assert isinstance(error, cli.UserError) and isinstance(error, ValueError)
  assert error.owner == 'ElectraPretrainer'
  assert error.text() == 'temperature must be > 0, got 0.0.'


def test_renamed_names_the_callers_settings():
  with pytest.raises(cli.UserError) as raised:
    with arguments.renamed(lambda argument: f'electra.{argument}'):
      raise _error()
  assert str(raised.value) == 'electra.temperature must be > 0, got 0.0.'
  assert not isinstance(raised.value, arguments.ArgumentError)
  assert isinstance(raised.value.__cause__, arguments.ArgumentError)


def test_renamed_leaves_other_errors_alone():
  with pytest.raises(KeyError):
    with arguments.renamed(lambda argument: f'x.{argument}'):
      raise KeyError('k')


def test_checked_turns_a_setting_named_check_into_an_argument_error():
  def check(setting):
    if setting is not None:
      raise ValueError(f'{setting}=3 is odd.')

  with pytest.raises(arguments.ArgumentError) as raised:
    arguments.checked('Layer', 'units', check)
  assert str(raised.value) == 'Layer: units=3 is odd.'
  assert (
      raised.value.text(lambda argument: f'g.{argument}') == 'g.units=3 is odd.'
  )
  assert arguments.checked('Layer', 'units', lambda setting: 7) == 7


def test_pickles_as_its_plain_message():
  clone = pickle.loads(pickle.dumps(_error()))
  assert type(clone) is cli.UserError
  assert str(clone) == str(_error())
