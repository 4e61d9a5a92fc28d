"""Name -> entry registries whose built-in entries are found by package.

Backbones, objectives and tasks are plug-ins registered on import; the
built-in ones are a package's modules, imported on the first lookup, so no
list of them is written anywhere (elsewhere: a gin `import` line).
"""

import difflib
import importlib
import pkgutil
from typing import Dict, Generic, List, Optional, Sequence, TypeVar

from official_repro.common import cli

EntryT = TypeVar('EntryT')


def import_package_modules(package: str) -> None:
  """Imports every module of `package` (each registers what it defines)."""
  module = importlib.import_module(package)
  for info in pkgutil.iter_modules(module.__path__):
    importlib.import_module(f'{package}.{info.name}')


class Registry(Generic[EntryT]):
  """Entries by name, in order; `kind` and `setting` name them in messages."""

  def __init__(self, kind: str, setting: str, packages: Sequence[str]):
    """An empty registry whose built-ins are `packages`' modules."""
    self.kind = kind
    self.setting = setting
    self._packages = tuple(packages)
    self._entries: Dict[str, EntryT] = {}
    self._loaded = False

  def register(self, name: str, entry: EntryT) -> EntryT:
    """Adds `entry` under `name` (again is fine, another is not); returns it."""
    existing = self._entries.get(name)
    if existing is not None and existing != entry:
      raise ValueError(f'A {self.kind} named {name!r} is already registered.')
    self._entries[name] = entry
    return entry

  def copy(self) -> 'Registry[EntryT]':
    """A registry with the same entries (e.g. to register test entries)."""
    clone = Registry[EntryT](self.kind, self.setting, packages=())
    for name, entry in zip(self.names(), self.entries()):
      clone.register(name, entry)
    return clone

  def load_builtins(self) -> None:
    """Imports the built-in modules (once)."""
    if not self._loaded:
      self._loaded = True
      for package in self._packages:
        import_package_modules(package)

  def names(self) -> List[str]:
    self.load_builtins()
    return list(self._entries)

  def entries(self) -> List[EntryT]:
    self.load_builtins()
    return list(self._entries.values())

  def get(self, name: str, setting: Optional[str] = None) -> EntryT:
    """The entry `name`; UserError names `setting` and the closest name."""
    if name not in self._entries:
      self.load_builtins()
    if name not in self._entries:
      close = difflib.get_close_matches(str(name), self.names(), n=1)
      raise cli.UserError(
          f'{setting or self.setting} must be one of '
          f'{sorted(self.names())}, got {name!r}'
          + (f' (did you mean {close[0]!r}?)' if close else '')
          + '.'
      )
    return self._entries[name]
