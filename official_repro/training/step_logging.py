"""Step logging: each training loop's throughput and its one log line.

The papers compare examples per second at a global batch, so `LoopLog` adds
`examples_per_second` to Orbit's loop logs and logs one line `steps A-B:
{...}` (which `tests/training/test_preemption.py` reads).
"""

import time
from typing import Callable, Dict, MutableMapping

from absl import logging
import numpy as np


class LoopLog:
  """Times one Orbit training loop (from `first_step`) and logs its end."""

  def __init__(self, clock: Callable[[], float] = time.perf_counter):
    """Makes the log; `clock` gives seconds (a monotonic clock)."""
    self._clock = clock
    self._start_time = None
    self.first_step = None

  def begin(self, step: int) -> None:
    """Starts a loop at global `step` (the step before its first)."""
    self._start_time = self._clock()
    self.first_step = step + 1

  def end(
      self, logs: MutableMapping, end_step: int, global_batch_size: int
  ) -> Dict[str, float]:
    """Adds `examples_per_second` to Orbit's `logs`, logs them; as floats."""
    elapsed = self._clock() - self._start_time
    steps = end_step - self.first_step + 1
    if elapsed > 0 and steps > 0:
      logs['examples_per_second'] = steps * global_batch_size / elapsed
    values = {name: float(np.asarray(value)) for name, value in logs.items()}
    logging.info('steps %d-%d: %s', self.first_step, end_step, values)
    return values
