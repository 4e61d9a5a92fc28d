"""Tests of official_repro.rescoring.grid_spec."""

import pytest

from official_repro.rescoring import grid_spec


def test_parse_grid():
  assert grid_spec.parse_grid('0:1:0.25', 'w') == (0.0, 0.25, 0.5, 0.75, 1.0)
  assert grid_spec.parse_grid('0:0.3:0.1', 'w') == (0.0, 0.1, 0.2, 0.3)
  assert grid_spec.parse_grid('2, -1,0:1:0.5,2', 'w') == (
      -1.0,
      0.0,
      0.5,
      1.0,
      2.0,
  )
  assert grid_spec.parse_grid('0:0.25:0.1', 'w') == (0.0, 0.1, 0.2)
  for spec, message in (
      ('a', 'not a number'),
      ('0:1', 'not a number'),
      ('1:0:0.1', 'stop >= start'),
      ('0:1:0', 'step > 0'),
      ('0:1e9:1e-3', 'at most'),
  ):
    with pytest.raises(ValueError, match=message):
      grid_spec.parse_grid(spec, 'weights')
