"""Tests for official_repro.data.local_pipeline: workers, memory, reruns."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest
import tensorflow as tf

from tests.conftest import write_fixture_files
from tests.conftest import write_fixture_vocab
from official_repro.data import create_pretraining_data as cpd
from official_repro.data import local_pipeline
from official_repro.data import records
from official_repro.data import streaming

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def _shard_bytes(output_dir):
  return {
      name: tf.io.gfile.GFile(os.path.join(output_dir, name), 'rb').read()
      for name in sorted(tf.io.gfile.listdir(output_dir))
      if name.endswith('.tfrecord') or name == 'vocab.txt'
  }


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
  root = tmp_path_factory.mktemp('local_pipeline')
  write_fixture_files(root / 'corpus', num_files=4, num_documents=8)
  return str(root / 'corpus'), str(write_fixture_vocab(root / 'vocab.txt'))


def _prepare(corpus, output_dir, **options):
  settings = dict(
      vocab_file=corpus[1],
      max_seq_length=32,
      masking='static',
      dupe_factor=2,
      eval_fraction=0.2,
      num_shards=3,
      seed=11,
      num_workers=1,
  )
  settings.update(options)
  return cpd.prepare_pretraining_data([corpus[0]], output_dir, **settings)


def test_runs_round_trip_and_merge_in_key_order(tmp_path, monkeypatch):
  runs = []
  for index in range(5):
    keyed = [(k, k % 3, b'r%d' % k) for k in range(index, 200, 5)]
    path = str(tmp_path / f'{index}.run')
    local_pipeline.write_run(path, keyed)
    assert list(local_pipeline.read_run(path)) == keyed
    runs.append(path)
  # More runs than the fan-in: merged in two levels.
  monkeypatch.setattr(local_pipeline, '_MAX_FAN_IN', 2)
  summary = local_pipeline.merge_runs(
      runs, str(tmp_path / 'shard.tfrecord'), str(tmp_path)
  )
  assert summary.examples == 200
  written = tf.data.TFRecordDataset(str(tmp_path / 'shard.tfrecord'))
  assert [r.numpy() for r in written] == [b'r%d' % k for k in range(200)]
  local_pipeline.write_run(str(tmp_path / 'cut.run'), [(1, 1, b'abc')])
  data = (tmp_path / 'cut.run').read_bytes()
  (tmp_path / 'cut.run').write_bytes(data[:-1])
  with pytest.raises(ValueError, match='truncated'):
    list(local_pipeline.read_run(str(tmp_path / 'cut.run')))


class _HelperFirstJob:
  """A job whose worker 0 waits until a helper has processed a file.

  So a helper takes the last file and then an end marker before this
  process does.
  """

  def __init__(self, marker):
    self._marker = marker
    self._worker = None

  def start(self, worker):
    self._worker = worker

  def process(self, input_file, report):
    report(input_file.size)
    if self._worker == 0:
      deadline = time.time() + 120
      while not os.path.exists(self._marker) and time.time() < deadline:
        time.sleep(0.1)
    else:
      with open(self._marker, 'w') as f:
        f.write(input_file.name)
    return self._worker, input_file.name

  def finish(self):
    return self._worker


@pytest.mark.slow
def test_every_worker_stops_whoever_takes_the_last_file(tmp_path):
  files = [streaming.InputFile(f'/{n}', n, 1) for n in ('a.txt', 'b.txt')]
  done = []
  thread = threading.Thread(
      target=lambda: done.append(
          local_pipeline.run_jobs(
              _HelperFirstJob(str(tmp_path / 'marker')), files, 2, done.append
          )
      ),
      daemon=True,
  )
  thread.start()
  thread.join(timeout=180)
  assert not thread.is_alive(), 'run_jobs hung'
  assert sorted(done[:2]) == [(0, 'a.txt'), (1, 'b.txt')]
  assert done[2] == [0, 1]


class _HelperTakesAFileJob(local_pipeline.RecordJob):
  """A `RecordJob` whose worker 0 starts once a helper has done a file.

  So the files are shared between the workers, however quickly worker 0
  alone could process them.
  """

  marker = None  # Set by the test; kept by each instance (pickled).

  def __init__(self, *args):
    super().__init__(*args)
    self._marker = type(self).marker
    self._worker = None

  def start(self, worker):
    super().start(worker)
    self._worker = worker

  def process(self, input_file, report):
    if self._worker == 0:
      deadline = time.time() + 120
      while not os.path.exists(self._marker) and time.time() < deadline:
        time.sleep(0.05)
      return super().process(input_file, report)
    stats = super().process(input_file, report)
    with open(self._marker, 'w') as f:
      f.write(input_file.name)
    return stats


@pytest.mark.slow
def test_output_is_the_same_for_any_worker_count(corpus, tmp_path, monkeypatch):
  """Two workers and a small buffer write the bytes that one process does.

  Each file is several groups of documents (`--group_mb`), and the helper
  certainly processes some of the files: group boundaries and seeds depend
  on the file alone, not on the worker or on the files it did before (at
  700 characters the first file's text ends inside a group, so a worker
  carrying it over to its next file would change that file's groups).
  """
  group_mb = 700 / 2**20
  one = _prepare(corpus, str(tmp_path / 'one'), group_mb=group_mb)
  monkeypatch.setattr(
      _HelperTakesAFileJob, 'marker', str(tmp_path / 'helper_done')
  )
  monkeypatch.setattr(local_pipeline, 'RecordJob', _HelperTakesAFileJob)
  two = _prepare(
      corpus,
      str(tmp_path / 'two'),
      num_workers=2,
      buffer_mb=1,
      group_mb=group_mb,
  )
  assert (tmp_path / 'helper_done').exists()
  assert two['stats']['execution']['num_workers'] == 2
  assert one['stats']['groups'] == two['stats']['groups'] >= 2 * 4
  assert one['splits'] == two['splits']
  assert one['stats']['splits'] == two['stats']['splits']
  expected = _shard_bytes(str(tmp_path / 'one'))
  assert len(expected) == 5  # vocab.txt, 3 train shards, 1 eval shard.
  assert _shard_bytes(str(tmp_path / 'two')) == expected


def test_rerun_after_a_kill_removes_leftovers(corpus, tmp_path):
  """A killed run's scratch directory and half shard go; the rerun completes."""
  expected_dir = str(tmp_path / 'expected')
  expected = _prepare(corpus, expected_dir, num_workers=1)
  output_dir = tmp_path / 'records'
  scratch = output_dir / 'scratch.tmp-host-123-abc'
  scratch.mkdir(parents=True)
  (scratch / 'train-00000-w0-00000.run').write_bytes(b'partial')
  (output_dir / 'train-00001-of-00003.tfrecord.tmp-host-123-def').write_bytes(
      b'partial'
  )
  metadata = _prepare(corpus, str(output_dir), num_workers=1)
  assert sorted(os.listdir(output_dir)) == sorted(
      list(_shard_bytes(expected_dir)) + ['metadata.json']
  )
  assert _shard_bytes(str(output_dir)) == _shard_bytes(expected_dir)
  assert metadata['splits'] == expected['splits']


def test_a_corpus_error_leaves_earlier_records_complete(corpus, tmp_path):
  output_dir = str(tmp_path / 'records')
  _prepare(corpus, output_dir, num_workers=1)
  before = _shard_bytes(output_dir)
  with pytest.raises(ValueError, match='--max_unk_rate'):
    _prepare(
        corpus, output_dir, num_workers=1, max_unk_rate=0.0, lower_case=False
    )
  assert records.load_metadata(output_dir)
  assert _shard_bytes(output_dir) == before
  assert not [n for n in os.listdir(output_dir) if '.tmp-' in n]


class TestBadInput:

  def test_unreadable_file_is_skipped_counted_and_named(self, corpus, tmp_path):
    directory = tmp_path / 'corpus'
    write_fixture_files(directory, num_files=2, num_documents=8)
    (directory / 'gone.txt').symlink_to(tmp_path / 'missing.txt')
    metadata = _prepare((str(directory), corpus[1]), str(tmp_path / 'out'))
    corpus_stats = metadata['stats']['corpus']
    assert corpus_stats['files'] == 2
    assert corpus_stats['files_unreadable'] == 1
    assert corpus_stats['unreadable_files'][0].startswith(
        str(directory / 'gone.txt')
    )
    assert any(
        '1 input files could not be read' in w
        for w in (metadata['stats']['warnings'])
    )
    assert 'unreadable: ' + str(directory / 'gone.txt') in cpd.format_report(
        metadata
    )

  def test_binary_file_is_refused_or_counted(self, corpus, tmp_path):
    directory = tmp_path / 'corpus'
    write_fixture_files(directory, num_files=2, num_documents=8)
    (directory / 'noise.txt').write_bytes(bytes(range(256)) * 64)
    with pytest.raises(ValueError, match=r'noise.txt is not UTF-8: byte 128'):
      _prepare((str(directory), corpus[1]), str(tmp_path / 'out'))
    with pytest.raises(
        ValueError, match=r'8,192 undecodable byte sequences in 1 file'
    ):
      _prepare(
          (str(directory), corpus[1]),
          str(tmp_path / 'out'),
          encoding_errors='replace',
      )
    assert not os.path.exists(tmp_path / 'out' / 'metadata.json')

  def test_empty_corpus_names_what_was_read(self, corpus, tmp_path):
    directory = tmp_path / 'corpus'
    directory.mkdir()
    (directory / 'blank.txt').write_text('\n\n\n')
    (directory / 'gone.txt').symlink_to(tmp_path / 'missing.txt')
    with pytest.raises(
        ValueError,
        match=r'1 files read, 0 non-empty documents.*no text found.*'
        r'1 unreadable files skipped, e.g. .*gone.txt',
    ):
      _prepare((str(directory), corpus[1]), str(tmp_path / 'out'))


_MEMORY_SCRIPT = r"""
import json, os, resource, sys
from official_repro.data import create_pretraining_data as cpd
sys.path.insert(0, sys.argv[1])
import pathlib
from tests.conftest import write_fixture_files, write_fixture_vocab

root = pathlib.Path(sys.argv[2])
vocab = str(write_fixture_vocab(root / 'vocab.txt'))
runs = json.loads(sys.argv[3])

def reset_peak():
  # Linux: a peak of each run, not of the process (its start-up included).
  try:
    with open('/proc/self/clear_refs', 'w') as f:
      f.write('5')
  except OSError:
    pass

def peak_mb():
  # VmHWM, which clear_refs resets; ru_maxrss is not reset, and after exec
  # it starts from the parent's RSS (a pytest worker's, often larger).
  try:
    with open('/proc/self/status') as f:
      for line in f:
        if line.startswith('VmHWM:'):
          return int(line.split()[1]) // 1024
  except OSError:
    pass
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024

peaks = []
# The first run warms up (TensorFlow's first calls); it is not measured.
for name, num_files, num_documents, options in runs[:1] + runs:
  write_fixture_files(root / name, num_files, num_documents=num_documents)
  reset_peak()
  cpd.prepare_pretraining_data(
      [str(root / name)], str(root / (name + '_out')), vocab_file=vocab,
      max_seq_length=64, eval_fraction=0.0, num_workers=1, buffer_mb=1,
      **options)
  peaks.append(peak_mb())
print(json.dumps(peaks[1:]))
"""


def _peak_rss_mb(tmp_path, runs):
  """Peak RSS (MB) after each of `runs`, made in order in one new process.

  Args:
    tmp_path: where the corpora and records go.
    runs: `(name, num_files, num_documents, options)` each: a corpus of
      fixture files (`write_fixture_files`) and `prepare_pretraining_data`
      options for it.

  Returns:
    `(peaks, text_mb)`: the peak RSS of each run (on Linux; elsewhere the
    process's peak so far, which shows a run only when it needs more than
    the runs before it), and each corpus's MB of text.
  """
  completed = subprocess.run(
      [
          sys.executable,
          '-c',
          _MEMORY_SCRIPT,
          _REPO_ROOT,
          str(tmp_path),
          json.dumps(runs),
      ],
      capture_output=True,
      text=True,
      cwd=_REPO_ROOT,
      env=dict(os.environ, PYTHONPATH=_REPO_ROOT),
      check=False,
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  peaks = json.loads(completed.stdout.strip().splitlines()[-1])
  text_mb = [
      sum(f.size for f in streaming.list_input_files([str(tmp_path / name)]))
      / 2**20
      for name, *_ in runs
  ]
  return peaks, text_mb


@pytest.mark.slow
def test_memory_does_not_grow_with_the_corpus(tmp_path):
  """Peak RSS on a 30-file corpus stays near the peak on one of its files.

  Holding the corpus (the earlier implementation) grows the peak by about 20
  MB per MB of text: here by about 50 MB for the 2.3 MB more. The streaming
  run holds a file and a 1 MB buffer.
  """
  (small_mb, large_mb), (_, text_mb) = _peak_rss_mb(
      tmp_path, [('small', 1, 400, {}), ('large', 30, 400, {})]
  )
  assert text_mb > 2.0
  print(f'peak RSS {small_mb} MB, then {large_mb} MB with {text_mb:.1f} MB')
  assert large_mb - small_mb < 20, (small_mb, large_mb, text_mb)


@pytest.mark.slow
def test_memory_does_not_grow_with_the_file(tmp_path):
  """Peak RSS on one file 30 times the group budget stays near one group's.

  Holding a whole file (the earlier implementation) grows the peak by about
  20 MB per MB of the file: here by about 50 MB for the 2.5 MB more. Read
  as a stream, the file is processed in groups of 0.1 MB of text.
  """
  options = {'group_mb': 0.1}
  (small_mb, large_mb), (small_text, text_mb) = _peak_rss_mb(
      tmp_path,
      [('small', 1, 400, options), ('large', 1, 10_000, options)],
  )
  assert small_text < 0.15 and text_mb > 25 * options['group_mb']
  print(f'peak RSS {small_mb} MB, then {large_mb} MB with {text_mb:.1f} MB')
  assert large_mb - small_mb < 20, (small_mb, large_mb, text_mb)


@pytest.mark.slow
def test_rerun_after_sigkill_writes_the_uninterrupted_records(tmp_path):
  """A run killed (SIGKILL) mid-way leaves no complete-looking directory.

  Its helper process stops too, and the same command then writes the
  records of an uninterrupted run.
  """
  corpus = write_fixture_files(tmp_path / 'corpus', 24, num_documents=300)
  vocab = write_fixture_vocab(tmp_path / 'vocab.txt')

  def command(output_dir):
    return [
        sys.executable,
        '-m',
        'official_repro.data.create_pretraining_data',
        f'--input={corpus}',
        f'--output_dir={output_dir}',
        f'--vocab_file={vocab}',
        '--max_seq_length=32',
        '--num_shards=2',
        '--num_workers=2',
        '--buffer_mb=1',
    ]

  env = dict(os.environ, PYTHONPATH=_REPO_ROOT)
  subprocess.run(
      command(tmp_path / 'expected'),
      cwd=_REPO_ROOT,
      env=env,
      check=True,
      capture_output=True,
  )
  output_dir = tmp_path / 'records'
  process = subprocess.Popen(
      command(output_dir),
      cwd=_REPO_ROOT,
      env=env,
      stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL,
  )
  deadline = time.time() + 300
  while time.time() < deadline:
    scratch = [p for p in output_dir.glob('scratch.tmp-*')]
    if scratch and list(scratch[0].glob('*.run')):
      break
    time.sleep(0.2)
  helpers = psutil.Process(process.pid).children(recursive=True)
  process.kill()
  process.wait()
  assert not (output_dir / 'metadata.json').exists()
  assert list(output_dir.glob('scratch.tmp-*'))
  psutil.wait_procs(helpers, timeout=30)
  assert not [h for h in helpers if h.is_running()]
  subprocess.run(
      command(output_dir),
      cwd=_REPO_ROOT,
      env=env,
      check=True,
      capture_output=True,
  )
  assert not list(output_dir.glob('*.tmp-*'))
  assert _shard_bytes(str(output_dir)) == _shard_bytes(
      str(tmp_path / 'expected')
  )


def _processed_shares(lines):
  """The percentages of the 'process corpus' lines, and whether it ended."""
  own = [line for line in lines if line.startswith('process corpus: ')]
  shares = [
      float(line.split('(')[1].split('%')[0]) for line in own if '%)' in line
  ]
  return shares, any('done in' in line for line in own)


def test_progress_is_logged_inside_a_file(
    tmp_path, monkeypatch, progress_lines
):
  """One file of many groups logs the bytes read as each group is done.

  A file reported only when finished (the unit of work before groups) logs
  nothing until it is done: for minutes on a file of gigabytes. Here the
  file is read 8 KB at a time and processed in groups of 4,000 characters.
  """
  from official_repro.data import text_cleaning  # pylint: disable=g-import-not-at-top

  monkeypatch.setattr(text_cleaning, '_READ_CHUNK', 8192)
  root = write_fixture_files(tmp_path / 'corpus', 1, num_documents=400)
  vocab = write_fixture_vocab(tmp_path / 'vocab.txt')
  lines = progress_lines
  _prepare(
      (str(root), str(vocab)), str(tmp_path / 'out'), group_mb=4000 / 2**20
  )
  shares, done = _processed_shares(lines)
  assert len(shares) >= 5 and shares == sorted(shares), lines
  assert 0 < shares[0] and shares[-1] < 100 and done, shares


@pytest.mark.slow
def test_progress_counts_every_workers_bytes(
    corpus, tmp_path, monkeypatch, progress_lines
):
  """The bytes a helper process reports reach the total."""
  monkeypatch.setattr(
      _HelperTakesAFileJob, 'marker', str(tmp_path / 'helper_done')
  )
  monkeypatch.setattr(local_pipeline, 'RecordJob', _HelperTakesAFileJob)
  lines = progress_lines
  _prepare(corpus, str(tmp_path / 'out'), num_workers=2)
  shares, done = _processed_shares(lines)
  assert done and shares == sorted(shares), lines


@pytest.mark.slow
def test_ctrl_c_while_helpers_start_is_one_line_and_the_rerun_succeeds(
    tmp_path,
):
  """Ctrl-C reaches the terminal's whole process group: helpers included.

  Sent while the helper imports TensorFlow, the helper ignores it (no
  `KeyboardInterrupt` traceback) and the command prints its one stop line.
  """
  corpus = write_fixture_files(tmp_path / 'corpus', 4, num_documents=50)
  vocab = write_fixture_vocab(tmp_path / 'vocab.txt')
  command = [
      sys.executable,
      '-m',
      'official_repro.data.create_pretraining_data',
      f'--input={corpus}',
      f'--output_dir={tmp_path / "records"}',
      f'--vocab_file={vocab}',
      '--max_seq_length=32',
      '--num_workers=2',
  ]
  env = dict(os.environ, PYTHONPATH=_REPO_ROOT)
  process = subprocess.Popen(
      command,
      cwd=_REPO_ROOT,
      env=env,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
      start_new_session=True,  # Its own group, as a terminal's job.
  )
  deadline = time.time() + 300
  helpers = []
  while not helpers:
    assert process.poll() is None and time.time() < deadline
    helpers = [
        child
        for child in psutil.Process(process.pid).children()
        if 'spawn_main' in ' '.join(child.cmdline())
    ]
    time.sleep(0.05)
  time.sleep(1)  # The helper is importing TensorFlow.
  # As a terminal does: to every process of the group, helper first.
  os.kill(helpers[0].pid, signal.SIGINT)
  time.sleep(1)
  assert helpers[0].is_running() and helpers[0].status() != 'zombie'
  os.killpg(process.pid, signal.SIGINT)
  _, stderr = process.communicate(timeout=120)
  assert process.returncode == 128 + signal.SIGINT, stderr[-3000:]
  assert 'Traceback' not in stderr and 'KeyboardInterrupt' not in stderr
  assert stderr.count('stopped by SIGINT') == 1, stderr[-3000:]
  rerun = subprocess.run(
      command, cwd=_REPO_ROOT, env=env, capture_output=True, text=True
  )
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert records.load_metadata(str(tmp_path / 'records'))['splits']
