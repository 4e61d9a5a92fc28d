"""Record creation's per-file transforms, shared by the local and Beam runs.

A file is processed independently of the others, in groups of about
`Settings.group_chars` characters of documents: clean -> train/eval by a
seeded hash (`EvalSplit`) -> tokenize -> pack -> optionally mask -> serialize
with a 64-bit key hashed from (split, file, document, instance, copy). An
example goes to shard `key % num_shards`, in key order, so the records depend
on the corpus and seed alone, whatever the workers, runner or corpus path.
"""

import collections
import dataclasses
import fnmatch
import hashlib
import heapq
import os
import random
import re
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence
from typing import Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from official_repro.common import json_files
from official_repro.data import masking as masking_lib
from official_repro.data import pretraining_instances
from official_repro.data import records
from official_repro.data import text_cleaning
from official_repro.data import vocab as vocab_lib

# A word of ASCII letters only: 'w00', 'B2B' or 'café' are not one.
_LETTER_WORD = re.compile(r'(?<!\w)[A-Za-z]+(?!\w)')
# Examples at the start of a shard whose source documents are counted to
# measure how well the shard is mixed (`ShardSummary.distinct_documents`).
MIXING_WINDOW = 1000
_MASK_BATCH_SIZE = 256


def stable_hash(*parts: Any) -> int:
  """A 64-bit hash of `parts` (their `str`), the same in every process."""
  text = '\x1f'.join(str(part) for part in parts)
  digest = hashlib.blake2b(text.encode('utf-8'), digest_size=8).digest()
  return int.from_bytes(digest, 'big')


@dataclasses.dataclass(frozen=True)
class InputFile:
  """One file of the corpus.

  `name` seeds everything: the path relative to its input directory (the base
  name for a file given directly), `@<input index>` appended for a repeated
  name. `size` is in bytes (0 if unreadable).
  """

  path: str
  name: str
  size: int


# File names that together mark a folder written by this repository:
# records, a training run, an export.
_OUTPUT_MARKERS = (
    {'metadata.json', 'vocab.txt'},
    {'metadata.json', 'spiece.model'},
    {'model_config.json', 'config.gin'},
    {'encoder_config.json', 'vocab.txt'},
    {'encoder_config.json', 'spiece.model'},
)


def list_input_files(
    inputs: Sequence[str],
    file_pattern: str = '*.txt',
    output_dir: Optional[str] = None,
) -> List[InputFile]:
  """The corpus's files (`InputFile`s), in `text_cleaning.find_files` order.

  Folders this repository wrote (`_OUTPUT_MARKERS`), `output_dir` and its
  temporary siblings are left out, with a warning naming them.
  """
  if not inputs:
    text_cleaning.find_files(inputs, file_pattern)  # Raises its UserError.
  files, seen_paths, seen_names = [], set(), set()
  skipped, pruned = [], []
  prune = _output_pruner(output_dir, pruned)
  for index, root in enumerate(inputs):
    for path in text_cleaning.find_files([root], file_pattern, skipped, prune):
      if path in seen_paths:
        continue
      seen_paths.add(path)
      if tf.io.gfile.isdir(root):
        name = path[len(root.rstrip('/')) + 1 :]
      else:
        name = os.path.basename(path)
      if name in seen_names:
        name = f'{name}@{index}'
      seen_names.add(name)
      try:
        size = tf.io.gfile.stat(path).length
      except tf.errors.OpError:
        size = 0
      files.append(InputFile(path, name, size))
  _warn_left_out(pruned, skipped, file_pattern)
  return files


def _output_pruner(output_dir: Optional[str], pruned: List[str]):
  """`find_files`'s `prune`: True (and noted in `pruned`) for our folders."""
  output = (
      text_cleaning.real_path(output_dir.rstrip('/')) if output_dir else None
  )

  def prune(directory: str, names: List[str]) -> bool:
    here = text_cleaning.real_path(directory)
    ours = any(marker <= set(names) for marker in _OUTPUT_MARKERS) or (
        output is not None
        and (here == output or here.startswith(output + '.tmp-'))
    )
    if ours:
      pruned.append(directory)
    return ours

  return prune


def _first_ten(paths: List[str]) -> str:
  return ', '.join(sorted(paths)[:10]) + (' ...' if len(paths) > 10 else '')


def _warn_left_out(
    pruned: List[str], skipped: List[str], file_pattern: str
) -> None:
  """Warns of the folders and files that `list_input_files` left out."""
  if pruned:
    logging.warning(
        'Left out %d folder(s) of the input that this repository wrote '
        '(records, runs, exports, the output): %s',
        len(pruned),
        _first_ten(pruned),
    )
  if skipped:
    case_only = [
        path
        for path in skipped
        if fnmatch.fnmatch(os.path.basename(path).lower(), file_pattern.lower())
    ]
    logging.warning(
        '--file_pattern %r left out %d file(s) of the input folders%s: %s',
        file_pattern,
        len(skipped),
        f' ({len(case_only)} of them match but for the case)'
        if case_only
        else '',
        _first_ten(skipped),
    )


class EvalSplit:
  """Which documents are held out for eval, decided per document by a hash.

  'file' mode: the `max(1, round(fraction * n))` files (never all) of smallest
  seeded name hash; a single file holds out the last `fraction` of each
  document's sentences. Otherwise each document whose seeded hash of (file,
  index) falls below `fraction`.
  """

  def __init__(
      self,
      files: Sequence[InputFile],
      document_mode: str,
      eval_fraction: float,
      seed: int,
  ):
    """Decides the split; `eval_fraction` in [0, 1)."""
    self.eval_fraction = eval_fraction
    self.seed = seed
    self.num_files = len(files)
    self.eval_files = frozenset()
    if eval_fraction <= 0.0:
      self.mode = 'none'
    elif document_mode == 'file' and len(files) == 1:
      self.mode = 'last_sentences'
    elif document_mode == 'file':
      self.mode = 'files'
      count = min(len(files) - 1, max(1, round(eval_fraction * len(files))))
      ranked = sorted(files, key=lambda f: stable_hash(seed, 'eval', f.name))
      self.eval_files = frozenset(f.name for f in ranked[:count])
    else:
      self.mode = 'documents'

  def describe(self, documents: Dict[str, int]) -> str:
    """How the split was made, given the documents per split (one sentence)."""
    train, held_out = documents['train'], documents['eval']
    if self.mode == 'none':
      return 'no eval split (eval_fraction is 0)'
    if self.mode == 'last_sentences' and held_out > 1:
      return (
          f'the corpus is a single file, read as {held_out} documents (one '
          'per --group_mb of text), so the last '
          f'{self.eval_fraction:.1%} of the sentences of each are held out '
          'for eval'
      )
    if self.mode == 'last_sentences':
      return (
          'the corpus is a single document, so its last '
          f'{self.eval_fraction:.1%} of sentences are held out for eval'
      )
    if self.mode == 'files':
      return (
          f'{len(self.eval_files)} of {self.num_files} files held out for '
          'eval (the files with the smallest seeded hash of their name; '
          f'{held_out} of them non-empty)'
      )
    return (
        f'{held_out} of {train + held_out} documents held out for eval (each '
        f'with probability {self.eval_fraction}, by a seeded hash)'
    )

  def assign(
      self, name: str, index: int, sentences: List[str]
  ) -> List[Tuple[str, List[str]]]:
    """The `(split, sentences)` parts of document `index` of file `name`."""
    if self.mode == 'none':
      return [('train', sentences)]
    if self.mode == 'last_sentences':
      num_eval = min(
          len(sentences) - 1,
          max(1, round(self.eval_fraction * len(sentences))),
      )
      if num_eval < 1:
        return [('train', sentences)]
      return [('train', sentences[:-num_eval]), ('eval', sentences[-num_eval:])]
    if self.mode == 'files':
      held_out = name in self.eval_files
    else:
      unit = stable_hash(self.seed, 'eval', name, index) / 2.0**64
      held_out = unit < self.eval_fraction
    return [('eval' if held_out else 'train', sentences)]


@dataclasses.dataclass
class TokenizationStats:
  """Counters of the tokenization step.

  `letter_words` counts words of ASCII letters before WordPiece and
  `single_letter_words` those of one letter (most of them in a text read in the
  wrong encoding); `unk_rate` is `unk_tokens / tokens`.
  """

  sentences: int = 0
  empty_sentences: int = 0
  tokens: int = 0
  unk_tokens: int = 0
  letter_words: int = 0
  single_letter_words: int = 0
  unk_rate: float = 0.0


@dataclasses.dataclass
class SplitStats:
  """Counters of one split; `examples` is instances times `dupe_factor`."""

  documents: int = 0
  sentences: int = 0
  tokenization: TokenizationStats = dataclasses.field(
      default_factory=TokenizationStats
  )
  instances: pretraining_instances.InstanceStats = dataclasses.field(
      default_factory=pretraining_instances.InstanceStats
  )
  examples: int = 0
  masked_lm_predictions: int = 0


@dataclasses.dataclass
class RecordStats:
  """Counters of record creation over some files; `add` sums two."""

  corpus: text_cleaning.CorpusStats = dataclasses.field(
      default_factory=text_cleaning.CorpusStats
  )
  splits: Dict[str, SplitStats] = dataclasses.field(
      default_factory=lambda: {split: SplitStats() for split in records.SPLITS}
  )
  groups: int = 0

  def add(self, other: 'RecordStats') -> 'RecordStats':
    """Adds `other`'s counters to these; returns self."""
    text_cleaning.add_counts(self, other)
    for split in records.SPLITS:
      tokenization = self.splits[split].tokenization
      tokenization.unk_rate = tokenization.unk_tokens / max(
          1, tokenization.tokens
      )
    return self

  def total_tokenization(self) -> TokenizationStats:
    """The tokenization counters of both splits together."""
    total = TokenizationStats()
    for split in records.SPLITS:
      text_cleaning.add_counts(total, self.splits[split].tokenization)
    total.unk_rate = total.unk_tokens / max(1, total.tokens)
    return total


def merge_stats(parts: Iterable[RecordStats]) -> RecordStats:
  """The sum of `parts` (e.g. the stats of every file)."""
  total = RecordStats()
  for part in parts:
    total.add(part)
  return total


@dataclasses.dataclass(frozen=True)
class Settings:
  """What the per-file transforms need; one object for every worker.

  `masking` is None for dynamic masking; `num_shards` is
  `{'train': n, 'eval': m}`; `group_chars` bounds the characters of a group of
  documents (`FileProcessor.process`).
  """

  cleaning: text_cleaning.CleaningOptions
  instances: pretraining_instances.InstanceOptions
  masking: Optional[masking_lib.MaskingConfig]
  dupe_factor: int
  lower_case: bool
  num_shards: Dict[str, int]
  seed: int
  group_chars: int


# An example on its way to a shard: `key` orders the shard; `document` (a
# hash of the source document) measures mixing; `data` is the serialized
# `tf.train.Example`.
Record = collections.namedtuple('Record', 'split shard key document data')


def letter_words(sentence: str) -> Tuple[int, int]:
  """`(words of ASCII letters only, of which single letters)` in a sentence.

  Words are bounded by non-word characters, so 'w00' or 'café' are not words
  of letters; 'T h e' is three.
  """
  lengths = [len(word) for word in _LETTER_WORD.findall(sentence)]
  return len(lengths), lengths.count(1)


class FileProcessor:
  """Turns one input file into its keyed, serialized examples and counters."""

  def __init__(
      self, settings: Settings, tokens: Sequence[str], eval_split: EvalSplit
  ):
    """Builds the tokenizer and, for static masking, the masking function."""
    self._settings = settings
    self._eval_split = eval_split
    self._reader = text_cleaning.CorpusReader(settings.cleaning)
    self._tokenizer = vocab_lib.SentenceTokenizer(tokens, settings.lower_case)
    special_ids = vocab_lib.SpecialTokenIds.from_vocab(tokens)
    self._special_ids, vocab_size = special_ids, len(tokens)
    self._mask_fn = None
    if settings.masking is not None:
      # `masking.mask_batch`, traced once for batches of `[None, T]`.
      seq_length = settings.instances.max_seq_length
      self._mask_fn = tf.function(
          lambda ids, mask, batch_seed: masking_lib.mask_batch(
              ids,
              mask,
              config=settings.masking,
              mask_token_id=special_ids.mask,
              special_token_ids=special_ids.all_ids(),
              vocab_size=vocab_size,
              seed=batch_seed,
          ),
          input_signature=[
              tf.TensorSpec([None, seq_length], tf.int32),
              tf.TensorSpec([None, seq_length], tf.int32),
              tf.TensorSpec([2], tf.int64),
          ],
      )

  def process(
      self, input_file: InputFile, stats: RecordStats
  ) -> Iterator[List[Record]]:
    """Yields the records of one file, a group of documents at a time.

    A group ends after the document bringing its text to `group_chars`
    characters, so boundaries depend on the text alone. A document's index
    in the file seeds its split, instances and keys; random-next segments
    come from its group and split; static masking numbers its batches on
    across groups.
    """
    budget = self._settings.group_chars
    documents = self._reader.iter_documents(
        input_file.path, stats.corpus, budget
    )
    batches = {split: 0 for split in records.SPLITS}
    group, size = [], 0
    for index, sentences in enumerate(documents):
      group.append((index, sentences))
      size += sum(len(sentence) for sentence in sentences)
      if size >= budget:
        yield self._group_records(input_file.name, group, batches, stats)
        group, size = [], 0
    if group:
      yield self._group_records(input_file.name, group, batches, stats)

  def _group_records(
      self,
      name: str,
      group: List[Tuple[int, List[str]]],
      batches: Dict[str, int],
      stats: RecordStats,
  ) -> List[Record]:
    """The records of a group of `(index, sentences)` documents of a file."""
    stats.groups += 1
    parts = {split: [] for split in records.SPLITS}
    for index, sentences in group:
      for split, part in self._eval_split.assign(name, index, sentences):
        parts[split].append((index, part))
    output = []
    for split in records.SPLITS:
      if parts[split]:
        output.extend(
            self._split_records(name, split, parts[split], batches, stats)
        )
    return output

  def _split_records(
      self,
      name: str,
      split: str,
      documents: List[Tuple[int, List[str]]],
      batches: Dict[str, int],
      stats: RecordStats,
  ) -> List[Record]:
    """Tokenizes, packs, masks and serializes a group's documents of a split.

    `documents` are `(index in the file, sentences)`; `batches` (masking batches
    used so far per split) is advanced.
    """
    split_stats = stats.splits[split]
    split_stats.documents += len(documents)
    packed = self._tokenize(documents, split_stats)
    instances, sources = self._pack(name, split, packed, split_stats)
    if not instances:
      return []
    features = instances_to_features(
        instances,
        self._settings.instances.max_seq_length,
        self._settings.instances.next_sentence_prediction,
    )
    copies = [features]
    if self._mask_fn is not None:
      copies = [
          self._mask(features, name, split, dupe, batches[split])
          for dupe in range(self._settings.dupe_factor)
      ]
      batches[split] += -(-len(instances) // _MASK_BATCH_SIZE)
    output = self._serialize(name, split, copies, sources, split_stats)
    split_stats.examples += len(output)
    return output

  def _tokenize(
      self, documents: List[Tuple[int, List[str]]], split_stats: SplitStats
  ) -> List[Tuple[int, List[List[int]]]]:
    """Each document's `(index, non-empty sentences of token ids)`, counted."""
    flat = [sentence for _, sentences in documents for sentence in sentences]
    split_stats.sentences += len(flat)
    ids = self._tokenizer(flat)
    tokenization = split_stats.tokenization
    tokenization.sentences += len(flat)
    for sentence in flat:
      words, single = letter_words(sentence)
      tokenization.letter_words += words
      tokenization.single_letter_words += single
    packed, position = [], 0
    for index, sentences in documents:
      kept = [s for s in ids[position : position + len(sentences)] if s]
      position += len(sentences)
      tokenization.empty_sentences += len(sentences) - len(kept)
      tokenization.tokens += sum(len(s) for s in kept)
      tokenization.unk_tokens += sum(
          s.count(self._special_ids.unk) for s in kept
      )
      packed.append((index, kept))
    return packed

  def _pack(
      self,
      name: str,
      split: str,
      packed: List[Tuple[int, List[List[int]]]],
      split_stats: SplitStats,
  ) -> Tuple[List[pretraining_instances.Instance], List[Tuple[int, int]]]:
    """The instances of the documents, and the `(index, number)` of each."""
    maker = pretraining_instances.InstanceMaker(
        self._settings.instances,
        self._special_ids.cls,
        self._special_ids.sep,
    )
    packed = [(i, maker.cut_long_sentences(kept)) for i, kept in packed]
    packed = [(index, document) for index, document in packed if document]
    pool = [document for _, document in packed]
    instances, sources = [], []
    for position, (index, _) in enumerate(packed):
      rng = random.Random(f'{self._settings.seed}-{split}-{name}-{index}')
      made = maker.from_document(pool, position, rng)
      instances.extend(made)
      sources.extend((index, number) for number in range(len(made)))
    text_cleaning.add_counts(split_stats.instances, maker.stats)
    return instances, sources

  def _serialize(
      self,
      name: str,
      split: str,
      copies: List[Dict[str, np.ndarray]],
      sources: List[Tuple[int, int]],
      split_stats: SplitStats,
  ) -> List[Record]:
    """The records of each copy's rows (`[N, T]` features), keyed by hash."""
    seed, num_shards = self._settings.seed, self._settings.num_shards[split]
    output = []
    for dupe, copy in enumerate(copies):
      if 'masked_lm_weights' in copy:
        split_stats.masked_lm_predictions += int(
            copy['masked_lm_weights'].sum()
        )
      for row, (index, number) in enumerate(sources):
        key = stable_hash(seed, split, name, index, number, dupe)
        example = records.make_example({k: v[row] for k, v in copy.items()})
        output.append(
            Record(
                split,
                key % num_shards,
                key,
                stable_hash(name, index),
                example.SerializeToString(deterministic=True),
            )
        )
    return output

  def _mask(
      self,
      features: Dict[str, np.ndarray],
      name: str,
      split: str,
      dupe: int,
      first_batch: int,
  ) -> Dict[str, np.ndarray]:
    """One masked copy; batch `b` seeded by (seed, file, split, copy, b).

    Batches are numbered from `first_batch` (earlier groups' come first).
    """
    num = len(features['input_ids'])
    outputs = []
    for batch, begin in enumerate(
        range(0, num, _MASK_BATCH_SIZE), start=first_batch
    ):
      rows = slice(begin, begin + _MASK_BATCH_SIZE)
      batch_hash = stable_hash(name, split, dupe, batch) >> 1
      result = self._mask_fn(
          features['input_ids'][rows],
          features['input_mask'][rows],
          tf.constant([self._settings.seed, batch_hash], tf.int64),
      )
      outputs.append({k: v.numpy() for k, v in result.items()})
    copy = dict(features)
    copy['input_ids'] = np.concatenate([o['input_word_ids'] for o in outputs])
    for name_ in ('masked_lm_positions', 'masked_lm_ids', 'masked_lm_weights'):
      copy[name_] = np.concatenate([o[name_] for o in outputs])
    return copy


def files_to_sample(
    files: Sequence[InputFile], seed: int, budget_bytes: int
) -> List[InputFile]:
  """A seeded choice of files of about `budget_bytes` of text, in order."""
  ranked = sorted(files, key=lambda f: stable_hash(seed, 'vocab', f.name))
  chosen, total = set(), 0
  for input_file in ranked:
    if total >= budget_bytes:
      break
    chosen.add(input_file.name)
    total += input_file.size
  return [f for f in files if f.name in chosen]


def sample_sentences(
    settings: Settings,
    eval_split: EvalSplit,
    input_file: InputFile,
    sample_size: int,
) -> Tuple[List[Tuple[int, str]], int, text_cleaning.CorpusStats]:
  """The `sample_size` train sentences of a file with the smallest seeded hash.

  Bottom-k sampling: a uniform sample without replacement whichever worker
  reads which file (merge files' samples with `heapq.nsmallest`). Returns
  `(sample of (hash, sentence), train sentences in the file, stats)`.
  """
  reader = text_cleaning.CorpusReader(settings.cleaning)
  stats = text_cleaning.CorpusStats()
  population = [0]

  def train_sentences() -> Iterator[Tuple[int, str]]:
    documents = reader.iter_documents(
        input_file.path, stats, settings.group_chars
    )
    for index, sentences in enumerate(documents):
      for split, part in eval_split.assign(input_file.name, index, sentences):
        if split != 'train':
          continue
        population[0] += len(part)
        for number, sentence in enumerate(part):
          key = stable_hash(
              settings.seed, 'vocab', input_file.name, index, number
          )
          yield key, sentence

  sample = heapq.nsmallest(sample_size, train_sentences())
  return sample, population[0], stats


def merge_samples(parts: Iterable[Any], sample_size: int) -> Any:
  """`sample_sentences` results of several files merged into one.

  Not annotated further: Beam would code a hinted `int` as a signed 64-bit
  one, which the unsigned hashes overflow.
  """
  sample, population, stats = [], 0, text_cleaning.CorpusStats()
  for part_sample, part_population, part_stats in parts:
    sample.extend(part_sample)
    population += part_population
    text_cleaning.add_counts(stats, part_stats)
  return heapq.nsmallest(sample_size, sample), population, stats


def instances_to_features(
    instances: Sequence[pretraining_instances.Instance],
    max_seq_length: int,
    next_sentence_labels: bool,
) -> Dict[str, np.ndarray]:
  """Pads instances into feature arrays of length `T = max_seq_length`.

  Returns `input_ids`, `input_mask`, `segment_ids`: int32 `[N, T]`, zero padded;
  `next_sentence_labels`: int32 `[N, 1]` if `next_sentence_labels`.
  """
  num = len(instances)
  features = {
      'input_ids': np.zeros((num, max_seq_length), np.int32),
      'input_mask': np.zeros((num, max_seq_length), np.int32),
      'segment_ids': np.zeros((num, max_seq_length), np.int32),
  }
  for row, instance in enumerate(instances):
    length = len(instance.input_ids)
    features['input_ids'][row, :length] = instance.input_ids
    features['input_mask'][row, :length] = 1
    features['segment_ids'][row, :length] = instance.segment_ids
  if next_sentence_labels:
    features['next_sentence_labels'] = np.array(
        [[instance.next_sentence_label] for instance in instances], np.int32
    ).reshape(num, 1)
  return features


@dataclasses.dataclass
class ShardSummary:
  """What `write_shard` wrote.

  `distinct_documents`: distinct source documents among the first
  `window = min(MIXING_WINDOW, examples)` examples (a measure of mixing).
  """

  name: str
  examples: int = 0
  distinct_documents: int = 0
  window: int = 0


def write_shard(
    keyed: Iterable[Tuple[int, int, bytes]], path: str, progress=None
) -> ShardSummary:
  """Writes `(key, document, data)` records, in key order, as a shard.

  Written under a temporary name and renamed when complete; `progress` (or
  None) is advanced per example.
  """
  summary = ShardSummary(os.path.basename(path))
  documents = set()
  # A failure leaves the temporary file, as a kill would; the next run
  # removes it (`records.remove_leftovers`).
  temporary = json_files.temporary_path(path)
  with tf.io.TFRecordWriter(temporary) as writer:
    for _, document, data in keyed:
      if summary.examples < MIXING_WINDOW:
        documents.add(document)
      writer.write(data)
      summary.examples += 1
      if progress is not None:
        progress.advance()
  tf.io.gfile.rename(temporary, path, overwrite=True)
  summary.distinct_documents = len(documents)
  summary.window = min(MIXING_WINDOW, summary.examples)
  return summary


def mixing_stats(summaries: Sequence[ShardSummary]) -> Dict[str, Any]:
  """The mixing measure over a split's shards (see `ShardSummary`)."""
  measured = [s for s in summaries if s.window]
  if not measured:
    return {}
  return {
      'window': MIXING_WINDOW,
      'distinct_documents_min': min(s.distinct_documents for s in measured),
      'distinct_documents_mean': round(
          sum(s.distinct_documents for s in measured) / len(measured), 1
      ),
      'shards_measured': len(measured),
  }
