"""Config dataclasses as gin configurables (`gin.external_configurable`)."""

import dataclasses

import gin
import pytest

from official.modeling.hyperparams import base_config
from official_repro.common import gin_dataclass


@dataclasses.dataclass
class _Sizes:
  width: int = 0
  depth: int = 3
  name: str = 'net'
  tags: tuple = dataclasses.field(default_factory=tuple)


@dataclasses.dataclass
class _ModelGardenSizes(base_config.Config):
  width: int = 0
  depth: int = 3


_FACTORY = gin_dataclass.external_configurable(
    _Sizes, 'test_sizes', exclude=('tags',)
)
_OTHER = gin_dataclass.external_configurable(_Sizes, 'test_other')
_MODEL_GARDEN = gin_dataclass.external_configurable(
    _ModelGardenSizes, 'test_mg_sizes'
)


pytestmark = pytest.mark.usefixtures('clean_gin')


def test_bindings_override_defaults_and_arguments_override_bindings():
  gin.parse_config('test_sizes.width = 8\ntest_sizes.name = "enc"')
  assert _FACTORY() == _Sizes(width=8, depth=3, name='enc')
  assert _FACTORY(depth=5).depth == 5
  assert type(_FACTORY()) is _Sizes  # The class, not gin's subclass.
  # The dataclass itself ignores gin, also where Model Garden builds one.
  assert _Sizes() == _Sizes(width=0, depth=3, name='net')
  gin.parse_config('test_mg_sizes.width = 8')
  built = _MODEL_GARDEN()
  assert built.width == 8 and built.replace(depth=4).width == 8
  assert _ModelGardenSizes().width == 0
  assert _ModelGardenSizes.from_args(depth=1).width == 0


def test_required_excluded_and_unknown_fields():
  with pytest.raises(RuntimeError, match=r"test_sizes.*\['width'\]"):
    _FACTORY(width=gin.REQUIRED)
  with pytest.raises(ValueError, match='tags'):
    gin.parse_config('test_sizes.width = 1\ntest_sizes.tags = (1,)')
  with pytest.raises(ValueError, match='No configurable matching|depht'):
    gin.parse_config('test_sizes.depht = 1')
  with pytest.raises(ValueError, match=r"has no fields \['colour'\]"):
    gin_dataclass.external_configurable(
        _Sizes, 'test_sizes_bad', exclude=('colour',)
    )


def test_model_gardens_constructor_arguments_are_not_settings():
  """`Config`'s `default_params` and `restrictions` are not gin settings."""
  with pytest.raises(ValueError, match='default_params'):
    gin.parse_config('test_mg_sizes.default_params = {}')
  gin.parse_config('test_mg_sizes.width = 4')
  _MODEL_GARDEN()
  operative = gin.operative_config_str()
  assert 'test_mg_sizes.width = 4' in operative
  assert 'restrictions' not in operative and 'default_params' not in operative


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
