"""Registries with package-discovered built-ins."""

import pytest

from official_repro.common import registry


def test_builtins_are_found_by_package_and_errors_list_names():
  tasks = registry.Registry[object](
      'objective', 'experiment.objective', ['official_repro.tasks']
  )
  # The package's modules register into their own registries, not this one.
  assert tasks.names() == []
  tasks.register('mine', 1)
  assert tasks.get('mine') == 1
  with pytest.raises(
      ValueError,
      match=r'experiment.objective must be one of ' r"\['mine'\], got 'other'",
  ):
    tasks.get('other')
  with pytest.raises(ValueError, match='--objective must be one of'):
    tasks.get('other', setting='--objective')


def test_a_name_keeps_its_entry():
  entries = registry.Registry[str]('backbone', 'encoder.backbone', [])
  entries.register('a', 'first')
  entries.register('a', 'first')  # The same entry again: a re-import.
  with pytest.raises(ValueError, match="backbone named 'a' is already"):
    entries.register('a', 'second')
  copy = entries.copy()
  copy.register('b', 'x')
  assert entries.names() == ['a'] and copy.names() == ['a', 'b']


def test_builtin_registries_hold_the_package_modules():
  from official_repro.modeling.networks import encoders  # pylint: disable=g-import-not-at-top
  from official_repro.tasks import finetuning_registry  # pylint: disable=g-import-not-at-top
  from official_repro.tasks import objectives  # pylint: disable=g-import-not-at-top

  assert {'bert', 'albert', 'convbert'} <= set(encoders.backbone_names())
  assert {'electra', 'masked_lm'} <= set(objectives.names())
  assert {'mrpc', 'squad11', 'race', 'pos'} <= set(
      finetuning_registry.task_names()
  )
