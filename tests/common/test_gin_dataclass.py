"""Gin configurables derived from config dataclasses."""

import dataclasses

import gin
import pytest

from official_repro.common import gin_dataclass


@dataclasses.dataclass
class _Sizes:
  width: int = 0
  depth: int = 3
  name: str = 'net'
  tags: tuple = dataclasses.field(default_factory=tuple)


def _checked(config):
  if config.width < 0:
    raise ValueError('width must be >= 0')
  return dataclasses.replace(config, name=config.name.upper())


_FACTORY = gin_dataclass.register(
    _Sizes,
    'test_sizes',
    required=('width',),
    exclude=('tags',),
    finalize=_checked,
)
_OTHER = gin_dataclass.register(_Sizes, 'test_other')


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def test_bindings_override_defaults_and_arguments_override_bindings():
  gin.parse_config('test_sizes.width = 8\ntest_sizes.name = "enc"')
  assert _FACTORY() == _Sizes(width=8, depth=3, name='ENC')
  assert _FACTORY(depth=5).depth == 5
  # The dataclass itself ignores gin.
  assert _Sizes() == _Sizes(width=0, depth=3, name='net')


def test_required_excluded_and_unknown_fields():
  with pytest.raises(RuntimeError, match='width'):
    _FACTORY()
  with pytest.raises(ValueError, match='tags'):
    gin.parse_config('test_sizes.width = 1\ntest_sizes.tags = (1,)')
  with pytest.raises(ValueError, match='No configurable matching|depht'):
    gin.parse_config('test_sizes.depht = 1')
  with pytest.raises(ValueError, match=r"has no fields \['colour'\]"):
    gin_dataclass.register(_Sizes, 'test_sizes_bad', required=('colour',))


def test_finalize_checks_the_built_config():
  gin.parse_config('test_sizes.width = -1')
  with pytest.raises(ValueError, match='width must be >= 0'):
    _FACTORY()


def test_operative_config_lists_the_fields_used():
  gin.parse_config('test_sizes.width = 4')
  _FACTORY()
  assert 'test_sizes.width = 4' in gin.operative_config_str()


def test_bindings_of_unselected_plug_ins_are_refused():
  gin.parse_config('test_sizes.width = 3')
  gin_dataclass.check_unbound(['test_other'], "x='y'")  # Nothing bound.
  with pytest.raises(
      ValueError,
      match=r'test_sizes.width would be ignored: ' r"x='y' does not read them",
  ):
    gin_dataclass.check_unbound(['test_sizes'], "x='y'")
