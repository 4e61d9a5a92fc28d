"""Tests of the progress reporter with a fake clock (times by hand)."""

from official_repro.common import progress


class _Clock:
  """A clock that shows `now`, set by the test."""

  def __init__(self, now: float):
    self.now = now

  def __call__(self) -> float:
    return self.now


def _reporter(total, label, clock, **kwargs):
  lines = []
  reporter = progress.Progress(
      total, label, clock=clock, log=lines.append, **kwargs
  )
  return reporter, lines


def test_lines_are_throttled_and_give_the_time_left():
  clock = _Clock(100.0)
  reporter, lines = _reporter(
      4, 'tokenize', clock, unit='files', interval_seconds=10
  )
  clock.now = 104.0  # 4 s after the start: too soon for a line.
  reporter.advance()
  assert not lines
  clock.now = 112.0  # 12 s in, 2 of 4 done: 12 * 2 / 2 = 12 s left.
  reporter.advance()
  assert lines == ['tokenize: 2/4 files (50.0%), 12 s elapsed, about 12 s left']
  clock.now = 115.0  # 3 s after the last line.
  reporter.advance()
  assert len(lines) == 1
  clock.now = 400.0  # 300 s in, 3 of 4 done: 300 * 1 / 3 = 100 s, ~2 min.
  reporter.update(3)
  assert lines[-1] == (
      'tokenize: 3/4 files (75.0%), 5 min 0 s elapsed, about 2 min left'
  )
  clock.now = 460.0
  reporter.advance()
  assert lines[-1] == 'tokenize: 4/4 files, done in 6 min 0 s'
  clock.now = 1000.0
  reporter.advance()
  assert len(lines) == 3


def test_the_time_left_is_unknown_until_something_is_done():
  clock = _Clock(0.0)
  reporter, lines = _reporter(10, 'score', clock)
  assert reporter.time_left(5.0) is None
  clock.now = 30.0
  reporter.update(0)
  assert lines == ['score: 0/10 (0.0%), 30 s elapsed, time left unknown']
  reporter.update(4)
  assert reporter.time_left(30.0) == 30.0 * 6 / 4


def test_bytes_are_shown_in_megabytes_and_long_times_in_hours():
  clock = _Clock(0.0)
  reporter, lines = _reporter(41_000_000, 'read corpus', clock, unit='bytes')
  clock.now = 7200.0  # 2 h for 12.3 of 41 MB: 7200 * 28.7 / 12.3 = 16800 s.
  reporter.update(12_300_000)
  assert lines == [
      'read corpus: 12.3/41.0 MB (30.0%), 2 h 0 min elapsed, '
      'about 4 h 40 min left'
  ]


def test_the_completion_line_comes_however_soon_and_once():
  clock = _Clock(50.0)
  reporter, lines = _reporter(1234, 'write train', clock, unit='examples')
  clock.now = 50.4
  reporter.advance(1000)
  assert not lines
  reporter.advance(234)
  reporter.advance(1)
  assert lines == ['write train: 1,234/1,234 examples, done in 0 s']


def test_no_interval_logs_every_update_no_total_or_label_nothing():
  clock = _Clock(0.0)
  reporter, lines = _reporter(3, 'jobs', clock, interval_seconds=0)
  clock.now = 60.0
  reporter.advance()
  clock.now = 90.0
  reporter.advance()
  assert lines == [
      'jobs: 1/3 (33.3%), 1 min 0 s elapsed, about 2 min left',
      'jobs: 2/3 (66.7%), 1 min 30 s elapsed, about 45 s left',
  ]
  empty, empty_lines = _reporter(0, 'nothing', clock, interval_seconds=0)
  empty.update(0)
  unlabelled, unlabelled_lines = _reporter(2, '', clock, interval_seconds=0)
  unlabelled.advance()
  unlabelled.advance()
  assert not empty_lines and not unlabelled_lines
  assert unlabelled.done == 2


def test_default_interval_and_absl_log(monkeypatch):
  logged = []
  monkeypatch.setattr(
      progress.logging, 'info', lambda *args: logged.append(args[0] % args[1:])
  )
  clock = _Clock(0.0)
  reporter = progress.Progress(2, 'read', clock=clock)
  clock.now = progress.INTERVAL_SECONDS - 1
  reporter.advance()
  assert not logged
  clock.now = progress.INTERVAL_SECONDS
  reporter.update(1)
  assert logged == ['read: 1/2 (50.0%), 10 s elapsed, about 10 s left']
