"""Preemption: a SIGTERM checkpoints the run at a loop end and stops it.

Inside `stop_on_signal()`, a SIGTERM (what Spot/preemptible VMs and most
cluster schedulers send before a host goes away) is recorded instead of
ending the process; the trainer (`trainer.Trainer`) asks `StopCheck` at the
end of each Orbit loop (the next multiple of `steps_per_loop`), saves a
checkpoint there (`save_checkpoint_now`) and raises `TrainingStopped`;
rerunning the same command resumes from that checkpoint. Under
`MultiWorkerMirroredStrategy` the workers all-reduce the request at every
loop end, so all of them stop, and save, at the same step whichever worker
got the signal.

Why not TensorFlow's `PreemptionCheckpointHandler` (which Model Garden
installs as the `SaveCheckpointIfPreempted` train action when a strategy has
a cluster resolver): in TF 2.20 it does nothing on Cloud TPU VMs and GCE CPU
VMs (`failure_handling.py` returns early for `GCE_TPU` and `GCE_CPU`), is
not installed for one-host strategies, and Model Garden configures it to
keep training after its save. `official_repro.train` therefore switches it
off (`preemption_on_demand_checkpoint=False`) and this module handles
SIGTERM the same way under every strategy.
"""

import contextlib
import signal
import tempfile
import threading
from typing import Iterator, Optional, Sequence

from absl import logging
import tensorflow as tf

# Exit status of `official_repro.train` when a signal stopped it after a
# checkpoint: 128 + SIGTERM, what a shell reports for a process SIGTERM ended.
# run_tpu.sh's supervisor relaunches a run that ended with it.
EXIT_STOPPED = 128 + signal.SIGTERM


class TrainingStopped(Exception):
  """Training stopped on a signal after saving a checkpoint.

  Attributes:
    signal_name: the signal that asked for the stop, e.g. 'SIGTERM'.
    step: the global step the checkpoint holds.
    checkpoint: the checkpoint path (on workers other than the chief, a
      temporary copy; the chief's is in `model_dir`).
  """

  def __init__(self, signal_name: str, step: int, checkpoint: str):
    self.signal_name = signal_name
    self.step = step
    self.checkpoint = checkpoint
    super().__init__(
        f'{signal_name} received: saved checkpoint {checkpoint} at step '
        f'{step} and stopped. Run the same command again to resume from it.'
    )


class _StopRequest:
  """The first stop signal received while `stop_on_signal` is active."""

  def __init__(self):
    self._lock = threading.Lock()
    self._signal_name = None

  @property
  def signal_name(self) -> Optional[str]:
    with self._lock:
      return self._signal_name

  def set(self, signal_name: Optional[str]) -> None:
    with self._lock:
      self._signal_name = signal_name


_STOP_REQUEST = _StopRequest()


@contextlib.contextmanager
def stop_on_signal(
    signals: Sequence[int] = (signal.SIGTERM,)
) -> Iterator[None]:
  """Makes training checkpoint and stop when one of `signals` arrives.

  While the context is active, the first such signal is recorded instead of
  terminating the process; the trainer checks for it at the end of each
  Orbit loop (`StopCheck`), saves a checkpoint and raises `TrainingStopped`.
  A second signal runs the handler that was installed before (by default:
  terminate at once), so a run that is stuck outside the training loop
  (evaluation, export) can still be stopped. The previous handlers are
  restored on exit.

  Python runs signal handlers between bytecodes of the main thread, so the
  request is noticed when the running `steps_per_loop` steps (one
  `tf.function` call) return; keep a loop shorter than the grace period
  (about 30 s on Compute Engine Spot VMs).

  Args:
    signals: the signal numbers to handle.

  Yields:
    Nothing.
  """
  previous = {number: signal.getsignal(number) for number in signals}

  def handler(number, frame):
    del frame
    name = signal.Signals(number).name
    logging.warning(
        '%s received: saving a checkpoint at the end of the '
        'current training loop, then stopping.',
        name,
    )
    _STOP_REQUEST.set(name)
    for each, old in previous.items():
      signal.signal(each, old)

  _STOP_REQUEST.set(None)
  for number in signals:
    signal.signal(number, handler)
  try:
    yield
  finally:
    for number, old in previous.items():
      signal.signal(number, old)
    _STOP_REQUEST.set(None)


class StopCheck:
  """Whether a training loop's end should stop: a signal here or anywhere."""

  def __init__(self, strategy: tf.distribute.Strategy):
    """Makes the check for a trainer under `strategy`.

    Args:
      strategy: the trainer's strategy; under `MultiWorkerMirroredStrategy`
        the workers agree by an all-reduce at every loop end.
    """
    self._strategy = strategy
    self._agree = None
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
      self._agree = tf.function(self._count_requests)

  def _count_requests(self, requested: tf.Tensor) -> tf.Tensor:
    """Sums `requested` (a scalar) over all replicas of all workers."""
    per_replica = self._strategy.run(lambda: tf.identity(requested))
    return self._strategy.reduce(
        tf.distribute.ReduceOp.SUM, per_replica, axis=None
    )

  def signal_name(self) -> Optional[str]:
    """The stop signal's name if this (or, multi-worker, any) worker got one.

    Under `MultiWorkerMirroredStrategy` every worker runs this all-reduce at
    every loop end, so all of them decide to stop at the same step.
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
  """Saves `checkpoint` at `global_step`; returns its path.

  Writes where Model Garden's `OrbitExperimentRunner` writes, with the same
  `tf.train.Checkpoint` and `max_to_keep`, so that a rerun restores it: into
  `model_dir` on the chief, into a temporary directory on other workers
  (every worker must take part in saving mirrored variables).

  Args:
    checkpoint: the trainer's checkpoint.
    global_step: its step counter (a scalar int64 variable).
    strategy: the trainer's strategy (which worker is the chief).
    model_dir: the run's directory.
    max_to_keep: checkpoints kept in `model_dir`.

  Raises:
    ValueError: if the chief has no `model_dir`.
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
