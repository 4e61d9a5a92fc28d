r"""Measures record creation's memory and speed as the corpus grows.

  python -m experiments.investigations.record_creation_scaling \
    --corpus=../shared/data/corpus/gutenberg \
    --vocab_file=../shared/data/vocab/bert_uncased_vocab.txt \
    --sizes_mb=40,160,1024 --workers=1,2 --beam_python=/path/to/venv/python \
    [--one_file] [--output_markdown=...] [--output_json=...]

Repeats a directory of books (symbolic links) up to each size, runs
`create_pretraining_data` with each `--workers` count (and the Beam
DirectRunner at the smallest), and reports wall time, MB/s, peak memory and
shard mixing, with an estimate of the papers' 16 GB corpus on Dataflow. Each
run is its own `subprocess.Popen`, not `commands.run_module`: it runs under
`/usr/bin/time -v`, maybe with `--beam_python`, and its memory is polled by pid.
"""

import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

from absl import flags
from absl import logging
import psutil

from experiments import provenance
from official_repro.common import cli
from official_repro.common import json_files
from official_repro.common import markdown
from official_repro.training import gin_utils

_PAPERS_CORPUS_GB = 16
_LAYOUTS = {
    False: 'Each corpus: copies of the books, one file a book, run with '
    '--document_mode=file --strip_gutenberg.',
    True: 'Each corpus: one file, the copies of the books concatenated, run '
    'with --document_mode=file (without --strip_gutenberg, which would keep '
    'only the first book) and so by one worker; its documents are the '
    "file's --group_mb pieces.",
}
_REPORTS = os.path.join(gin_utils.REPO_ROOT, 'experiments', 'reports')

FLAGS = flags.FLAGS


def define_flags():
  """Defines the command-line flags."""
  flags.DEFINE_string('corpus', None, 'Directory of books (*.txt) to repeat.')
  flags.DEFINE_string('vocab_file', None, 'WordPiece vocabulary.')
  flags.DEFINE_list(
      'sizes_mb', ['40', '160', '1024'], 'Corpus sizes to build (MB, >=).'
  )
  flags.DEFINE_list('workers', ['1', '2'], 'Local worker counts to measure.')
  flags.DEFINE_string(
      'beam_python',
      None,
      'A Python with apache-beam; measures the Beam DirectRunner at the '
      'smallest size (none: skipped).',
  )
  flags.DEFINE_string(
      'work_dir',
      '/tmp/record_creation_scaling',
      'Corpora and records go here (emptied first).',
  )
  flags.DEFINE_bool(
      'one_file',
      False,
      'Build each corpus as one file (the copies concatenated) instead of a '
      'directory of links, and run it without --strip_gutenberg.',
  )
  flags.DEFINE_integer('num_shards', 8, 'Train shards of every run.')
  flags.DEFINE_integer('max_seq_length', 128, 'Example length.')
  flags.DEFINE_string(
      'output_markdown',
      os.path.join(_REPORTS, 'record_creation_scaling.md'),
      'Write the table here.',
  )
  flags.DEFINE_string(
      'output_json',
      os.path.join(_REPORTS, 'record_creation_scaling.json'),
      'Write the measurements here.',
  )
  cli.require_flags('corpus', 'vocab_file')


def build_corpus(
    books: str, directory: str, size_mb: float, one_file: bool = False
) -> int:
  """Links (or with `one_file` concatenates) copies of `books` to `size_mb`.

  Symbolic links need a local file system, hence `os` and no remote corpus.
  Returns the bytes of text in `directory`.
  """
  if '://' in books:
    raise cli.UserError(
        f'--corpus {books}: the benchmark links local copies; give a local '
        'directory.'
    )
  names = sorted(n for n in os.listdir(books) if n.endswith('.txt'))
  if not names:
    raise cli.UserError(f'--corpus {books}: no *.txt files.')
  sources = [os.path.abspath(os.path.join(books, name)) for name in names]
  os.makedirs(directory)
  total, copy = 0, 0
  if one_file:
    with open(os.path.join(directory, 'corpus.txt'), 'wb') as output:
      while total < size_mb * 1e6:
        for source in sources:
          with open(source, 'rb') as f:
            shutil.copyfileobj(f, output)
          total += os.path.getsize(source)
    return total
  while total < size_mb * 1e6:
    target = os.path.join(directory, f'copy{copy:03d}')
    os.makedirs(target)
    for source in sources:
      os.symlink(source, os.path.join(target, os.path.basename(source)))
      total += os.path.getsize(source)
    copy += 1
  return total


class _TreeMemory(threading.Thread):
  """Samples the summed RSS of a process and its descendants."""

  def __init__(self, pid: int, interval: float = 0.2):
    super().__init__(daemon=True)
    self._pid, self._interval = pid, interval
    self.peak_bytes = 0
    self._done = threading.Event()

  def run(self):
    try:
      root = psutil.Process(self._pid)
    except psutil.Error:
      return
    while not self._done.is_set():
      try:
        processes = [root] + root.children(recursive=True)
        total = 0
        for process in processes:
          try:
            total += process.memory_info().rss
          except psutil.Error:
            pass
        self.peak_bytes = max(self.peak_bytes, total)
      except psutil.Error:
        return
      time.sleep(self._interval)

  def stop(self):
    self._done.set()
    self.join()


def measure_run(
    python: str, corpus: str, output_dir: str, engine: str, workers: int
) -> Dict[str, Any]:
  """Runs record creation once; its stats from `time -v` and the metadata."""
  command = [
      '/usr/bin/time',
      '-v',
      python,
      '-m',
      'official_repro.data.create_pretraining_data',
      f'--input={corpus}',
      f'--output_dir={output_dir}',
      f'--vocab_file={FLAGS.vocab_file}',
      '--lower_case',
      '--document_mode=file',
      f'--max_seq_length={FLAGS.max_seq_length}',
      '--masking=dynamic',
      f'--num_shards={FLAGS.num_shards}',
      f'--engine={engine}',
      f'--num_workers={workers}',
  ]
  if not FLAGS.one_file:
    command.append('--strip_gutenberg')
  started = time.time()
  process = subprocess.Popen(
      command,
      stdout=subprocess.DEVNULL,
      stderr=subprocess.PIPE,
      text=True,
      cwd=gin_utils.REPO_ROOT,
  )
  sampler = _TreeMemory(process.pid)
  sampler.start()
  _, stderr = process.communicate()
  sampler.stop()
  wall = time.time() - started
  if process.returncode != 0:
    raise RuntimeError(f'{" ".join(command)} failed:\n{stderr[-3000:]}')
  largest_kb = int(
      re.search(r'Maximum resident set size \(kbytes\): (\d+)', stderr).group(1)
  )
  metadata = json_files.read_json(os.path.join(output_dir, 'metadata.json'))
  stats = metadata['stats']
  input_bytes = stats['execution']['input_bytes']
  mixing = stats['splits']['train'].get('mixing', {})
  return {
      'engine': engine,
      'workers': workers if engine == 'local' else None,
      'input_mb': round(input_bytes / 1e6, 1),
      'input_files': stats['execution']['input_files'],
      'examples': metadata['splits']['train']['num_examples']
      + metadata['splits']['eval']['num_examples'],
      'wall_seconds': round(wall, 1),
      'mb_per_second': round(input_bytes / 1e6 / wall, 2),
      # Without the main process's imports (helper workers' start, each
      # importing TensorFlow, is still in): nearer the rate at scale.
      'mb_per_second_after_start_up': round(
          input_bytes / 1e6 / max(stats['seconds']['total'], 1e-3), 2
      ),
      'largest_process_peak_mb': round(largest_kb / 1024),
      'process_tree_peak_mb': round(sampler.peak_bytes / 2**20),
      'distinct_books_in_first_1000_min': mixing.get('distinct_documents_min'),
      'seconds': stats['seconds'],
  }


def dataflow_estimate(runs: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
  """The papers' corpus on Dataflow, from the largest one-worker run's rate."""
  one_worker = [r for r in runs if r['engine'] == 'local' and r['workers'] == 1]
  if not one_worker:
    return None
  rate = max(one_worker, key=lambda r: r['input_mb'])[
      'mb_per_second_after_start_up'
  ]
  core_hours = _PAPERS_CORPUS_GB * 1000 / rate / 3600
  return {
      'corpus_gb': _PAPERS_CORPUS_GB,
      'mb_per_second_per_core': rate,
      'core_hours': round(core_hours, 1),
      'minutes_on_64_vcpus': math.ceil(core_hours * 60 / 64),
      'minutes_on_256_vcpus': math.ceil(core_hours * 60 / 256),
  }


def render_markdown(
    runs: List[Dict[str, Any]],
    estimate: Optional[Dict[str, Any]],
    load: float,
    header: str,
) -> str:
  """The report, with 2 local workers' throughput over 1 size by size."""
  lines = [
      '# Record creation: memory and speed by corpus size',
      '',
      header,
      '',
      provenance.load_line(load),
      '',
      _LAYOUTS[FLAGS.one_file],
      '',
      *markdown.table(
          (
              'engine | workers | text MB | files | examples | wall s | MB/s '
              '| MB/s after imports | peak RSS, largest process MB | peak '
              'RSS, all processes MB | distinct books in first 1,000 '
              'examples (min over shards)'
          ).split(' | '),
          [
              (
                  '{engine}|{workers}|{input_mb:,}|{input_files:,}|'
                  '{examples:,}|{wall_seconds:,}|{mb_per_second}|'
                  '{mb_per_second_after_start_up}|{largest_process_peak_mb:,}|'
                  '{process_tree_peak_mb:,}|{distinct_books_in_first_1000_min}'
              )
              .format(**dict(r, workers=r['workers'] or '-'))
              .split('|')
              for r in runs
          ],
      ),
  ]
  by_size = {}
  for r in runs:
    if r['engine'] == 'local':
      by_size.setdefault(r['input_mb'], {})[r['workers']] = r
  speedups = []
  late = 'mb_per_second_after_start_up'
  for size, by_workers in sorted(by_size.items()):
    one, two = by_workers.get(1), by_workers.get(2)
    if one and two:
      speedups.append(
          f'{size:,} MB: {two["mb_per_second"] / one["mb_per_second"]:.2f}x '
          f'({two[late] / one[late]:.2f}x after imports)'
      )
  if speedups:
    lines += [
        '',
        'Throughput of 2 workers over 1: ' + '; '.join(speedups) + '. "After '
        'imports" leaves out the main process\'s imports but not the helper '
        "workers' start (a TensorFlow import each), which small corpora do "
        'not amortize.',
    ]
  if estimate:
    lines += [
        '',
        f'On paper: the papers\' {estimate["corpus_gb"]} GB corpus at the '
        f'measured {estimate["mb_per_second_per_core"]} MB/s per core is '
        f'{estimate["core_hours"]} core-hours: about '
        f'{estimate["minutes_on_64_vcpus"]} min on 64 Dataflow vCPUs (16 '
        f'n2-standard-4 workers), {estimate["minutes_on_256_vcpus"]} min on '
        '256, plus start-up (a few minutes) and the shuffle of the examples '
        '(about 2.5 bytes of records per byte of text), assuming a Dataflow '
        'vCPU processes text as fast as one core here.',
    ]
  return '\n'.join(lines) + '\n'


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  load = provenance.load_average()
  if load > provenance.BUSY_LOAD:
    logging.warning('Load average %.2f: the timings will not be clean.', load)
  if os.path.exists(FLAGS.work_dir):
    shutil.rmtree(FLAGS.work_dir)
  runs = []
  sizes = sorted(float(s) for s in FLAGS.sizes_mb)
  for index, size in enumerate(sizes):
    corpus = os.path.join(FLAGS.work_dir, f'corpus_{size:g}mb')
    build_corpus(FLAGS.corpus, corpus, size, FLAGS.one_file)
    # One file goes to one worker: more would measure the same run again.
    worker_counts = (
        [1] if FLAGS.one_file else sorted(set(FLAGS.workers), key=int)
    )
    plans = [('local', int(w), sys.executable) for w in worker_counts]
    if index == 0 and FLAGS.beam_python:
      plans.append(('beam', 1, FLAGS.beam_python))
    for engine, workers, python in plans:
      output_dir = os.path.join(
          FLAGS.work_dir, f'records_{size:g}mb_{engine}_{workers}'
      )
      logging.info('%s MB, %s engine, %d workers', size, engine, workers)
      runs.append(measure_run(python, corpus, output_dir, engine, workers))
      logging.info('%s', runs[-1])
      shutil.rmtree(output_dir)
    shutil.rmtree(corpus)
  estimate = dataflow_estimate(runs)
  header = provenance.provenance(
      'experiments.investigations.record_creation_scaling'
  )
  if FLAGS.output_json:
    json_files.write_json(
        FLAGS.output_json,
        {
            'provenance': header,
            'load': load,
            'runs': runs,
            'dataflow_estimate': estimate,
        },
    )
  markdown = render_markdown(runs, estimate, load, header)
  if FLAGS.output_markdown:
    json_files.write_text(FLAGS.output_markdown, markdown)
  print(markdown)


if __name__ == '__main__':
  define_flags()
  cli.run(main)
