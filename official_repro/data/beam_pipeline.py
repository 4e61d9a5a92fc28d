"""Record creation as an Apache Beam pipeline (Direct, Dataflow, Flink, Spark).

  Create(files) | Reshuffle | ParDo(FileProcessor.process) | GroupByKey
  (split, shard) -> sorted, `streaming.write_shard` to a scratch directory;
  counters summed (CombineGlobally) and pickled beside them.

A shard's bytes are the local run's; a shard is sorted in one worker's
memory, so choose `--num_shards` for it to fit. Paths go through
`tf.io.gfile`; the caller moves shards into place. Only this module imports
Apache Beam.
"""

import os
import pickle
import shlex
from typing import Any, Dict, List, Optional, Sequence, Tuple

import apache_beam as beam
from apache_beam.options import pipeline_options
import tensorflow as tf

from official_repro.common import json_files
from official_repro.common import progress
from official_repro.data import records
from official_repro.data import streaming
from official_repro.data import vocab as vocab_lib
from official_repro.data import text_cleaning

_STATS_FILE = 'stats.pickle'
_SUMMARIES_FILE = 'summaries.pickle'
_SAMPLE_FILE = 'sample.pickle'


def make_options(beam_options: str) -> pipeline_options.PipelineOptions:
  """Beam's pipeline options from a command-line string (shell quoting)."""
  return pipeline_options.PipelineOptions(shlex.split(beam_options or ''))


class _ProcessFile(beam.DoFn):
  """`FileProcessor.process` as a DoFn: examples by group, then counters."""

  def __init__(self, settings, tokens, eval_split):
    super().__init__()
    self._args = (settings, vocab_lib.as_vocabulary(tokens), eval_split)
    self._processor = None

  def setup(self):
    self._processor = streaming.FileProcessor(*self._args)

  def process(self, input_file):
    stats = streaming.RecordStats()
    for group in self._processor.process(input_file, stats):
      for split, shard, key, document, data in group:
        yield (split, shard), (key, document, data)
    yield beam.pvalue.TaggedOutput('stats', stats)


def _write_shard(item, scratch_dir: str, num_shards: Dict[str, int]):
  """Sorts one shard's examples by key and writes them (`write_shard`)."""
  (split, shard), keyed = item
  name = records.shard_file_names(split, num_shards[split])[shard]
  summary = streaming.write_shard(
      sorted(keyed), os.path.join(scratch_dir, name)
  )
  return split, summary


def _write_pickle(value: Any, path: str) -> None:
  json_files.write_bytes(path, pickle.dumps(value))


def _read_pickle(path: str) -> Any:
  with tf.io.gfile.GFile(path, 'rb') as f:
    return pickle.loads(f.read())


class BeamShards:
  """The result of the Beam run: counters and shards in a scratch directory."""

  def __init__(
      self,
      stats: streaming.RecordStats,
      summaries: List[Tuple[str, streaming.ShardSummary]],
      scratch_dir: str,
  ):
    self.stats = stats
    self._summaries = {(split, s.name): s for split, s in summaries}
    self._scratch_dir = scratch_dir

  def write(
      self, output_dir: str, split: str, names: Sequence[str], label: str
  ) -> List[streaming.ShardSummary]:
    """Moves the shards `names` of `split` into `output_dir` (empty too)."""
    reporter = progress.Progress(len(names), label, 'shards')
    summaries = []
    for name in names:
      summary = self._summaries.get((split, name))
      path = os.path.join(output_dir, name)
      if summary is None:
        summary = streaming.write_shard([], path)
      else:
        tf.io.gfile.rename(
            os.path.join(self._scratch_dir, name), path, overwrite=True
        )
      summaries.append(summary)
      reporter.advance()
    return summaries


def _spread_files(pipeline, files: Sequence[streaming.InputFile]):
  """The input files as a PCollection, spread over the workers."""
  return (
      pipeline
      | 'Files' >> beam.Create(list(files))
      | 'SpreadFiles' >> beam.Reshuffle()
  )


def run_beam(
    files: Sequence[streaming.InputFile],
    settings: streaming.Settings,
    tokens: Sequence[str],
    eval_split: streaming.EvalSplit,
    scratch_dir: str,
    beam_options: str,
) -> BeamShards:
  """Runs the record pipeline into the existing `scratch_dir`.

  `beam_options` is one command-line string. Returns the counters and shards,
  for `BeamShards.write`.
  """
  with beam.Pipeline(options=make_options(beam_options)) as pipeline:
    processed = _spread_files(pipeline, files) | 'Process' >> beam.ParDo(
        _ProcessFile(settings, tokens, eval_split)
    ).with_outputs('stats', main='examples')
    _ = (
        processed.examples
        | 'GroupByShard' >> beam.GroupByKey()
        | 'WriteShards'
        >> beam.Map(
            _write_shard,
            scratch_dir=scratch_dir,
            num_shards=dict(settings.num_shards),
        )
        | 'ListShards' >> beam.combiners.ToList()
        | 'SaveShards'
        >> beam.Map(
            _write_pickle, path=os.path.join(scratch_dir, _SUMMARIES_FILE)
        )
    )
    _ = (
        processed.stats
        | 'SumStats' >> beam.CombineGlobally(streaming.merge_stats)
        | 'SaveStats'
        >> beam.Map(_write_pickle, path=os.path.join(scratch_dir, _STATS_FILE))
    )
  return BeamShards(
      _read_pickle(os.path.join(scratch_dir, _STATS_FILE)),
      _read_pickle(os.path.join(scratch_dir, _SUMMARIES_FILE)),
      scratch_dir,
  )


def sample_with_beam(
    files: Sequence[streaming.InputFile],
    settings: streaming.Settings,
    eval_split: streaming.EvalSplit,
    sample_size: int,
    scratch_dir: str,
    beam_options: Optional[str],
) -> Tuple[List[str], int, text_cleaning.CorpusStats]:
  """The vocabulary sample (as `local_pipeline.sample_corpus`), on Beam."""
  path = os.path.join(scratch_dir, _SAMPLE_FILE)
  with beam.Pipeline(options=make_options(beam_options)) as pipeline:
    _ = (
        _spread_files(pipeline, files)
        | 'Sample'
        >> beam.Map(
            lambda f: streaming.sample_sentences(
                settings, eval_split, f, sample_size
            )
        )
        | 'Smallest'
        >> beam.CombineGlobally(streaming.merge_samples, sample_size)
        | 'Save' >> beam.Map(_write_pickle, path=path)
    )
  sample, count, stats = _read_pickle(path)
  return [sentence for _, sentence in sample], count, stats
