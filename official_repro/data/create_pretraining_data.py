r"""Turns plain-text corpora into pretraining TFRecords, streaming.

Clean (`text_cleaning`) -> split -> tokenize -> pack -> optionally mask ->
shard by seeded hash (`streaming`); memory is bounded by `--group_mb` and
`--buffer_mb`. `--engine=local` and `--engine=beam` write the same records.
The output directory is touched only once the corpus has been processed and
checked; `metadata.json` is written last.

Not reused: Model Garden's `create_pretraining_data.py` holds the whole
corpus in memory on one core, with no learned vocabulary or dynamic masking.

Example:
  python -m official_repro.data.create_pretraining_data \
    --input=/data/gutenberg --document_mode=file --strip_gutenberg \
    --vocab_file=/data/bert_uncased_vocab.txt --lower_case \
    --max_seq_length=128 --masking=dynamic --output_dir=/tmp/records
"""

import dataclasses
import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import flags
from absl import logging
import tensorflow as tf

from official_repro.common import cli
from official_repro.common import dataclass_flags
from official_repro.common import json_files
from official_repro.data import local_pipeline
from official_repro.data import masking as masking_lib
from official_repro.data import pretraining_instances
from official_repro.data import records
from official_repro.data import streaming
from official_repro.data import text_cleaning
from official_repro.data import vocab as vocab_lib

_UNK_RATE_WARNING = 0.01
ENGINES = ('local', 'beam')
# Fields that say how to run, not what to write: kept out of
# `metadata['source']` (the same records come out whatever their values).
_EXECUTION_FIELDS = ('engine', 'num_workers', 'buffer_mb', 'beam_options')


# The longest example length accepted without --allow_long_sequences.
MAX_SEQ_LENGTH = 8192
# A corpus of at least this many words of ASCII letters is refused when more
# than this share of them are one letter long (an encoding mistake; words in
# other scripts are not counted).
_MIN_WORDS_FOR_LETTER_CHECK = 1000
_MAX_SINGLE_LETTER_SHARE = 0.5
# `(least, most or None)` of the numeric options (`eval_fraction`, `group_mb`
# and `vocab_size` are checked apart).
_RANGES = {
    'dupe_factor': (1, None),
    'num_shards': (1, None),
    'num_eval_shards': (1, None),
    'num_workers': (0, None),
    'buffer_mb': (1, None),
    'vocab_sample_sentences': (1, None),
    'vocab_sample_mb': (1, None),
    'max_decode_error_rate': (0, 1),
    'max_unk_rate': (0, 1),
}


@dataclasses.dataclass(frozen=True)
class PretrainingDataConfig:
  """Options of `prepare_pretraining_data`; each field is a flag (its help).

  `drop_line_regexes` is the repeatable `--drop_line_regex`;
  `vocab_learn_params` has no flag.
  """

  vocab_file: Optional[str] = dataclass_flags.option(
      None,
      'Vocabulary to use: WordPiece (one token per line) or a SentencePiece '
      'model (*.model).',
  )
  vocab_size: Optional[int] = dataclass_flags.option(
      None,
      'Learn a vocabulary of this size (of --vocab_type) from a sample of '
      'the train split instead.',
  )
  vocab_type: str = dataclass_flags.option(
      vocab_lib.WORDPIECE,
      'With --vocab_size, the kind learned: wordpiece (BERT) or '
      "sentencepiece (a unigram model trained as ALBERT's).",
      choices=(vocab_lib.WORDPIECE, vocab_lib.SENTENCEPIECE),
  )
  lower_case: bool = dataclass_flags.option(
      True,
      'Lower-case (uncased vocabulary); WordPiece then strips accents, as '
      'BERT does (SentencePiece strips them either way, as ALBERT does).',
  )
  document_mode: str = dataclass_flags.option(
      'blank_line',
      'blank_line: each blank-line-separated block is a document; file: each '
      'file is a document.',
      choices=text_cleaning.DOCUMENT_MODES,
  )
  sentence_per_line: bool = dataclass_flags.option(
      False, 'Each non-empty line is one sentence.'
  )
  strip_gutenberg: bool = dataclass_flags.option(
      False,
      'Keep only the text between the Project Gutenberg START and END '
      'markers.',
  )
  drop_line_regexes: Tuple[str, ...] = dataclass_flags.option(
      (),
      'Drop lines matching this regex (repeatable).',
      flag='drop_line_regex',
  )
  drop_headings: bool = dataclass_flags.option(
      True,
      'Drop heading-like paragraphs (chapter headings, tables of contents, '
      'all-capitals lines, short title-case lines).',
  )
  min_sentence_chars: int = dataclass_flags.option(
      1, 'Drop sentences shorter than this.'
  )
  file_pattern: str = dataclass_flags.option(
      '*.txt', 'Glob for file names inside input directories.'
  )
  max_seq_length: int = dataclass_flags.option(128, 'Example length.')
  allow_long_sequences: bool = dataclass_flags.option(
      False,
      f'Allow --max_seq_length above {MAX_SEQ_LENGTH} (the papers use 128 '
      'to 512; longer examples are mostly padding on sentence-split text).',
  )
  short_seq_prob: float = dataclass_flags.option(
      0.1, 'Probability of a shorter target length per chunk.'
  )
  next_sentence_prediction: bool = dataclass_flags.option(
      False,
      'Make random-next pairs (the random segment from another document of '
      'the same group of --group_mb of a file) and write '
      'next_sentence_labels.',
  )
  masking: str = dataclass_flags.option(
      'dynamic',
      'static: mask once here; dynamic: in the input pipeline.',
      choices=records.MASKING_MODES,
  )
  dupe_factor: int = dataclass_flags.option(
      1, 'Static masking: differently masked copies per instance.'
  )
  mask_rate: float = dataclass_flags.option(
      0.15, 'Static masking: fraction of tokens to predict.'
  )
  max_predictions_per_seq: Optional[int] = dataclass_flags.option(
      None,
      'Static masking: prediction slots per example (default '
      'int((mask_rate + 0.005) * max_seq_length)).',
  )
  mask_token_fraction: float = dataclass_flags.option(
      0.8, 'Static masking: share of predictions shown as [MASK].'
  )
  random_token_fraction: float = dataclass_flags.option(
      0.1, 'Static masking: share of predictions replaced by random tokens.'
  )
  eval_fraction: float = dataclass_flags.option(
      0.01,
      'Fraction of documents held out for eval (chosen per document by a '
      'seeded hash).',
  )
  num_shards: int = dataclass_flags.option(1, 'Train files.')
  num_eval_shards: int = dataclass_flags.option(1, 'Eval files.')
  seed: int = dataclass_flags.option(
      12345, 'Seed of the split, instances, masks, order.'
  )
  group_mb: float = dataclass_flags.option(
      4.0,
      'Documents in flight: a file is processed in groups of documents of '
      'about this many MB of text (characters), cut where its text decides; '
      'random-next segments come from the same group, and a longer document '
      '(--document_mode=file) or paragraph is cut at this size. Bounds a '
      "worker's memory (20 to 25 times this); smaller files are "
      'processed whole.',
  )
  encoding_errors: str = dataclass_flags.option(
      'strict',
      'strict: refuse a file that is not UTF-8, naming it and its first bad '
      'byte; replace: read it with each bad byte sequence replaced by U+FFFD '
      '(counted).',
      choices=text_cleaning.ENCODING_ERRORS,
  )
  max_decode_error_rate: float = dataclass_flags.option(
      0.001,
      'With --encoding_errors=replace: stop when more undecodable sequences '
      'per character than this.',
  )
  max_unk_rate: float = dataclass_flags.option(
      0.05,
      'Stop when more [UNK] tokens per token than this (a vocabulary or '
      '--lower_case that does not fit the text).',
  )
  vocab_sample_sentences: int = dataclass_flags.option(
      1_000_000,
      'With --vocab_size: learn the vocabulary from at most this many train '
      'sentences, a seeded uniform sample of the files read for it.',
  )
  vocab_sample_mb: int = dataclass_flags.option(
      256,
      'With --vocab_size: read a seeded choice of files holding about this '
      'many MB of text (all files, if the corpus is smaller) for the sample.',
  )
  engine: str = dataclass_flags.option(
      'local',
      'local: worker processes on this machine; beam: an Apache Beam pipeline '
      '(--beam_options chooses the runner).',
      choices=ENGINES,
  )
  num_workers: int = dataclass_flags.option(
      0,
      'local engine: worker processes, each reading one input file at a time '
      '(0: all cores).',
  )
  buffer_mb: int = dataclass_flags.option(
      64,
      'local engine: MB of examples a worker holds before writing them out '
      'sorted (bounds memory; more means fewer files to merge).',
  )
  beam_options: str = dataclass_flags.option(
      '',
      'beam engine: Beam pipeline options, e.g. "--runner=DataflowRunner '
      '--project=P --region=R --temp_location=gs://B/tmp '
      '--extra_package=<this package\'s wheel>" (data/README.md); empty: '
      'the DirectRunner.',
  )
  vocab_learn_params: Optional[Dict[str, Any]] = None

  def __post_init__(self):
    object.__setattr__(self, 'drop_line_regexes', tuple(self.drop_line_regexes))
    self._check_choices()
    self._check_ranges()
    # The options of the later stages check themselves when built.
    try:
      self.cleaning_options()
      self.instance_options()
      self.masking_config()
    except ValueError as error:
      raise cli.UserError(f'--{error}') from None

  def _check_choices(self):
    """Refuses inconsistent vocabulary, masking and engine options."""
    if (self.vocab_file is None) == (self.vocab_size is None):
      raise cli.UserError(
          'Give exactly one of --vocab_file (an existing vocabulary) and '
          '--vocab_size (learn one from the train split); got '
          f'vocab_file={self.vocab_file!r}, vocab_size={self.vocab_size!r}.'
      )
    if self.vocab_file is not None and self.vocab_type != vocab_lib.WORDPIECE:
      raise cli.UserError(
          f'--vocab_type={self.vocab_type} is what --vocab_size learns; a '
          f'--vocab_file ({self.vocab_file}) is read as its name says (a '
          'SentencePiece model ends in .model): drop --vocab_type.'
      )
    for field in dataclasses.fields(self):
      choices, value = field.metadata.get('choices'), getattr(self, field.name)
      if choices and value not in choices:
        raise cli.UserError(
            f'--{field.name} must be one of {choices}, got {value!r}.'
        )
    if self.max_seq_length > MAX_SEQ_LENGTH and not self.allow_long_sequences:
      raise cli.UserError(
          f'--max_seq_length={self.max_seq_length} is above '
          f'{MAX_SEQ_LENGTH}; the papers train at 128 to 512 tokens. Give '
          'the length the encoder will read, or pass --allow_long_sequences.'
      )
    if self.masking == 'dynamic' and self.dupe_factor != 1:
      raise cli.UserError(
          f'--dupe_factor={self.dupe_factor} only applies to --masking=static;'
          ' dynamic masking draws a fresh mask every epoch, so duplicating '
          'examples only repeats them. Drop --dupe_factor or use '
          '--masking=static.'
      )

  def _check_ranges(self):
    """Refuses fractions, sizes and counts out of their ranges."""
    for name, (least, most) in _RANGES.items():
      value = getattr(self, name)
      # Written as a range that holds, so NaN (which compares False) fails.
      if not (least <= value and (most is None or value <= most)):
        bounds = f'>= {least}' if most is None else f'in [{least}, {most}]'
        raise cli.UserError(f'--{name} must be {bounds}, got {value}.')
    if not 0.0 <= self.eval_fraction < 1.0:
      raise cli.UserError(
          f'--eval_fraction must be in [0, 1), got {self.eval_fraction}.'
      )
    if not self.group_mb * 2**20 >= 1:
      raise cli.UserError(
          f'--group_mb must be positive (at least one character), got '
          f'{self.group_mb}.'
      )
    if self.vocab_size is not None and (
        self.vocab_size <= len(vocab_lib.SPECIAL_TOKENS)
    ):
      raise cli.UserError(
          f'--vocab_size must exceed {len(vocab_lib.SPECIAL_TOKENS)} (the '
          f'special tokens), got {self.vocab_size}.'
      )

  def _options_of(self, options_class):
    """An `options_class` from the fields of this config of the same names."""
    names = [field.name for field in dataclasses.fields(options_class)]
    return options_class(**{name: getattr(self, name) for name in names})

  def cleaning_options(self) -> text_cleaning.CleaningOptions:
    return self._options_of(text_cleaning.CleaningOptions)

  def instance_options(self) -> pretraining_instances.InstanceOptions:
    return self._options_of(pretraining_instances.InstanceOptions)

  def masking_config(self) -> Optional[masking_lib.MaskingConfig]:
    """The static masking rates, or None for dynamic masking."""
    if self.masking != 'static':
      return None
    return masking_lib.MaskingConfig(
        mask_rate=self.mask_rate,
        max_predictions_per_seq=(
            self.max_predictions_per_seq
            or masking_lib.default_max_predictions(
                self.max_seq_length, self.mask_rate
            )
        ),
        mask_token_fraction=self.mask_token_fraction,
        random_token_fraction=self.random_token_fraction,
    )

  def streaming_settings(self) -> streaming.Settings:
    """What the per-file transforms need (`streaming.Settings`)."""
    return streaming.Settings(
        cleaning=self.cleaning_options(),
        instances=self.instance_options(),
        masking=self.masking_config(),
        dupe_factor=self.dupe_factor,
        lower_case=self.lower_case,
        num_shards={'train': self.num_shards, 'eval': self.num_eval_shards},
        seed=self.seed,
        group_chars=int(self.group_mb * 2**20),
    )


def _measure(run: '_Run', name: str, fn, *args):
  """`fn(*args)`; its wall-clock seconds go to `run.seconds[name]`."""
  tick = time.time()
  result = fn(*args)
  run.seconds[name] = round(time.time() - tick, 2)
  return result


def _load_given_vocab(
    config: PretrainingDataConfig,
) -> Optional[vocab_lib.Vocabulary]:
  """`config.vocab_file`'s tokens, or None; errors name --vocab_file."""
  if config.vocab_file is None:
    return None
  try:
    return vocab_lib.load_vocab(config.vocab_file)
  except FileNotFoundError as e:
    raise FileNotFoundError(f'--vocab_file={config.vocab_file}: {e}') from e
  except ValueError as e:
    raise cli.UserError(f'--vocab_file={config.vocab_file}: {e}') from e


def _write_vocab(
    config: PretrainingDataConfig,
    tokens: vocab_lib.Vocabulary,
    output_dir: str,
) -> None:
  """Writes `tokens` into `output_dir`, unless it is `config.vocab_file`."""
  output_path = os.path.join(output_dir, tokens.filename)
  if config.vocab_file is None or (
      _absolute(config.vocab_file) != _absolute(output_path)
  ):
    tokens.write(output_path)


def _tokenizer_name(config: PretrainingDataConfig) -> str:
  """The name of the tokenizer the records are made with."""
  if config.vocab_file is None:
    kind = config.vocab_type
  else:
    kind = vocab_lib.kind_of_file(config.vocab_file)
  return vocab_lib.Vocabulary.tokenizer_name_of(kind)


def _absolute(path: str) -> str:
  """A local path made absolute; a URL-like path (`gs://...`) as given."""
  return path if '://' in path else os.path.abspath(path)


def _sample_and_learn_vocab(
    run: '_Run', scratch_dir: str
) -> Tuple[List[str], Dict[str, int]]:
  """`(tokens, sample sizes)`: a vocabulary learned from a seeded sample."""
  config = run.config
  files = streaming.files_to_sample(
      run.files, config.seed, config.vocab_sample_mb * 10**6
  )
  args = (
      files,
      config.streaming_settings(),
      run.eval_split,
      config.vocab_sample_sentences,
  )
  if config.engine == 'beam':
    from official_repro.data import beam_pipeline  # pylint: disable=g-import-not-at-top

    sentences, population, corpus_stats = beam_pipeline.sample_with_beam(
        *args, scratch_dir, config.beam_options
    )
  else:
    sentences, population, corpus_stats = local_pipeline.sample_corpus(
        *args, run.num_workers
    )
  if not corpus_stats.documents:
    raise cli.UserError(
        text_cleaning.empty_corpus_message(run.inputs, corpus_stats)
    )
  if not sentences:
    raise cli.UserError(
        f'corpus {", ".join(run.inputs)}: no text found in the train split to '
        'learn a vocabulary from (every document is held out for eval); '
        'lower --eval_fraction or give --vocab_file.'
    )
  sample = {
      'sentences': len(sentences),
      'characters': sum(len(s) for s in sentences),
      'train_sentences': population,
      'files': len(files),
      'bytes': sum(f.size for f in files),
  }
  logging.info(
      'Learning a %s vocabulary of size %d from a sample of %d of the '
      '%d train sentences (%d characters).',
      config.vocab_type,
      config.vocab_size,
      sample['sentences'],
      population,
      sample['characters'],
  )
  learn = (
      vocab_lib.build_sentencepiece_vocab
      if config.vocab_type == vocab_lib.SENTENCEPIECE
      else vocab_lib.build_wordpiece_vocab
  )
  tokens = learn(
      sentences,
      config.vocab_size,
      None,
      lower_case=config.lower_case,
      learn_params=config.vocab_learn_params,
  )
  return vocab_lib.as_vocabulary(tokens), sample


def _check_corpus(
    inputs: Sequence[str],
    stats: streaming.RecordStats,
    config: PretrainingDataConfig,
) -> streaming.TokenizationStats:
  """Stops on an empty corpus, undecodable text or a high [UNK] rate.

  Otherwise logs what was read; returns both splits' tokenization counters.
  """
  if not stats.corpus.documents:
    raise cli.UserError(
        text_cleaning.empty_corpus_message(inputs, stats.corpus)
    )
  corpus = stats.corpus
  rate = corpus.decode_errors / max(1, corpus.characters)
  if rate > config.max_decode_error_rate:
    raise cli.UserError(
        f'{corpus.decode_errors:,} undecodable byte sequences in '
        f'{corpus.files_with_decode_errors} file(s), {rate:.3%} of the '
        f'corpus, exceed --max_decode_error_rate='
        f'{config.max_decode_error_rate}: convert the files to UTF-8, or '
        'raise --max_decode_error_rate to write the records anyway.'
    )
  total = stats.total_tokenization()
  letters = total.single_letter_words / max(1, total.letter_words)
  if total.letter_words >= _MIN_WORDS_FOR_LETTER_CHECK and letters > (
      _MAX_SINGLE_LETTER_SHARE
  ):
    raise cli.UserError(
        f'corpus {", ".join(inputs)}: {letters:.0%} of its words are single '
        'letters, which no language written in Latin letters gives: the text '
        'was read in the wrong encoding or is spaced out letter by letter. '
        'Check the files (e.g. `file <name>`) and convert them to UTF-8.'
    )
  if total.unk_rate > config.max_unk_rate:
    raise cli.UserError(
        f'[UNK] rate {total.unk_rate:.2%} exceeds '
        f'--max_unk_rate={config.max_unk_rate}: the vocabulary does not fit '
        'the text (check --vocab_file and --lower_case), or raise '
        '--max_unk_rate to write the records anyway.'
    )
  logging.info(
      'Read %d documents, %d sentences from %d files.',
      stats.corpus.documents,
      stats.corpus.sentences,
      stats.corpus.files,
  )
  return total


def _warnings(
    config: PretrainingDataConfig,
    tokens: Sequence[str],
    stats: streaming.RecordStats,
    total: streaming.TokenizationStats,
) -> List[str]:
  """What the user should know about an otherwise complete run."""
  warnings = []
  casing = vocab_lib.casing_mismatch(tokens, config.lower_case)
  if casing:
    warnings.append(
        f'the vocabulary is {casing}: check --lower_case (the records are '
        'written as asked).'
    )
  if config.vocab_size is not None and len(tokens) < 0.9 * config.vocab_size:
    warnings.append(
        f'the learned vocabulary has {len(tokens)} tokens, fewer than '
        f'--vocab_size={config.vocab_size}: the corpus is too small for that '
        'size (the WordPiece learner drops pieces seen fewer than '
        'lower_thresh=10 times; see vocab_learn_params).'
    )
  if total.unk_rate > _UNK_RATE_WARNING:
    warnings.append(
        f'[UNK] rate is {total.unk_rate:.2%}: check that '
        '--lower_case matches the vocabulary and that the text is clean.'
    )
  corpus = stats.corpus
  if corpus.files_unreadable:
    warnings.append(
        f'{corpus.files_unreadable} input files could not be read and were '
        f'skipped, e.g. {corpus.unreadable_files[0]}; fix their permissions '
        'or remove them from --input.'
    )
  if config.eval_fraction > 0 and not stats.splits['eval'].documents:
    warnings.append(
        f'--eval_fraction={config.eval_fraction} drew no eval document from '
        f'{stats.splits["train"].documents} documents: the eval split is '
        'empty; raise --eval_fraction.'
    )
  train_instances = stats.splits['train'].instances
  if (
      config.next_sentence_prediction
      and train_instances.instances
      and not train_instances.random_next_instances
  ):
    warnings.append(
        'no random-next (label 1) pair was made: random segments come from '
        'other documents of the same group of documents of a file (at most '
        'about --group_mb of text), and every group holds a single document '
        '(--document_mode=file?).'
    )
  return warnings


def _run_engine(run: '_Run', tokens: Sequence[str], scratch_dir: str):
  """Processes the corpus with the configured engine; returns its shards."""
  config = run.config
  args = (run.files, config.streaming_settings(), tokens, run.eval_split)
  if config.engine == 'beam':
    from official_repro.data import beam_pipeline  # pylint: disable=g-import-not-at-top

    return beam_pipeline.run_beam(*args, scratch_dir, config.beam_options)
  return local_pipeline.run_local(
      *args, scratch_dir, run.num_workers, config.buffer_mb << 20
  )


def _source_metadata(
    inputs: Sequence[str], config: PretrainingDataConfig
) -> Dict[str, Any]:
  source = {'inputs': [_absolute(p) for p in inputs]}
  source.update(dataclasses.asdict(config))
  for name in _EXECUTION_FIELDS:
    del source[name]
  source['drop_line_regexes'] = list(config.drop_line_regexes)
  # Part of the records' identity too (`experiment.records_identity`), so
  # that a run resumed on records of another tokenizer is refused.
  source['tokenizer'] = _tokenizer_name(config)
  if config.vocab_file is not None:
    source['vocab_file'] = _absolute(config.vocab_file)
  return source


def prepare_pretraining_data(
    inputs: Sequence[str],
    output_dir: str,
    config: Optional[PretrainingDataConfig] = None,
    **options,
) -> Dict[str, Any]:
  """Writes a pretraining record directory from plain-text corpora.

  `**options` are `PretrainingDataConfig` fields overriding `config`'s.
  Returns the metadata written to `metadata.json`.

  Raises:
    FileNotFoundError: a corpus input or the vocabulary file is missing.
    ValueError: inconsistent options, an empty corpus, a bad vocabulary.
  """
  if config is None:
    config = PretrainingDataConfig(**options)
  elif options:
    config = dataclasses.replace(config, **options)
  if tf.io.gfile.exists(output_dir) and not tf.io.gfile.isdir(output_dir):
    raise cli.UserError(
        f'--output_dir {output_dir} is a file; expected a '
        'directory (new or holding records).'
    )
  started = time.time()
  given_tokens = _load_given_vocab(config)
  try:
    files = streaming.list_input_files(inputs, config.file_pattern, output_dir)
  except FileNotFoundError as e:
    raise FileNotFoundError(f'--input: {e}') from e
  run = _Run(
      config=config,
      inputs=inputs,
      files=files,
      eval_split=streaming.EvalSplit(
          files, config.document_mode, config.eval_fraction, config.seed
      ),
      num_workers=local_pipeline.effective_workers(
          config.num_workers, len(files)
      ),
      input_bytes=sum(f.size for f in files),
      started=started,
  )
  logging.info(
      'Processing %d files (%.1f MB) with the %s engine%s.',
      len(files),
      run.input_bytes / 1e6,
      config.engine,
      f', {run.num_workers} workers' if config.engine == 'local' else '',
  )
  with records.writer_lock(output_dir):
    return _write_records(run, output_dir, given_tokens)


@dataclasses.dataclass(frozen=True)
class _Run:
  """What every step of one `prepare_pretraining_data` call reads."""

  config: PretrainingDataConfig
  inputs: Sequence[str]
  files: Sequence[streaming.InputFile]
  eval_split: streaming.EvalSplit
  num_workers: int
  input_bytes: int
  started: float
  # Wall-clock seconds per step (`_measure`).
  seconds: Dict[str, float] = dataclasses.field(default_factory=dict)


def _write_records(
    run: _Run, output_dir: str, given_tokens: Optional[List[str]]
) -> Dict[str, Any]:
  """`prepare_pretraining_data` once the directory is locked.

  Complete local records are rewritten in a staging directory and swapped in
  when complete, so a failed run leaves them as they were; elsewhere (gs://)
  files are written in place, `metadata.json` last.
  """
  # Until the whole corpus is processed and checked, only temporaries (a
  # scratch directory) are written: a mistake in the corpus leaves an
  # earlier run's records as they were.
  config, staging_dir = run.config, _staging_dir(output_dir)
  write_dir = staging_dir or output_dir
  try:
    # Removed by a rerun if left.
    scratch_dir = json_files.temporary_path(os.path.join(write_dir, 'scratch'))
    tf.io.gfile.makedirs(scratch_dir)
    try:
      tokens, vocab_sample = given_tokens, None
      if tokens is None:
        tokens, vocab_sample = _measure(
            run, 'vocab', _sample_and_learn_vocab, run, scratch_dir
        )
      shards = _measure(run, 'process', _run_engine, run, tokens, scratch_dir)
      total_tokenization = _check_corpus(run.inputs, shards.stats, config)
      if write_dir == output_dir:
        records.remove_metadata(output_dir)
      _write_vocab(config, tokens, write_dir)
      splits, split_stats = _write_splits(run, shards, write_dir)
    finally:
      if tf.io.gfile.exists(scratch_dir):
        tf.io.gfile.rmtree(scratch_dir)
    warnings = _warnings(config, tokens, shards.stats, total_tokenization)
    run.seconds['total'] = round(time.time() - run.started, 2)
    metadata = _metadata(run, tokens, splits)
    metadata['stats'] = _stats_metadata(
        run, shards.stats, total_tokenization, split_stats, vocab_sample
    )
    metadata['stats'].update(warnings=warnings, seconds=run.seconds)
    metadata['source'] = _source_metadata(run.inputs, config)
    records.write_metadata(write_dir, metadata)
    if staging_dir is not None:
      records.replace_with(staging_dir, output_dir)
    for warning in warnings:
      logging.warning(warning)
    return metadata
  except BaseException:
    if staging_dir is not None and tf.io.gfile.exists(staging_dir):
      tf.io.gfile.rmtree(staging_dir)
    raise


def _staging_dir(output_dir: str) -> Optional[str]:
  """Removes leftovers; where to stage a rerun over complete local records."""
  records.remove_leftovers(output_dir)
  complete = tf.io.gfile.exists(
      os.path.join(output_dir, records.METADATA_FILENAME)
  )
  if complete and '://' not in output_dir:
    return json_files.temporary_path(output_dir.rstrip('/'))
  return None


def _write_splits(
    run: _Run, shards, write_dir: str
) -> Tuple[Dict[str, Any], Dict[str, Any]]:
  """Writes both splits' shards; their `metadata['splits']` and stats."""
  stats, config = shards.stats, run.config
  splits, split_stats = {}, {}
  for split in records.SPLITS:
    num_examples = stats.splits[split].examples
    num_shards = config.streaming_settings().num_shards[split]
    names = records.shard_file_names(split, num_shards) if num_examples else []
    label = f'write {split}'
    summaries = _measure(
        run, f'write_{split}', shards.write, write_dir, split, names, label
    )
    splits[split] = {'files': names, 'num_examples': num_examples}
    counts = stats.splits[split]
    split_stats[split] = {
        'documents': counts.documents,
        'sentences': counts.sentences,
        'tokenization': dataclasses.asdict(counts.tokenization),
        'instances': dataclasses.asdict(counts.instances),
        'examples': counts.examples,
        'mixing': streaming.mixing_stats(summaries),
    }
    if config.masking == 'static':
      split_stats[split]['masked_lm_predictions'] = counts.masked_lm_predictions
    logging.info(
        '%s: %d examples written to %d files.', split, num_examples, len(names)
    )
  return splits, split_stats


def _metadata(
    run: _Run, tokens: vocab_lib.Vocabulary, splits: Dict[str, Any]
) -> Dict[str, Any]:
  """`metadata.json` but its `stats` and `source`."""
  config, masking_config = run.config, run.config.masking_config()
  return {
      'format_version': records.FORMAT_VERSION,
      'max_seq_length': config.max_seq_length,
      'vocab_file': tokens.filename,
      'vocab_size': len(tokens),
      'lower_case': config.lower_case,
      # Which tokenizer made the ids: records without the field were made
      # by TF Text's FastBertTokenizer, and training refuses them
      # (`pretrain_dataloader.check_records`).
      'tokenizer': tokens.tokenizer_name,
      'special_token_ids': (
          vocab_lib.SpecialTokenIds.from_vocab(tokens).as_dict()
      ),
      'next_sentence_labels': config.next_sentence_prediction,
      'masking': config.masking,
      'static_masking': masking_config
      and dict(
          dataclasses.asdict(masking_config),
          dupe_factor=config.dupe_factor,
          seed=config.seed,
      ),
      'splits': splits,
  }


def _stats_metadata(
    run: _Run,
    stats: streaming.RecordStats,
    total: streaming.TokenizationStats,
    split_stats: Dict[str, Any],
    vocab_sample: Optional[Dict[str, int]],
) -> Dict[str, Any]:
  """`metadata['stats']` but its `warnings` and `seconds`."""
  config = run.config
  return {
      'corpus': dataclasses.asdict(stats.corpus),
      'split': run.eval_split.describe(
          {s: stats.splits[s].documents for s in records.SPLITS}
      ),
      'tokenization': dataclasses.asdict(total),
      'splits': split_stats,
      'groups': stats.groups,
      'vocab_sample': vocab_sample,
      'execution': {
          'engine': config.engine,
          'num_workers': run.num_workers if config.engine == 'local' else None,
          'buffer_mb': config.buffer_mb,
          'input_files': len(run.files),
          'input_bytes': run.input_bytes,
      },
  }


def format_report(metadata: Dict[str, Any]) -> str:
  """A readable multi-line report of `prepare_pretraining_data`'s metadata."""
  stats = metadata['stats']
  corpus_stats = text_cleaning.CorpusStats(**stats['corpus'])
  lines = ['Corpus', corpus_stats.report(), '', f'Split: {stats["split"]}']
  for split in records.SPLITS:
    lines += _split_report(metadata, split)
  sample = stats.get('vocab_sample')
  if sample:
    lines += [
        '',
        f'Vocabulary learned from {sample["sentences"]:,} of the '
        f'{sample["train_sentences"]:,} train sentences of '
        f'{sample["files"]:,} files ({sample["bytes"] / 1e6:,.1f} MB) '
        f'({sample["characters"]:,} characters; seeded sample)',
    ]
  lines += _totals_report(metadata)
  execution = stats.get('execution')
  if execution:
    workers = execution['num_workers']
    lines.append(
        f'Engine: {execution["engine"]}'
        + (f', {workers} workers' if workers else '')
        + f'; {execution["input_files"]:,} files, '
        f'{execution["input_bytes"] / 1e6:,.1f} MB'
    )
  if 'groups' in stats:
    lines.append(
        f'Groups of documents processed: {stats["groups"]:,} '
        f'(--group_mb={metadata["source"]["group_mb"]:g})'
    )
  lines.append(
      'Seconds: ' + ', '.join(f'{k} {v}' for k, v in stats['seconds'].items())
  )
  lines += [f'WARNING: {w}' for w in stats['warnings']]
  return '\n'.join(lines)


def _split_report(metadata: Dict[str, Any], split: str) -> List[str]:
  """The report's lines of one split: its counts and its mixing."""
  split_stats = metadata['stats']['splits'][split]
  instance_stats = split_stats['instances']
  lines = [
      f'  {split:<5}: {split_stats["documents"]:,} documents, '
      f'{split_stats["sentences"]:,} sentences, '
      f'{split_stats["tokenization"]["tokens"]:,} tokens -> '
      f'{instance_stats["instances"]:,} instances '
      f'({instance_stats["truncated_instances"]:,} truncated, '
      f'{instance_stats["short_target_chunks"]:,} short, '
      f'{instance_stats["random_next_instances"]:,} random-next) -> '
      f'{split_stats["examples"]:,} examples in '
      f'{len(metadata["splits"][split]["files"])} files'
  ]
  mixing = split_stats.get('mixing')
  if mixing:
    lines.append(
        f'         mixing: {mixing["distinct_documents_min"]:,} distinct '
        f'documents (min over {mixing["shards_measured"]} shards; mean '
        f'{mixing["distinct_documents_mean"]:,}) in the first '
        f'{mixing["window"]:,} examples of a shard'
    )
  return lines


def _totals_report(metadata: Dict[str, Any]) -> List[str]:
  """The report's vocabulary, token and example lines."""
  stats, tokenization = metadata['stats'], metadata['stats']['tokenization']
  num_examples = sum(
      metadata['splits'][s]['num_examples'] for s in records.SPLITS
  )
  num_instances = sum(
      stats['splits'][s]['instances']['instances'] for s in records.SPLITS
  )
  instance_tokens = sum(
      stats['splits'][s]['instances']['tokens'] for s in records.SPLITS
  )
  mean_fill = (
      instance_tokens / max(1, num_instances) / metadata['max_seq_length']
  )
  return [
      '',
      f'Vocabulary: {metadata["vocab_size"]:,} tokens, lower_case='
      f'{metadata["lower_case"]}, special ids {metadata["special_token_ids"]}',
      f'Tokens: {tokenization["tokens"]:,} ({tokenization["unk_tokens"]:,} '
      f'[UNK], rate {tokenization["unk_rate"]:.4%}); '
      f'{tokenization["empty_sentences"]:,} sentences without tokens dropped',
      f'Examples: {num_examples:,}; max_seq_length '
      f'{metadata["max_seq_length"]}; mean fill {mean_fill:.1%}; masking '
      f'{metadata["masking"]}',
  ]


FLAGS = flags.FLAGS


def define_flags():
  """Defines the command-line flags, from `PretrainingDataConfig`'s fields."""
  flags.DEFINE_list(
      'input',
      None,
      'Corpus files or directories, comma '
      'separated; directories are searched recursively.',
  )
  flags.DEFINE_string('output_dir', None, 'Record directory to write.')
  dataclass_flags.define_flags(PretrainingDataConfig)
  cli.require_flags('input', 'output_dir')


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  metadata = prepare_pretraining_data(
      FLAGS.input,
      FLAGS.output_dir,
      dataclass_flags.from_flags(PretrainingDataConfig, FLAGS),
  )
  logging.info(
      'Wrote %d train and %d eval examples to %s.',
      metadata['splits']['train']['num_examples'],
      metadata['splits']['eval']['num_examples'],
      FLAGS.output_dir,
  )
  print(format_report(metadata))


if __name__ == '__main__':
  define_flags()
  cli.run(main)
