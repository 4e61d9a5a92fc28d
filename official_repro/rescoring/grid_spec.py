"""The grids of rescoring's flags: '0:1:0.25,2' as the values it names."""

from typing import Tuple

import numpy as np

from official_repro.common import cli

# More points than any sensible grid: a typo such as a step of 1e-9.
_MAX_GRID_POINTS = 100000


def parse_grid(spec: str, flag_name: str) -> Tuple[float, ...]:
  """The sorted distinct values of numbers and inclusive `start:stop:step`s."""
  values = set()
  for item in spec.split(','):
    item = item.strip()
    parts = item.split(':')
    try:
      numbers = [float(part) for part in parts]
    except ValueError:
      numbers = []
    if len(numbers) == 1:
      values.add(numbers[0])
      continue
    if len(numbers) != 3 or not all(np.isfinite(numbers)):
      raise cli.UserError(
          f'--{flag_name}: {item!r} is not a number or a '
          'start:stop:step range.'
      )
    start, stop, step = numbers
    if step <= 0 or stop < start:
      raise cli.UserError(
          f'--{flag_name}: range {item!r} needs step > 0 and stop >= start.'
      )
    count = int(np.floor((stop - start) / step + 1e-9)) + 1
    if count > _MAX_GRID_POINTS:
      raise cli.UserError(
          f'--{flag_name}: range {item!r} has {count} values; '
          f'at most {_MAX_GRID_POINTS}.'
      )
    values.update(round(start + i * step, 10) for i in range(count))
  return tuple(sorted(values))
