"""Record creation on one machine: worker processes, sorted runs, a merge.

Workers take input files from a queue, run `streaming.FileProcessor` on
each, and spill buffers of `buffer_bytes` as key-sorted run files per shard;
each shard is then merged from its runs (at most `_MAX_FAN_IN` at a time).
Memory is bounded by the buffers, not the corpus, and the output does not
depend on how files were divided among workers.
"""

import heapq
import multiprocessing
import os
import queue
import signal
import struct
import threading
import traceback
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional
from typing import Sequence
from typing import Tuple

import tensorflow as tf

from official_repro.common import cli
from official_repro.common import progress
from official_repro.data import streaming
from official_repro.data import vocab as vocab_lib
from official_repro.data import text_cleaning

_RUN_HEADER = struct.Struct('>QQI')  # key, document, length of the data
_READ_CHUNK = 1 << 18
_MAX_FAN_IN = 64
_POLL_SECONDS = 2.0

RunKey = Tuple[str, int]  # (split, shard)


def write_run(path: str, keyed: Iterable[Tuple[int, int, bytes]]) -> None:
  """Writes records, already in key order, as one run file."""
  chunk = bytearray()
  with tf.io.gfile.GFile(path, 'wb') as f:
    for key, document, data in keyed:
      chunk += _RUN_HEADER.pack(key, document, len(data))
      chunk += data
      if len(chunk) >= _READ_CHUNK:
        f.write(bytes(chunk))
        chunk.clear()
    f.write(bytes(chunk))


def read_run(path: str) -> Iterator[Tuple[int, int, bytes]]:
  """The `(key, document, data)` records of a run file, in its order."""
  with tf.io.gfile.GFile(path, 'rb') as f:
    pending = b''
    while True:
      chunk = f.read(_READ_CHUNK)
      if chunk:
        pending += chunk
      position = 0
      while len(pending) - position >= _RUN_HEADER.size:
        key, document, length = _RUN_HEADER.unpack_from(pending, position)
        end = position + _RUN_HEADER.size + length
        if end > len(pending):
          break
        yield key, document, pending[position + _RUN_HEADER.size : end]
        position = end
      pending = pending[position:]
      if not chunk:
        if pending:
          raise ValueError(f'{path}: truncated run file.')
        return


class RecordJob:
  """A worker's part of record creation: files in, runs and counters out.

  Records are buffered up to `buffer_bytes`, then written out as key-sorted
  runs, one per shard, into `run_dir`.
  """

  def __init__(
      self,
      settings: streaming.Settings,
      tokens: Sequence[str],
      eval_split: streaming.EvalSplit,
      run_dir: str,
      buffer_bytes: int,
  ):
    self._args = (settings, vocab_lib.as_vocabulary(tokens), eval_split)
    self._run_dir = run_dir
    self._buffer_bytes = buffer_bytes
    self._processor = None
    self._tag = None
    self._buffered: Dict[RunKey, List[Tuple[int, int, bytes]]] = {}
    self._size = 0
    self._spills = 0
    self.runs: Dict[RunKey, List[str]] = {}

  def start(self, worker: int) -> None:
    self._processor = streaming.FileProcessor(*self._args)
    self._tag = f'w{worker}'

  def process(
      self, input_file: streaming.InputFile, report: Callable[[int], None]
  ) -> streaming.RecordStats:
    """Buffers a file's records a group at a time; returns its counters.

    `report` gets the bytes read after each group (adding up to the file size).
    """
    stats = streaming.RecordStats()
    reported = 0
    for group in self._processor.process(input_file, stats):
      for split, shard, key, document, data in group:
        self._buffered.setdefault((split, shard), []).append(
            (key, document, data)
        )
        self._size += len(data) + 100
      if self._size >= self._buffer_bytes:
        self._flush()
      # At most the listed size: a file may grow after it is listed.
      done = min(stats.corpus.bytes_read, input_file.size)
      report(done - reported)
      reported = done
    report(input_file.size - reported)
    return stats

  def _flush(self) -> None:
    """Writes the buffered records as runs (one per shard) and empties it."""
    for (split, shard), keyed in sorted(self._buffered.items()):
      path = os.path.join(
          self._run_dir,
          f'{split}-{shard:05d}-{self._tag}-{self._spills:05d}.run',
      )
      # By key; ties (never seen yet) by content.
      write_run(path, sorted(keyed))
      self.runs.setdefault((split, shard), []).append(path)
    self._buffered.clear()
    self._size = 0
    self._spills += 1

  def finish(self) -> Dict[RunKey, List[str]]:
    self._flush()
    return self.runs


class SampleJob:
  """A worker's part of vocabulary sampling: files in, bottom-k samples out."""

  def __init__(
      self,
      settings: streaming.Settings,
      eval_split: streaming.EvalSplit,
      sample_size: int,
  ):
    self._args = (settings, eval_split)
    self._sample_size = sample_size

  def start(self, worker: int) -> None:
    del worker

  def process(
      self, input_file: streaming.InputFile, report: Callable[[int], None]
  ):
    """The file's bottom-k sample; `report` gets its size once read."""
    sample = streaming.sample_sentences(
        *self._args, input_file, self._sample_size
    )
    report(input_file.size)
    return sample

  def finish(self) -> None:
    return None


def _work(job, worker: int, tasks, send, between=None) -> None:
  """Runs `job` on files from `tasks` until a None, `send`ing its messages.

  `between` (or None) is called after each file. A helper (`worker` > 0)
  stops when the coordinating process is gone.
  """
  job.start(worker)
  parent = multiprocessing.parent_process() if worker else None
  while True:
    try:
      input_file = tasks.get(timeout=_POLL_SECONDS)
    except queue.Empty:
      if parent is not None and not parent.is_alive():
        return  # The coordinating process was killed: stop too.
      continue
    if input_file is None:
      break
    processed = job.process(
        input_file, lambda done: send(('bytes', done, None))
    )
    send(('file', input_file.size, processed))
    if between is not None:
      between()
  send(('finished', worker, job.finish()))


def _worker_main(job, worker: int, tasks, results) -> None:
  """A helper process: `_work` with its messages and errors to `results`."""
  try:
    # One TensorFlow thread per worker: the workers are the parallelism.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    _work(job, worker, tasks, results.put)
  except FileNotFoundError as error:
    results.put(('not_found', worker, str(error)))
  except cli.UserError as error:
    results.put(('user_error', worker, str(error)))
  except BaseException:  # pylint: disable=broad-except
    results.put(('error', worker, traceback.format_exc()))


def _start_ignoring_ctrl_c(process: multiprocessing.Process) -> None:
  """Starts a helper that never sees Ctrl-C: this process ends the helpers.

  It is started while SIGINT is blocked (kept through `exec`), so it prints no
  `KeyboardInterrupt` traceback; this process `terminate`s it on cleanup.
  """
  if threading.current_thread() is not threading.main_thread():
    process.start()  # Signals reach the main thread only.
    return
  signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
  try:
    process.start()  # Pickles `job` for the helper: before it starts here.
  finally:
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def run_jobs(
    job,
    files: Sequence[streaming.InputFile],
    num_workers: int,
    on_file: Callable[[Any], None],
    progress_label: str = '',
) -> List[Any]:
  """Runs `job` over `files` in this process and `num_workers - 1` others.

  This process is worker 0 (each holds a TensorFlow of about 0.7 GB, so a
  separate coordinator would cost one more). `on_file` gets each file's result
  here, as files finish. Returns the workers' `finish()` results.

  Raises:
    UserError, FileNotFoundError: a worker refused a file (as in one process).
    RuntimeError: a worker failed (its traceback) or died.
  """
  reporter = progress.Progress(
      sum(f.size for f in files), progress_label, 'bytes'
  )
  if num_workers <= 1:
    job.start(0)
    for input_file in files:
      on_file(job.process(input_file, reporter.advance))
    return [job.finish()]
  tasks, results, helpers = _start_helpers(job, files, num_workers)
  coordinator = _Coordinator(reporter, on_file, results)
  try:
    coordinator.work(job, tasks)
    coordinator.wait(helpers, num_workers)
  finally:
    for process in helpers:
      if process.is_alive():
        process.terminate()
      process.join()
  finished = coordinator.finished
  return [finished[worker] for worker in sorted(finished)]


def _start_helpers(job, files: Sequence[streaming.InputFile], num_workers: int):
  """The queues of files and of messages, and the started helpers."""
  context = multiprocessing.get_context('spawn')
  tasks, results = context.Queue(), context.Queue()
  for input_file in files:
    tasks.put(input_file)
  # One end marker per worker, this process included: each stops at the
  # first it takes, so each takes one.
  for _ in range(num_workers):
    tasks.put(None)
  helpers = [
      context.Process(
          target=_worker_main, args=(job, worker, tasks, results), daemon=True
      )
      for worker in range(1, num_workers)
  ]
  for process in helpers:
    _start_ignoring_ctrl_c(process)
  return tasks, results, helpers


class _Coordinator:
  """This process in `run_jobs`: worker 0, and the reader of `results`."""

  def __init__(self, reporter, on_file: Callable[[Any], None], results):
    self._reporter = reporter
    self._on_file = on_file
    self._results = results
    self.finished: Dict[int, Any] = {}

  def _handle(self, message) -> None:
    """Acts on one `(kind, info, payload)` message of a worker."""
    kind, info, payload = message
    if kind == 'bytes':
      self._reporter.advance(info)
    elif kind == 'file':
      self._on_file(payload)
    elif kind == 'finished':
      self.finished[info] = payload
    elif kind == 'user_error':
      raise cli.UserError(payload)
    elif kind == 'not_found':
      raise FileNotFoundError(payload)
    else:
      raise RuntimeError(f'record creation worker {info} failed:\n{payload}')

  def work(self, job, tasks) -> None:
    """Processes files from `tasks` here, handling messages between files."""
    _work(job, 0, tasks, self._handle, self._handle_waiting)

  def _handle_waiting(self) -> None:
    while True:
      try:
        self._handle(self._results.get_nowait())
      except queue.Empty:
        return

  def wait(self, helpers, num_workers: int) -> None:
    """Handles messages until every worker has finished."""
    while len(self.finished) < num_workers:
      try:
        self._handle(self._results.get(timeout=_POLL_SECONDS))
      except queue.Empty:
        _check_alive(helpers, self.finished)


def _check_alive(helpers, finished: Dict[int, Any]) -> None:
  for worker, process in enumerate(helpers, start=1):
    if worker not in finished and process.exitcode not in (None, 0):
      raise RuntimeError(
          f'record creation worker {worker} died (exit code '
          f'{process.exitcode}; killed for lack of memory?). Rerun with fewer '
          '--num_workers or a smaller --buffer_mb.'
      )


def merge_runs(
    runs: List[str], path: str, scratch_dir: str, reporter=None
) -> streaming.ShardSummary:
  """Writes a shard at `path` by merging its runs in key order.

  Intermediate runs go to `scratch_dir` past `_MAX_FAN_IN`; `reporter` (or
  None) advances per example.
  """
  level = 0
  while len(runs) > _MAX_FAN_IN:
    merged = []
    for group in range(0, len(runs), _MAX_FAN_IN):
      output = os.path.join(
          scratch_dir, f'{os.path.basename(path)}-{level}-{group}.run'
      )
      group_runs = [read_run(r) for r in runs[group : group + _MAX_FAN_IN]]
      write_run(output, heapq.merge(*group_runs))
      merged.append(output)
    runs, level = merged, level + 1
  return streaming.write_shard(
      heapq.merge(*[read_run(r) for r in runs]), path, reporter
  )


class LocalShards:
  """The result of the local run's first pass: counters and runs per shard."""

  def __init__(
      self,
      stats: streaming.RecordStats,
      runs: Dict[RunKey, List[str]],
      scratch_dir: str,
  ):
    self.stats = stats
    self._runs = runs
    self._scratch_dir = scratch_dir

  def write(
      self, output_dir: str, split: str, names: Sequence[str], label: str
  ) -> List[streaming.ShardSummary]:
    """Writes the shards `names` of `split` into `output_dir`."""
    reporter = progress.Progress(
        self.stats.splits[split].examples, label, 'examples'
    )
    return [
        merge_runs(
            self._runs.get((split, shard), []),
            os.path.join(output_dir, name),
            self._scratch_dir,
            reporter,
        )
        for shard, name in enumerate(names)
    ]


def run_local(
    files: Sequence[streaming.InputFile],
    settings: streaming.Settings,
    tokens: Sequence[str],
    eval_split: streaming.EvalSplit,
    scratch_dir: str,
    num_workers: int,
    buffer_bytes: int,
) -> LocalShards:
  """Every file into sorted runs in `scratch_dir` (`LocalShards.write`)."""
  job = RecordJob(settings, tokens, eval_split, scratch_dir, buffer_bytes)
  per_file = []
  finished = run_jobs(
      job, files, num_workers, per_file.append, 'process corpus'
  )
  runs: Dict[RunKey, List[str]] = {}
  for worker_runs in finished:
    for key, paths in worker_runs.items():
      runs.setdefault(key, []).extend(paths)
  return LocalShards(streaming.merge_stats(per_file), runs, scratch_dir)


def sample_corpus(
    files: Sequence[streaming.InputFile],
    settings: streaming.Settings,
    eval_split: streaming.EvalSplit,
    sample_size: int,
    num_workers: int,
) -> Tuple[List[str], int, text_cleaning.CorpusStats]:
  """`(at most sample_size train sentences, their population, stats)`.

  A seeded sample (see `streaming.sample_sentences`).
  """
  parts = []

  def on_file(result):
    parts.append(result)
    if sum(len(part[0]) for part in parts) > 2 * sample_size:
      parts[:] = [streaming.merge_samples(parts, sample_size)]

  run_jobs(
      SampleJob(settings, eval_split, sample_size),
      files,
      num_workers,
      on_file,
      'sample corpus for the vocabulary',
  )
  sample, population, stats = streaming.merge_samples(parts, sample_size)
  return [sentence for _, sentence in sample], population, stats


def effective_workers(requested: Optional[int], num_files: int) -> int:
  """Workers to start: `requested` (0 or None: all cores), <= one a file."""
  wanted = requested or os.cpu_count() or 1
  return max(1, min(wanted, num_files))
