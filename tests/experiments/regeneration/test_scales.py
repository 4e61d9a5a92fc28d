"""The scales below paper scale: each has its gin include and valid tasks."""

import os

import pytest

from experiments.regeneration import scales
from official_repro.data import glue
from official_repro.training import gin_utils


@pytest.mark.parametrize('name', sorted(scales.SCALES))
def test_each_scale_has_its_include_and_known_tasks(name):
  scale = scales.get(name)
  assert scale.name == name
  include = os.path.join(gin_utils.REPO_ROOT, 'gin/regenerate', name + '.gin')
  assert os.path.isfile(include), include
  for item in scale.default_tasks:
    task, epochs = item.split(':')
    assert task in glue.GLUE_TASK_NAMES, item
    assert float(epochs) > 0, item
  assert 0 < scale.eval_fraction < 1
  assert scale.pretrain_seeds >= 1 and scale.reference_steps > 0


def test_an_unknown_scale_names_the_known_ones():
  with pytest.raises(KeyError, match="No scale 'huge'; known: tiny, cpu, gpu"):
    scales.get('huge')
