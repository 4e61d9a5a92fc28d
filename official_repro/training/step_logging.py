"""Step logging: each training loop's throughput and its one log line.

Orbit's training logs give `steps_per_second`; the papers compare models by
examples per second at a global batch, so `LoopLog` adds
`examples_per_second` (global, over the loop's wall-clock time) to every
training loop's logs and logs them as one line, `steps A-B: {...}`, which
`tests/training/test_preemption.py` reads to tell which loops ran.
"""

import time
from typing import Callable, Dict, MutableMapping

from absl import logging
import numpy as np


class LoopLog:
  """Times one Orbit training loop at a time and logs its end.

  Attributes:
    first_step: the first global step of the running loop.
  """

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
    """Ends the loop at `end_step`: adds its throughput to `logs`, logs them.

    Args:
      logs: Orbit's training logs of the loop (scalars, or scalar tensors);
        `examples_per_second` is added when the loop ran steps in measurable
        time, so that Orbit writes it with the others.
      end_step: the global step the loop ended at (its last step).
      global_batch_size: examples per step over all replicas.

    Returns:
      `logs` as floats.
    """
    elapsed = self._clock() - self._start_time
    steps = end_step - self.first_step + 1
    if elapsed > 0 and steps > 0:
      logs['examples_per_second'] = steps * global_batch_size / elapsed
    values = {name: float(np.asarray(value)) for name, value in logs.items()}
    logging.info('steps %d-%d: %s', self.first_step, end_step, values)
    return values
