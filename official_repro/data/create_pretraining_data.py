r"""Turns plain-text corpora into pretraining TFRecords.

The pipeline: read and clean the corpus into documents of sentences
(`text_cleaning`), split the documents into train and eval (at the document
level, before anything else, so eval text is held out), load a WordPiece
vocabulary or learn one from the train split (`vocab`), tokenize, pack the
documents into `[CLS] A [SEP] B [SEP]` instances (`pretraining_instances`),
optionally mask them once (static masking, `masking.mask_batch`), and write the
record directory described in `records`. Each step that loops over the
corpus (reading, tokenizing, packing, masking, writing) logs one line every
10 seconds with how much of it is done and the time left, and one when it is
done (`common.progress`).

Example:
  python -m official_repro.data.create_pretraining_data \
    --input=/data/gutenberg --document_mode=file --strip_gutenberg \
    --vocab_file=/data/bert_uncased_vocab.txt --lower_case \
    --max_seq_length=128 --masking=dynamic --output_dir=/tmp/records
"""

import dataclasses
import os
import random
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from absl import flags
from absl import logging
import numpy as np
import tensorflow as tf

from official_repro.common import cli
from official_repro.common import progress
from official_repro.data import masking as masking_lib
from official_repro.data import pretraining_instances
from official_repro.data import records
from official_repro.data import text_cleaning
from official_repro.data import vocab as vocab_lib

_MASK_BATCH_SIZE = 256
_UNK_RATE_WARNING = 0.01


@dataclasses.dataclass
class TokenizationStats:
  """Counters of the tokenization step.

  Attributes:
    sentences: sentences tokenized.
    empty_sentences: sentences that produced no token (dropped).
    tokens: WordPiece tokens produced.
    unk_tokens: [UNK] tokens among them.
    unk_rate: `unk_tokens / tokens`.
  """

  sentences: int = 0
  empty_sentences: int = 0
  tokens: int = 0
  unk_tokens: int = 0
  unk_rate: float = 0.0


def split_train_eval(
    documents: List[List[str]], eval_fraction: float, seed: int
) -> Tuple[List[List[str]], List[List[str]], str]:
  """Holds out eval documents (or, for one document, its last sentences).

  Args:
    documents: the corpus, documents of sentences.
    eval_fraction: fraction of documents for eval; at least one document when
      positive and there are two or more, never all of them.
    seed: seeds the deterministic choice of eval documents.

  Returns:
    `(train_documents, eval_documents, how)`, `how` a sentence describing the
    split.
  """
  if eval_fraction <= 0.0:
    return documents, [], 'no eval split (eval_fraction is 0)'
  if len(documents) == 1:
    sentences = documents[0]
    num_eval = min(
        len(sentences) - 1, max(1, round(eval_fraction * len(sentences)))
    )
    if num_eval < 1:
      return (
          documents,
          [],
          (
              'no eval split: the corpus is a single document '
              'with a single sentence'
          ),
      )
    return (
        [sentences[:-num_eval]],
        [sentences[-num_eval:]],
        f'the corpus is a single document, so its last {num_eval} of '
        f'{len(sentences)} sentences are held out for eval',
    )
  num_eval = min(
      len(documents) - 1, max(1, round(eval_fraction * len(documents)))
  )
  order = list(range(len(documents)))
  random.Random(seed).shuffle(order)
  eval_indices = set(order[:num_eval])
  train = [d for i, d in enumerate(documents) if i not in eval_indices]
  held_out = [d for i, d in enumerate(documents) if i in eval_indices]
  return (
      train,
      held_out,
      (
          f'{num_eval} of {len(documents)} documents held '
          'out for eval (chosen by seed)'
      ),
  )


def tokenize_documents(
    documents: Sequence[Sequence[str]],
    tokens: Sequence[str],
    lower_case: bool,
    unk_id: int,
    progress_label: str = '',
) -> Tuple[List[List[List[int]]], TokenizationStats]:
  """Tokenizes every sentence of every document.

  Args:
    documents: documents of sentences.
    tokens: the vocabulary.
    lower_case: whether the vocabulary is uncased.
    unk_id: id of [UNK], for the [UNK] rate.
    progress_label: logs the sentences tokenized under this label
      (`progress.Progress`); '' for no log.

  Returns:
    `(tokenized, stats)`: documents of sentences of ids, with sentences that
    produced no token dropped.
  """
  flat = [sentence for document in documents for sentence in document]
  ids = vocab_lib.tokenize_with_vocab(
      flat, tokens, lower_case, progress_label=progress_label
  )
  stats = TokenizationStats(sentences=len(flat))
  tokenized = []
  position = 0
  for document in documents:
    sentences = ids[position : position + len(document)]
    position += len(document)
    kept = [s for s in sentences if s]
    stats.empty_sentences += len(sentences) - len(kept)
    stats.tokens += sum(len(s) for s in kept)
    stats.unk_tokens += sum(s.count(unk_id) for s in kept)
    tokenized.append(kept)
  stats.unk_rate = stats.unk_tokens / max(1, stats.tokens)
  return tokenized, stats


def instances_to_features(
    instances: Sequence[pretraining_instances.Instance],
    max_seq_length: int,
    next_sentence_labels: bool,
) -> Dict[str, np.ndarray]:
  """Pads instances into feature arrays.

  Args:
    instances: the instances.
    max_seq_length: padded length `T`.
    next_sentence_labels: whether to include `next_sentence_labels`.

  Returns:
    `input_ids`, `input_mask`, `segment_ids`: int32 `[N, T]`, zero padded;
    `next_sentence_labels`: int32 `[N, 1]` if requested.
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


def static_mask(
    features: Dict[str, np.ndarray],
    config: masking_lib.MaskingConfig,
    special_ids: vocab_lib.SpecialTokenIds,
    vocab_size: int,
    dupe_factor: int,
    seed: int,
    batch_size: int = _MASK_BATCH_SIZE,
    progress_label: str = '',
) -> Dict[str, np.ndarray]:
  """Masks every instance `dupe_factor` times, each copy differently.

  Batch `b` of copy `d` is masked with the stateless seed
  `[seed, d * 2**32 + b]`, so copies differ and the result is reproducible.

  Args:
    features: `input_ids`, `input_mask`, `segment_ids` `[N, T]` (and
      optionally `next_sentence_labels` `[N, 1]`).
    config: masking rates.
    special_ids: the special token ids (never masked, never drawn).
    vocab_size: vocabulary size for random replacements.
    dupe_factor: copies per instance.
    seed: the base seed.
    batch_size: instances per `mask_batch` call.
    progress_label: logs the copies masked under this label
      (`progress.Progress`); '' for no log.

  Returns:
    The features of the `N * dupe_factor` copies, copy-major, with corrupted
    `input_ids` and `masked_lm_positions`, `masked_lm_ids` (int32 `[., P]`)
    and `masked_lm_weights` (float32 `[., P]`).
  """
  seq_length = features['input_ids'].shape[1]
  mask_fn = tf.function(
      lambda ids, mask, batch_seed: masking_lib.mask_batch(
          ids,
          mask,
          config=config,
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
  num = len(features['input_ids'])
  reporter = progress.Progress(num * dupe_factor, progress_label, 'copies')
  copies = []
  for dupe in range(dupe_factor):
    outputs = []
    for batch, begin in enumerate(range(0, num, batch_size)):
      batch_seed = tf.constant([seed, dupe * 2**32 + batch], tf.int64)
      result = mask_fn(
          features['input_ids'][begin : begin + batch_size],
          features['input_mask'][begin : begin + batch_size],
          batch_seed,
      )
      outputs.append({k: v.numpy() for k, v in result.items()})
      reporter.advance(len(outputs[-1]['input_word_ids']))
    copy = dict(features)
    copy['input_ids'] = _concat_rows(
        [o['input_word_ids'] for o in outputs], (0, seq_length), np.int32
    )
    for name in ('masked_lm_positions', 'masked_lm_ids', 'masked_lm_weights'):
      dtype = np.float32 if name == 'masked_lm_weights' else np.int32
      copy[name] = _concat_rows(
          [o[name] for o in outputs], (0, config.max_predictions_per_seq), dtype
      )
    copies.append(copy)
  return {name: np.concatenate([c[name] for c in copies]) for name in copies[0]}


def _concat_rows(
    arrays: List[np.ndarray], empty_shape: Tuple[int, int], dtype
) -> np.ndarray:
  if not arrays:
    return np.zeros(empty_shape, dtype)
  return np.concatenate(arrays).astype(dtype)


def _shuffle_rows(
    features: Dict[str, np.ndarray], seed: int
) -> Dict[str, np.ndarray]:
  """Applies one seeded permutation to the rows of every array."""
  num = len(features['input_ids'])
  order = np.random.default_rng(seed).permutation(num)
  return {name: values[order] for name, values in features.items()}


@dataclasses.dataclass(frozen=True)
class PretrainingDataConfig:
  """Options of `prepare_pretraining_data`; each has a flag of the same name.

  Attributes:
    vocab_file: an existing WordPiece vocabulary; exclusive with `vocab_size`.
    vocab_size: learn a vocabulary of this size from the train split.
    lower_case: lower-case and strip accents (uncased vocabulary).
    document_mode: 'blank_line' or 'file' (see `text_cleaning`).
    sentence_per_line: one sentence per non-empty line.
    strip_gutenberg: keep only the text between the Project Gutenberg markers.
    drop_line_regexes: drop lines matching any of these (flag
      `--drop_line_regex`, repeatable).
    drop_headings: drop heading-like paragraphs (`text_cleaning.is_heading`).
    min_sentence_chars: drop shorter sentences.
    file_pattern: glob for files inside input directories.
    max_seq_length: example length, [CLS] and [SEP]s included.
    short_seq_prob: probability of a shorter target length per chunk.
    next_sentence_prediction: make random-next pairs and write
      `next_sentence_labels`.
    masking: 'static' (mask once here) or 'dynamic' (mask in the input
      pipeline; no masked-LM features are written).
    dupe_factor: static masking only: differently masked copies per instance.
    mask_rate: static masking: fraction of tokens to predict.
    max_predictions_per_seq: static masking: prediction slots per example;
      default `int((mask_rate + 0.005) * max_seq_length)`.
    mask_token_fraction: static masking: share of predictions shown as [MASK].
    random_token_fraction: static masking: share replaced by random tokens.
    eval_fraction: fraction of documents held out for eval.
    num_shards: train files.
    num_eval_shards: eval files.
    seed: seeds the split, the instances and the masks.
    encoding_errors: 'strict' refuses a file that is not UTF-8; 'replace'
      reads it with its bad bytes replaced (`text_cleaning`).
    max_decode_error_rate: with 'replace', the most undecodable sequences
      per character of the corpus before the run stops.
    max_unk_rate: the most [UNK] tokens per token before the run stops (a
      vocabulary that does not fit the text, or the wrong --lower_case).
    vocab_learn_params: extra arguments for the WordPiece learner
      (`wordpiece_tokenizer_learner_lib.learn`); no flag.
  """

  vocab_file: Optional[str] = None
  vocab_size: Optional[int] = None
  lower_case: bool = True
  document_mode: str = 'blank_line'
  sentence_per_line: bool = False
  strip_gutenberg: bool = False
  drop_line_regexes: Tuple[str, ...] = ()
  drop_headings: bool = True
  min_sentence_chars: int = 1
  file_pattern: str = '*.txt'
  max_seq_length: int = 128
  short_seq_prob: float = 0.1
  next_sentence_prediction: bool = False
  masking: str = 'dynamic'
  dupe_factor: int = 1
  mask_rate: float = 0.15
  max_predictions_per_seq: Optional[int] = None
  mask_token_fraction: float = 0.8
  random_token_fraction: float = 0.1
  eval_fraction: float = 0.01
  num_shards: int = 1
  num_eval_shards: int = 1
  seed: int = 12345
  encoding_errors: str = 'strict'
  max_decode_error_rate: float = 0.001
  max_unk_rate: float = 0.05
  vocab_learn_params: Optional[Dict[str, Any]] = None

  def __post_init__(self):
    object.__setattr__(self, 'drop_line_regexes', tuple(self.drop_line_regexes))
    if (self.vocab_file is None) == (self.vocab_size is None):
      raise cli.UserError(
          'Give exactly one of --vocab_file (an existing vocabulary) and '
          '--vocab_size (learn one from the train split); got '
          f'vocab_file={self.vocab_file!r}, vocab_size={self.vocab_size!r}.'
      )
    if self.masking not in records.MASKING_MODES:
      raise cli.UserError(
          f'--masking must be one of {records.MASKING_MODES}, '
          f'got {self.masking!r}.'
      )
    if self.dupe_factor < 1:
      raise cli.UserError(
          f'--dupe_factor must be >= 1, got {self.dupe_factor}.'
      )
    if self.masking == 'dynamic' and self.dupe_factor != 1:
      raise cli.UserError(
          f'--dupe_factor={self.dupe_factor} only applies to --masking=static;'
          ' dynamic masking draws a fresh mask every epoch, so duplicating '
          'examples only repeats them. Drop --dupe_factor or use '
          '--masking=static.'
      )
    if not 0.0 <= self.eval_fraction < 1.0:
      raise cli.UserError(
          '--eval_fraction must be in [0, 1), got ' f'{self.eval_fraction}.'
      )
    if self.num_shards < 1 or self.num_eval_shards < 1:
      raise cli.UserError(
          '--num_shards and --num_eval_shards must be >= 1, got '
          f'{self.num_shards} and {self.num_eval_shards}.'
      )
    if self.vocab_size is not None and (
        self.vocab_size <= len(vocab_lib.SPECIAL_TOKENS)
    ):
      raise cli.UserError(
          f'--vocab_size must exceed '
          f'{len(vocab_lib.SPECIAL_TOKENS)} (the special '
          f'tokens), got {self.vocab_size}.'
      )
    for name in ('max_decode_error_rate', 'max_unk_rate'):
      if not 0.0 <= getattr(self, name) <= 1.0:
        raise cli.UserError(
            f'--{name} must be in [0, 1], got ' f'{getattr(self, name)}.'
        )
    # The options of the later stages check themselves when built.
    try:
      self.cleaning_options()
      self.instance_options()
      self.masking_config()
    except ValueError as error:
      raise cli.UserError(f'--{error}') from None

  def cleaning_options(self) -> text_cleaning.CleaningOptions:
    return text_cleaning.CleaningOptions(
        document_mode=self.document_mode,
        sentence_per_line=self.sentence_per_line,
        strip_gutenberg=self.strip_gutenberg,
        drop_line_regexes=self.drop_line_regexes,
        drop_headings=self.drop_headings,
        min_sentence_chars=self.min_sentence_chars,
        file_pattern=self.file_pattern,
        encoding_errors=self.encoding_errors,
    )

  def instance_options(self) -> pretraining_instances.InstanceOptions:
    return pretraining_instances.InstanceOptions(
        max_seq_length=self.max_seq_length,
        short_seq_prob=self.short_seq_prob,
        next_sentence_prediction=self.next_sentence_prediction,
    )

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


class _Timer:
  """Accumulates wall-clock seconds per named step."""

  def __init__(self):
    self.seconds = {}
    self._start = time.time()

  def measure(self, name: str, fn, *args, **kwargs):
    tick = time.time()
    result = fn(*args, **kwargs)
    self.seconds[name] = round(time.time() - tick, 2)
    return result

  def total(self) -> float:
    return round(time.time() - self._start, 2)


def _load_given_vocab(config: PretrainingDataConfig) -> Optional[List[str]]:
  """`config.vocab_file`'s tokens (None when a vocabulary is learned).

  Raises:
    FileNotFoundError, UserError: naming --vocab_file.
  """
  if config.vocab_file is None:
    return None
  try:
    return vocab_lib.load_vocab(config.vocab_file)
  except FileNotFoundError as e:
    raise FileNotFoundError(f'--vocab_file={config.vocab_file}: {e}') from e
  except ValueError as e:
    raise cli.UserError(f'--vocab_file={config.vocab_file}: {e}') from e


def _learn_vocab(
    config: PretrainingDataConfig, train_documents: List[List[str]]
) -> List[str]:
  """A WordPiece vocabulary learned from the train split (not yet written)."""
  logging.info(
      'Learning a WordPiece vocabulary of size %d from the train ' 'split.',
      config.vocab_size,
  )
  sentences = [s for document in train_documents for s in document]
  return vocab_lib.build_wordpiece_vocab(
      sentences,
      config.vocab_size,
      None,
      lower_case=config.lower_case,
      learn_params=config.vocab_learn_params,
  )


def _write_vocab(
    config: PretrainingDataConfig, tokens: List[str], output_dir: str
) -> None:
  """Writes the vocabulary into `output_dir` (atomically).

  Writes the vocabulary into `output_dir` (atomically), unless it is
  `config.vocab_file` itself.
  """
  output_path = os.path.join(output_dir, records.VOCAB_FILENAME)
  if config.vocab_file is None or (
      _absolute(config.vocab_file) != _absolute(output_path)
  ):
    vocab_lib.write_vocab(tokens, output_path)


def _check_decode_error_rate(
    stats: text_cleaning.CorpusStats, config: PretrainingDataConfig
) -> None:
  """Stops when too much of the corpus was undecodable.

  Stops when more of the corpus was undecodable than allowed (only
  possible with --encoding_errors=replace).

  Raises:
    UserError: naming the rate, the files and the flag.
  """
  rate = stats.decode_errors / max(1, stats.characters)
  if rate > config.max_decode_error_rate:
    raise cli.UserError(
        f'{stats.decode_errors:,} undecodable byte sequences in '
        f'{stats.files_with_decode_errors} file(s), {rate:.3%} of the '
        f'corpus, exceed --max_decode_error_rate='
        f'{config.max_decode_error_rate}: convert the files to UTF-8, or '
        'raise --max_decode_error_rate to write the records anyway.'
    )


def _case_warning(tokens: Sequence[str], lower_case: bool) -> Optional[str]:
  """A warning when the vocabulary's case disagrees with lower_case.

  A warning when the vocabulary looks cased but lower_case is on, or
  the other way round.
  """
  words = [t for t in tokens if t.isalpha()]
  if not words:
    return None
  cased = sum(1 for t in words if t != t.lower()) / len(words)
  if lower_case and cased > 0.05:
    return (
        f"{cased:.0%} of the vocabulary's word tokens have upper-case "
        'letters, but --lower_case is on: those tokens are never used.'
    )
  if not lower_case and cased == 0.0:
    return (
        'the vocabulary has no upper-case tokens, but --lower_case is off:'
        ' capitalised words will split badly or become [UNK].'
    )
  return None


class _SplitWriter:
  """Packs, masks and writes the tokenized documents of one split."""

  def __init__(
      self,
      config: PretrainingDataConfig,
      tokens: List[str],
      output_dir: str,
      timer: _Timer,
  ):
    self._config = config
    self._tokens = tokens
    self._special_ids = vocab_lib.SpecialTokenIds.from_vocab(tokens)
    self._output_dir = output_dir
    self._timer = timer

  def write(
      self,
      split: str,
      split_index: int,
      documents: List[List[str]],
      tokenized: List[List[List[int]]],
      tokenization_stats: TokenizationStats,
  ) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Writes one split.

    Args:
      split: 'train' or 'eval'.
      split_index: 0 or 1, to derive distinct seeds per split.
      documents: the split's documents of sentences.
      tokenized: the same documents as sentences of token ids
        (`tokenize_documents`).
      tokenization_stats: their tokenization counters.

    Returns:
      `(split_metadata, split_stats)`: the `metadata['splits'][split]` entry
      and the split's counters.
    """
    config = self._config
    features, instance_stats = self._timer.measure(
        f'instances_{split}',
        self._make_features,
        tokenized,
        random.Random(f'{config.seed}-{split}-instances'),
        f'instances {split}',
    )
    masking_config = config.masking_config()
    if masking_config is not None:
      features = self._timer.measure(
          f'mask_{split}',
          self._static_mask,
          features,
          masking_config,
          config.seed * 2 + split_index,
          f'mask {split}',
      )
    num_shards = (
        config.num_shards if split == 'train' else (config.num_eval_shards)
    )
    files = self._timer.measure(
        f'write_{split}',
        records.write_split,
        self._output_dir,
        split,
        features,
        num_shards,
        f'write {split}',
    )
    num_examples = len(features['input_ids'])
    logging.info(
        '%s: %d examples written to %d files.', split, num_examples, len(files)
    )
    split_stats = {
        'documents': len(documents),
        'sentences': sum(len(d) for d in documents),
        'tokenization': dataclasses.asdict(tokenization_stats),
        'instances': dataclasses.asdict(instance_stats),
        'examples': num_examples,
    }
    if masking_config is not None:
      split_stats['masked_lm_predictions'] = int(
          features['masked_lm_weights'].sum()
      )
    return {'files': files, 'num_examples': num_examples}, split_stats

  def _make_features(
      self,
      tokenized: List[List[List[int]]],
      rng: random.Random,
      progress_label: str,
  ):
    instances, instance_stats = pretraining_instances.create_instances(
        tokenized,
        self._config.instance_options(),
        self._special_ids.cls,
        self._special_ids.sep,
        rng,
        progress_label=progress_label,
    )
    features = instances_to_features(
        instances,
        self._config.max_seq_length,
        self._config.next_sentence_prediction,
    )
    return features, instance_stats

  def _static_mask(
      self,
      features: Dict[str, np.ndarray],
      masking_config: masking_lib.MaskingConfig,
      seed: int,
      progress_label: str,
  ) -> Dict[str, np.ndarray]:
    features = static_mask(
        features,
        masking_config,
        self._special_ids,
        len(self._tokens),
        self._config.dupe_factor,
        seed,
        progress_label=progress_label,
    )
    return _shuffle_rows(features, seed)


def _sum_tokenization(parts: Sequence[TokenizationStats]) -> TokenizationStats:
  total = TokenizationStats()
  for part in parts:
    total.sentences += part.sentences
    total.empty_sentences += part.empty_sentences
    total.tokens += part.tokens
    total.unk_tokens += part.unk_tokens
  total.unk_rate = total.unk_tokens / max(1, total.tokens)
  return total


def _static_masking_metadata(
    config: PretrainingDataConfig,
) -> Optional[Dict[str, Any]]:
  masking_config = config.masking_config()
  if masking_config is None:
    return None
  return {
      'mask_rate': masking_config.mask_rate,
      'max_predictions_per_seq': masking_config.max_predictions_per_seq,
      'mask_token_fraction': masking_config.mask_token_fraction,
      'random_token_fraction': masking_config.random_token_fraction,
      'dupe_factor': config.dupe_factor,
      'seed': config.seed,
  }


def _absolute(path: str) -> str:
  """A local path made absolute; a URL-like path (`gs://...`) as given."""
  return path if '://' in path else os.path.abspath(path)


def _source_metadata(
    inputs: Sequence[str], config: PretrainingDataConfig
) -> Dict[str, Any]:
  source = {'inputs': [_absolute(p) for p in inputs]}
  source.update(dataclasses.asdict(config))
  source['drop_line_regexes'] = list(config.drop_line_regexes)
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

  Args:
    inputs: corpus files or directories.
    output_dir: the record directory to write (created if needed).
    config: the options; default `PretrainingDataConfig(**options)`.
    **options: `PretrainingDataConfig` fields, overriding those of `config`
      (e.g. `vocab_size=200, masking='static', dupe_factor=3`).

  Returns:
    The metadata written to `output_dir/metadata.json` (see `records`).

  Raises:
    FileNotFoundError: a corpus input or the vocabulary file is missing.
    ValueError: inconsistent options, an empty corpus, a bad vocabulary.
  """
  if config is None:
    config = PretrainingDataConfig(**options)
  elif options:
    config = dataclasses.replace(config, **options)
  # Everything is checked, read and tokenized before the output directory is
  # touched: a mistake in a flag, the vocabulary or the corpus leaves an
  # earlier run's records as they were.
  if tf.io.gfile.exists(output_dir) and not tf.io.gfile.isdir(output_dir):
    raise cli.UserError(
        f'--output_dir {output_dir} is a file; expected a '
        'directory (new or holding records).'
    )
  timer = _Timer()
  given_tokens = _load_given_vocab(config)
  try:
    documents, corpus_stats = timer.measure(
        'read_corpus',
        text_cleaning.read_corpus,
        inputs,
        config.cleaning_options(),
        'read corpus',
    )
  except FileNotFoundError as e:
    raise FileNotFoundError(f'--input: {e}') from e
  logging.info(
      'Read %d documents, %d sentences from %d files.',
      corpus_stats.documents,
      corpus_stats.sentences,
      corpus_stats.files,
  )
  _check_decode_error_rate(corpus_stats, config)
  train, held_out, split_how = split_train_eval(
      documents, config.eval_fraction, config.seed
  )
  logging.info('Train/eval split: %s.', split_how)
  tokens = given_tokens or timer.measure('vocab', _learn_vocab, config, train)
  special_ids = vocab_lib.SpecialTokenIds.from_vocab(tokens)
  tokenized = {}
  for split, split_documents in zip(records.SPLITS, (train, held_out)):
    tokenized[split] = timer.measure(
        f'tokenize_{split}',
        tokenize_documents,
        split_documents,
        tokens,
        config.lower_case,
        special_ids.unk,
        f'tokenize {split}',
    )
  total_tokenization = _sum_tokenization(
      [stats for _, stats in tokenized.values()]
  )
  if total_tokenization.unk_rate > config.max_unk_rate:
    raise cli.UserError(
        f'[UNK] rate {total_tokenization.unk_rate:.2%} exceeds '
        f'--max_unk_rate={config.max_unk_rate}: the vocabulary does not fit '
        'the text (check --vocab_file and --lower_case), or raise '
        '--max_unk_rate to write the records anyway.'
    )

  tf.io.gfile.makedirs(output_dir)
  # Drops an earlier run's metadata.json and an interrupted run's temporary
  # files; metadata.json is written last, so it marks a complete directory.
  records.prepare_output_dir(output_dir)
  _write_vocab(config, tokens, output_dir)

  writer = _SplitWriter(config, tokens, output_dir, timer)
  splits, split_stats = {}, {}
  for split_index, split in enumerate(records.SPLITS):
    splits[split], split_stats[split] = writer.write(
        split, split_index, (train, held_out)[split_index], *tokenized[split]
    )

  warnings = [w for w in [_case_warning(tokens, config.lower_case)] if w]
  if config.vocab_size is not None and len(tokens) < 0.9 * config.vocab_size:
    warnings.append(
        f'the learned vocabulary has {len(tokens)} tokens, fewer than '
        f'--vocab_size={config.vocab_size}: the corpus is too small for that '
        'size (the WordPiece learner drops pieces seen fewer than '
        'lower_thresh=10 times; see vocab_learn_params).'
    )
  if total_tokenization.unk_rate > _UNK_RATE_WARNING:
    warnings.append(
        f'[UNK] rate is {total_tokenization.unk_rate:.2%}: check that '
        '--lower_case matches the vocabulary and that the text is clean.'
    )
  timer.seconds['total'] = timer.total()
  metadata = {
      'format_version': records.FORMAT_VERSION,
      'max_seq_length': config.max_seq_length,
      'vocab_file': records.VOCAB_FILENAME,
      'vocab_size': len(tokens),
      'lower_case': config.lower_case,
      'special_token_ids': special_ids.as_dict(),
      'next_sentence_labels': config.next_sentence_prediction,
      'masking': config.masking,
      'static_masking': _static_masking_metadata(config),
      'splits': splits,
      'stats': {
          'corpus': dataclasses.asdict(corpus_stats),
          'split': split_how,
          'tokenization': dataclasses.asdict(total_tokenization),
          'splits': split_stats,
          'warnings': warnings,
          'seconds': timer.seconds,
      },
      'source': _source_metadata(inputs, config),
  }
  records.write_metadata(output_dir, metadata)
  for warning in warnings:
    logging.warning(warning)
  return metadata


def format_report(metadata: Dict[str, Any]) -> str:
  """A readable report of what `prepare_pretraining_data` did.

  Args:
    metadata: its return value (or a loaded `metadata.json`).

  Returns:
    Multi-line text.
  """
  stats = metadata['stats']
  corpus_stats = text_cleaning.CorpusStats(**stats['corpus'])
  tokenization = stats['tokenization']
  lines = ['Corpus', corpus_stats.report(), '', f'Split: {stats["split"]}']
  for split in records.SPLITS:
    split_stats = stats['splits'][split]
    instance_stats = split_stats['instances']
    lines.append(
        f'  {split:<5}: {split_stats["documents"]:,} documents, '
        f'{split_stats["sentences"]:,} sentences, '
        f'{split_stats["tokenization"]["tokens"]:,} tokens -> '
        f'{instance_stats["instances"]:,} instances '
        f'({instance_stats["truncated_instances"]:,} truncated, '
        f'{instance_stats["short_target_chunks"]:,} short, '
        f'{instance_stats["random_next_instances"]:,} random-next) -> '
        f'{split_stats["examples"]:,} examples in '
        f'{len(metadata["splits"][split]["files"])} files'
    )
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
  lines += [
      '',
      f'Vocabulary: {metadata["vocab_size"]:,} tokens, lower_case='
      f'{metadata["lower_case"]}, special ids {metadata["special_token_ids"]}',
      f'Tokens: {tokenization["tokens"]:,} ({tokenization["unk_tokens"]:,} '
      f'[UNK], rate {tokenization["unk_rate"]:.4%}); '
      f'{tokenization["empty_sentences"]:,} sentences without tokens dropped',
      f'Examples: {num_examples:,}; max_seq_length '
      f'{metadata["max_seq_length"]}; mean fill {mean_fill:.1%}; masking '
      f'{metadata["masking"]}',
      'Seconds: ' + ', '.join(f'{k} {v}' for k, v in stats['seconds'].items()),
  ]
  lines += [f'WARNING: {w}' for w in stats['warnings']]
  return '\n'.join(lines)


FLAGS = flags.FLAGS


def define_flags():
  """Defines the command-line flags."""
  flags.DEFINE_list(
      'input',
      None,
      'Corpus files or directories, comma '
      'separated; directories are searched recursively.',
  )
  flags.DEFINE_string('output_dir', None, 'Record directory to write.')
  flags.DEFINE_string('vocab_file', None, 'WordPiece vocabulary to use.')
  flags.DEFINE_integer(
      'vocab_size',
      None,
      'Learn a WordPiece vocabulary of '
      'this size from the train split instead.',
  )
  flags.DEFINE_bool(
      'lower_case',
      True,
      'Lower-case and strip accents ' '(uncased vocabulary).',
  )
  flags.DEFINE_enum(
      'document_mode',
      'blank_line',
      list(text_cleaning.DOCUMENT_MODES),
      'blank_line: each blank-line-separated block is a '
      'document; file: each file is a document.',
  )
  flags.DEFINE_bool(
      'sentence_per_line', False, 'Each non-empty line is one sentence.'
  )
  flags.DEFINE_bool(
      'strip_gutenberg',
      False,
      'Keep only the text between '
      'the Project Gutenberg START and END markers.',
  )
  flags.DEFINE_multi_string(
      'drop_line_regex', [], 'Drop lines matching this regex (repeatable).'
  )
  flags.DEFINE_bool(
      'drop_headings',
      True,
      'Drop heading-like paragraphs '
      '(chapter headings, tables of contents, all-capitals '
      'lines, short title-case lines).',
  )
  flags.DEFINE_integer(
      'min_sentence_chars', 1, 'Drop sentences shorter than this.'
  )
  flags.DEFINE_string(
      'file_pattern', '*.txt', 'Glob for file names inside input directories.'
  )
  flags.DEFINE_integer('max_seq_length', 128, 'Example length.')
  flags.DEFINE_float(
      'short_seq_prob',
      0.1,
      'Probability of a shorter target length per document.',
  )
  flags.DEFINE_bool(
      'next_sentence_prediction',
      False,
      'Make random-next pairs and write next_sentence_labels.',
  )
  flags.DEFINE_enum(
      'masking',
      'dynamic',
      list(records.MASKING_MODES),
      'static: mask once here; dynamic: in the input pipeline.',
  )
  flags.DEFINE_integer(
      'dupe_factor',
      1,
      'Static masking: differently masked ' 'copies per instance.',
  )
  flags.DEFINE_float(
      'mask_rate', 0.15, 'Static masking: fraction of tokens ' 'to predict.'
  )
  flags.DEFINE_integer(
      'max_predictions_per_seq',
      None,
      'Static masking: prediction slots per example '
      '(default int((mask_rate + 0.005) * max_seq_length)).',
  )
  flags.DEFINE_float(
      'mask_token_fraction',
      0.8,
      'Static masking: share of predictions shown as [MASK].',
  )
  flags.DEFINE_float(
      'random_token_fraction',
      0.1,
      'Static masking: share of ' 'predictions replaced by random tokens.',
  )
  flags.DEFINE_float(
      'eval_fraction', 0.01, 'Fraction of documents held out for eval.'
  )
  flags.DEFINE_integer('num_shards', 1, 'Train files.')
  flags.DEFINE_integer('num_eval_shards', 1, 'Eval files.')
  flags.DEFINE_integer('seed', 12345, 'Seed of the split, instances, masks.')
  defaults = PretrainingDataConfig(vocab_size=1000)
  flags.DEFINE_enum(
      'encoding_errors',
      defaults.encoding_errors,
      list(text_cleaning.ENCODING_ERRORS),
      'strict: refuse a file that is not UTF-8, naming it and '
      'its first bad byte; replace: read it with each bad byte '
      'sequence replaced by U+FFFD (counted).',
  )
  flags.DEFINE_float(
      'max_decode_error_rate',
      defaults.max_decode_error_rate,
      'With --encoding_errors=replace: stop when more '
      'undecodable sequences per character than this.',
  )
  flags.DEFINE_float(
      'max_unk_rate',
      defaults.max_unk_rate,
      'Stop when more [UNK] tokens per token than this (a '
      'vocabulary or --lower_case that does not fit the '
      'text).',
  )
  flags.mark_flags_as_required(['input', 'output_dir'])


def config_from_flags() -> PretrainingDataConfig:
  """A `PretrainingDataConfig` from the parsed flags."""
  fields = {f.name for f in dataclasses.fields(PretrainingDataConfig)}
  options = {name: FLAGS[name].value for name in fields if name in FLAGS}
  options['drop_line_regexes'] = tuple(FLAGS.drop_line_regex)
  return PretrainingDataConfig(**options)


def main(argv):
  """Runs the command with the parsed flags (the absl entry point)."""
  cli.refuse_positional(argv)
  metadata = prepare_pretraining_data(
      FLAGS.input, FLAGS.output_dir, config_from_flags()
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
