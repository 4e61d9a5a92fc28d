"""Stop signals: Ctrl-C or SIGTERM checkpoints a run within a step and stops it.

Inside `stop_on_signal()` SIGINT and SIGTERM are recorded, not fatal. The
main thread is inside one `tf.function` per Orbit loop, so a watcher thread
reads the signal from Python's wakeup descriptor and sets `step_gate()`,
which the trainer reads before every step: the loop's remaining steps are
skipped and its end (`StopCheck`) saves a checkpoint and raises
`TrainingStopped`; rerunning resumes. Under multi-worker and TPU strategies
steps are not skipped (peers would hang in the all-reduce): the workers
all-reduce the request at the loop's end and stop at the same step.

Not TensorFlow's `PreemptionCheckpointHandler`: in TF 2.20 it does nothing on
Cloud TPU and GCE CPU VMs, is not installed for one-host strategies, and Model
Garden configures it to keep training after its save.
"""

import contextlib
import os
import signal
import sys
import tempfile
import threading
from typing import Iterator, Optional, Sequence, Tuple

from absl import logging
import tensorflow as tf

from official_repro.common import cli

# Exit status after a SIGTERM stop (a shell's for SIGTERM); run_tpu.sh's
# supervisor relaunches a run that ended with it. Ctrl-C ends with 130.
EXIT_STOPPED = 128 + signal.SIGTERM


def clear_request() -> None:
  """Forgets the stop request: the trainer has stopped on it."""
  _STOP_REQUEST.set(None)


class TrainingStopped(cli.Stopped):
  """Training stopped on `signal_name` after saving `checkpoint` at `step`.

  On workers other than the chief `checkpoint` is a temporary copy.
  """

  def __init__(self, signal_name: str, step: int, checkpoint: str):
    self.signal_name = signal_name
    self.step = step
    self.checkpoint = checkpoint
    number = getattr(signal, signal_name.split()[0], signal.SIGTERM)
    super().__init__(
        int(number),
        f'{signal_name} received: saved checkpoint {checkpoint} at step '
        f'{step} and stopped. Run the same command again to resume from it.',
    )


class _StopRequest:
  """The first stop signal received while `stop_on_signal` is active."""

  def __init__(self):
    self._lock = threading.Lock()
    self._signal_name = None
    self.active = False
    self.gate = None  # The `step_gate` variable, once created.

  @property
  def signal_name(self) -> Optional[str]:
    with self._lock:
      return self._signal_name

  def set(self, signal_name: Optional[str]) -> bool:
    """Records `signal_name` (None clears); whether it is a new request."""
    with self._lock:
      changed = (self._signal_name is None) != (signal_name is None)
      if changed:
        self._signal_name = signal_name
    if changed and self.gate is not None:
      # Eagerly, also when the main thread is tracing a function: an assign
      # in its graph would set the gate again each time it runs.
      with tf.init_scope():
        self.gate.assign(signal_name is not None)
    return changed and signal_name is not None


_STOP_REQUEST = _StopRequest()


def step_gate() -> Optional[tf.Variable]:
  """A host boolean variable, True from a stop signal on; None before any.

  A trainer skips its steps while it is True.
  """
  return _STOP_REQUEST.gate


def _make_step_gate() -> None:
  if _STOP_REQUEST.gate is None:
    if tf.distribute.has_strategy():
      raise ValueError('enter stop_on_signal() outside strategy.scope().')
    with tf.init_scope(), tf.device('/cpu:0'):
      _STOP_REQUEST.gate = tf.Variable(
          False, trainable=False, name='stop_requested'
      )


def _request(number: int) -> None:
  """Records a stop request for signal `number`; logs the first."""
  name = signal.Signals(number).name
  if _STOP_REQUEST.set(name):
    logging.warning(
        '%s received: stopping after the current step with a checkpoint '
        '(a second %s stops at once).',
        name,
        name,
    )


def _watch(read_fd: int, signals: Sequence[int], handled: threading.Event):
  """Acts on signals read from Python's wakeup descriptor.

  The first requests the stop; a second before the main thread has handled
  the first ends the process at once.
  """
  received = 0
  while True:
    data = os.read(read_fd, 1)
    if not data or not data[0]:  # Closed, or the context's end.
      return
    if data[0] not in signals:
      continue
    received += 1
    if received == 1:
      _request(data[0])
    elif not handled.is_set():
      print(
          f'{cli.command_name()}: stopped at once by a second signal.',
          file=sys.stderr,
          flush=True,
      )
      # os._exit is public (no cleanup, which may wait on the main thread).
      os._exit(128 + data[0])  # pylint: disable=protected-access


@contextlib.contextmanager
def stop_on_signal(
    signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM)
) -> Iterator[None]:
  """Makes training checkpoint and stop when one of `signals` arrives.

  A second signal ends the process at once (or, once the first was handled,
  goes to the previous handlers). A signal after training's last step ends
  the block with `KeyboardInterrupt` (SIGINT) or `cli.Interrupted`. Nested
  contexts are the outer one; off the main thread it does nothing. Enter it
  outside any `strategy.scope()`.
  """
  if (
      threading.current_thread() is not threading.main_thread()
      or _STOP_REQUEST.active
  ):
    yield
    return
  _make_step_gate()
  _STOP_REQUEST.set(None)
  with contextlib.ExitStack() as stack:
    _STOP_REQUEST.active = True
    stack.callback(setattr, _STOP_REQUEST, 'active', False)
    stack.callback(_STOP_REQUEST.set, None)
    _install(stack, tuple(signals))
    yield
    name = _STOP_REQUEST.signal_name
  if name:
    number = getattr(signal, name.split()[0])
    if number == signal.SIGINT:
      raise KeyboardInterrupt
    raise cli.Interrupted(number)


def _install(stack: contextlib.ExitStack, signals: Tuple[int, ...]) -> None:
  """Installs the handlers and the watcher; `stack` undoes both on exit."""
  previous = {number: signal.getsignal(number) for number in signals}
  handled = threading.Event()

  def handler(number, frame):
    del frame
    _request(number)
    handled.set()
    _restore(previous)

  stack.callback(_restore, previous)
  read_fd, write_fd = os.pipe()
  stack.callback(os.close, read_fd)
  stack.callback(os.close, write_fd)
  os.set_blocking(write_fd, False)
  watcher = threading.Thread(
      target=_watch, args=(read_fd, signals, handled), daemon=True
  )
  for number in signals:
    signal.signal(number, handler)
  previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
  stack.callback(signal.set_wakeup_fd, previous_fd)
  watcher.start()
  # Last in, first out: the wakeup fd is reset, then a 0 byte (no signal)
  # ends the watcher, then the pipe is closed.
  stack.callback(watcher.join, 10)
  stack.callback(os.write, write_fd, b'\0')


def _restore(handlers) -> None:
  for number, old in handlers.items():
    signal.signal(number, old)


class StopCheck:
  """Whether a training loop's end should stop: a signal here or anywhere."""

  def __init__(self, strategy: tf.distribute.Strategy):
    self._strategy = strategy
    self._agree = None
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
      self._agree = tf.function(self._count_requests)
    # Whether the trainer skips the steps after a signal or ends its loop.
    self.skips_steps = not isinstance(
        strategy,
        (tf.distribute.MultiWorkerMirroredStrategy, tf.distribute.TPUStrategy),
    )

  def _count_requests(self, requested: tf.Tensor) -> tf.Tensor:
    """Sums `requested` (a scalar) over all replicas of all workers."""
    per_replica = self._strategy.run(lambda: tf.identity(requested))
    return self._strategy.reduce(
        tf.distribute.ReduceOp.SUM, per_replica, axis=None
    )

  def signal_name(self) -> Optional[str]:
    """The stop signal's name if this (or, multi-worker, any) worker got one.

    Multi-worker, all workers run this all-reduce and stop at the same step.
    """
    name = _STOP_REQUEST.signal_name
    if self._agree is None:
      return name
    requested = tf.constant(1.0 if name else 0.0)
    if float(self._agree(requested)) > 0:
      return name or 'SIGTERM (on another worker)'
    return None


def save_checkpoint_now(
    checkpoint: tf.train.Checkpoint,
    global_step: tf.Variable,
    strategy: tf.distribute.Strategy,
    model_dir: Optional[str],
    max_to_keep: int,
) -> str:
  """Saves `checkpoint` at `global_step` where a rerun restores it; its path.

  Into `model_dir` on the chief, a temporary directory on other workers
  (all must take part in saving mirrored variables).
  """
  if strategy.extended.should_checkpoint:
    if not model_dir:
      raise ValueError(
          'Trainer(model_dir=...) is needed to save a '
          'checkpoint when training is stopped by a signal.'
      )
    directory = model_dir
  else:
    directory, max_to_keep = tempfile.mkdtemp(), 1
  manager = tf.train.CheckpointManager(
      checkpoint,
      directory,
      max_to_keep=max_to_keep,
      step_counter=global_step,
  )
  path = manager.save(checkpoint_number=global_step)
  logging.info(
      'Saved %s at step %d after a stop signal.',
      path,
      int(global_step.numpy()),
  )
  return path
