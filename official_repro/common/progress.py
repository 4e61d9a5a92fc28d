"""One-line progress reports of long loops, at most one every few seconds.

  reading = progress.Progress(total_bytes, 'read corpus', unit='bytes')
  reading.advance(size)  # read corpus: 12.3/41.0 MB (30.0%), 1 min 5 s
                         # elapsed, about 3 min left

A line is logged once `interval_seconds` passed since the last, and the
completion line once, to absl's `logging.info` (stderr: stdout keeps only
results) unless `log` says otherwise. A total of zero or an empty label logs
nothing, so a function takes a `progress_label` argument, '' by default.
"""

import time
from typing import Callable, Optional

from absl import logging

# Seconds between two progress lines by default.
INTERVAL_SECONDS = 10.0

_BYTES_PER_MB = 1e6


def _log_info(line: str) -> None:
  logging.info('%s', line)


def format_duration(seconds: float) -> str:
  """'42 s', '3 min 5 s' or '2 h 7 min' (rounded to whole seconds)."""
  seconds = round(max(0.0, seconds))
  if seconds < 60:
    return f'{seconds} s'
  minutes, seconds = divmod(seconds, 60)
  if minutes < 60:
    return f'{minutes} min {seconds} s'
  hours, minutes = divmod(minutes, 60)
  return f'{hours} h {minutes} min'


def format_time_left(seconds: Optional[float]) -> str:
  """'about 40 s left', 'about 3 min left' (whole minutes), or 'unknown'."""
  if seconds is None:
    return 'time left unknown'
  if seconds < 59.5:
    return f'about {round(max(0.0, seconds))} s left'
  minutes = round(seconds / 60)
  if minutes < 60:
    return f'about {minutes} min left'
  hours, minutes = divmod(minutes, 60)
  return f'about {hours} h {minutes} min left'


class Progress:
  """Counts work `done` towards `total` and logs it, time-throttled."""

  def __init__(
      self,
      total: float,
      label: str,
      unit: str = '',
      interval_seconds: Optional[float] = None,
      clock: Callable[[], float] = time.monotonic,
      log: Callable[[str], None] = _log_info,
  ):
    """Starts counting now; `unit` 'bytes' shows MB, `label` '' logs nothing."""
    self.total = total
    self.label = label
    self.done = 0
    self._unit = unit
    self._interval = (
        INTERVAL_SECONDS if interval_seconds is None else interval_seconds
    )
    self._clock = clock
    self._log = log
    self._started = clock()
    self._last_line = self._started
    self._finished = False

  def advance(self, amount: float = 1) -> None:
    """Adds `amount` to the work done (and logs a line if one is due)."""
    self.update(self.done + amount)

  def update(self, done: float) -> None:
    """Sets the work done to `done` (and logs a line if one is due)."""
    self.done = done
    if self._finished or self.total <= 0 or not self.label:
      return
    now = self._clock()
    if done >= self.total:
      self._finished = True
      self._log(
          f'{self.label}: {self._amounts()}, done in '
          f'{format_duration(now - self._started)}'
      )
    elif now - self._last_line >= self._interval:
      self._last_line = now
      self._log(self.line(now))

  def time_left(self, now: float) -> Optional[float]:
    """Seconds left at `now`: elapsed * (total - done) / done, or None."""
    if self.done <= 0:
      return None
    return (now - self._started) * max(0, self.total - self.done) / self.done

  def line(self, now: float) -> str:
    """The progress line at time `now` (a time of `clock`)."""
    percent = 100 * self.done / self.total if self.total else 100.0
    return (
        f'{self.label}: {self._amounts()} ({percent:.1f}%), '
        f'{format_duration(now - self._started)} elapsed, '
        f'{format_time_left(self.time_left(now))}'
    )

  def _amounts(self) -> str:
    """'1,234/5,000 sentences', or '12.3/41.0 MB' for bytes."""
    if self._unit == 'bytes':
      done, total = self.done / _BYTES_PER_MB, self.total / _BYTES_PER_MB
      return f'{done:,.1f}/{total:,.1f} MB'
    unit = f' {self._unit}' if self._unit else ''
    return f'{self.done:,}/{self.total:,}{unit}'
