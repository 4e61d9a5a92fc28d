"""WikiText token files for word-level language modeling (002 rebuttal).

As in the standard setups (Transformer-XL, PyTorch's word LM example) every
line, blank ones included, is its space-separated tokens plus `EOS`; headings
and `<unk>` are ordinary tokens. A held-out tail starts at an article title;
`window_dataset` makes `[B, T + 1]` windows with stride `T`, so every token
after the first is a target exactly once.
"""

import collections
import dataclasses
import os
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from official_repro.common import cli

EOS = '<eos>'
UNK = '<unk>'
SPECIAL_TOKENS = (EOS, UNK)  # ids 0 and 1.

# ` = Title = `, ` = = Section = = `: the same run of '=' on both sides.
_HEADING = re.compile(r'^(=(?: =)*) (.+) \1$')


def heading_level(line: str) -> int:
  """1 for an article title, 2+ for section headings, 0 for other lines."""
  match = _HEADING.match(line.strip())
  return match.group(1).count('=') if match else 0


@dataclasses.dataclass(frozen=True)
class TextStats:
  """What one split holds, before encoding.

  `source` is the file path, or `path[lines a:b]` for a part of a file;
  `tokens` include one `EOS` per line; `unk_tokens` are the text's `<unk>`.
  """

  source: str
  lines: int
  blank_lines: int
  heading_lines: int
  tokens: int
  unk_tokens: int

  @classmethod
  def of(cls, source: str, lines: Sequence[str]) -> 'TextStats':
    words = [line.split() for line in lines]
    return cls(
        source=source,
        lines=len(lines),
        blank_lines=sum(not w for w in words),
        heading_lines=sum(heading_level(line) > 0 for line in lines),
        tokens=sum(len(w) + 1 for w in words),
        unk_tokens=sum(w.count(UNK) for w in words),
    )


def read_lines(path: str) -> List[str]:
  """The lines of a WikiText file; FileNotFoundError, or UserError if empty."""
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f'WikiText file {path!r} does not exist.')
  with tf.io.gfile.GFile(path, 'r') as f:
    lines = f.read().splitlines()
  if not any(line.strip() for line in lines):
    raise cli.UserError(f'WikiText file {path!r} is empty: it holds no token.')
  return lines


def tokenize(lines: Sequence[str]) -> List[str]:
  """Whitespace tokens of every line followed by `EOS`, in order."""
  tokens = []
  for line in lines:
    tokens.extend(line.split())
    tokens.append(EOS)
  return tokens


@dataclasses.dataclass(frozen=True)
class LineSplit:
  """Where `split_lines` cut a file: at line `cut` (0-based), a title or not."""

  train_lines: List[str]
  heldout_lines: List[str]
  cut: int
  at_title: bool

  def describe(self, path: str, fraction: float) -> str:
    total = self.cut + len(self.heldout_lines)
    where = (
        'the first article title at or after that point'
        if self.at_title
        else 'that line (no article title follows it)'
    )
    return (
        f'held out the last {fraction:g} of {path!r}: lines '
        f'{self.cut + 1}-{total} of {total} (1-based), cut at {where}.'
    )


def split_lines(
    lines: Sequence[str], heldout_fraction: float, path: str = '<lines>'
) -> LineSplit:
  """Splits a file's lines into a training part and a held-out tail.

  The cut, line `round(len(lines) * (1 - heldout_fraction))`, moves on to the
  next article title if any. UserError for a fraction outside (0, 1) or a part
  without tokens.
  """
  if not 0.0 < heldout_fraction < 1.0:
    raise cli.UserError(
        f'valid_fraction must be in (0, 1), got {heldout_fraction}.'
    )
  nominal = int(round(len(lines) * (1.0 - heldout_fraction)))
  cut = next(
      (i for i in range(nominal, len(lines)) if heading_level(lines[i]) == 1),
      None,
  )
  at_title = cut is not None
  if cut is None:
    cut = nominal
  train, heldout = list(lines[:cut]), list(lines[cut:])
  for name, part in (('training', train), ('held-out', heldout)):
    if not any(line.strip() for line in part):
      raise cli.UserError(
          f'Splitting {path!r} ({len(lines)} lines) with valid_fraction='
          f'{heldout_fraction} leaves the {name} part without tokens; use a '
          'longer file or another fraction.'
      )
  return LineSplit(train, heldout, cut, at_title)


@dataclasses.dataclass(frozen=True)
class EncodeStats:
  """Encoding one split with a vocabulary.

  `unk_tokens` encode to `UNK` (the text's `<unk>` included); `oov_tokens`
  (`oov_types` distinct words) are the others not in the vocabulary.
  """

  tokens: int
  unk_tokens: int
  oov_tokens: int
  oov_types: int


class Vocabulary:
  """Word <-> id map: `EOS` = 0, `UNK` = 1, then by count (ties by word)."""

  def __init__(self, words: Sequence[str]):
    """`words`: `SPECIAL_TOKENS`, then distinct words (as `build` makes)."""
    self._words = list(words)
    self._ids = {word: i for i, word in enumerate(self._words)}
    self.build_stats: Dict[str, int] = {}

  @classmethod
  def build(
      cls, tokens: Sequence[str], max_size: Optional[int] = None
  ) -> 'Vocabulary':
    """The vocabulary of `tokens`, capped to `max_size` (>= 3) words."""
    if max_size is not None and max_size < len(SPECIAL_TOKENS) + 1:
      raise cli.UserError(
          f'max_vocab_size must be >= {len(SPECIAL_TOKENS) + 1} '
          f'({SPECIAL_TOKENS} and one word), got {max_size}.'
      )
    counts = collections.Counter(tokens)
    words = sorted(
        (w for w in counts if w not in SPECIAL_TOKENS),
        key=lambda w: (-counts[w], w),
    )
    limit = len(words) if max_size is None else max_size - len(SPECIAL_TOKENS)
    kept, capped = words[:limit], words[limit:]
    vocab = cls(list(SPECIAL_TOKENS) + kept)
    vocab.build_stats = dict(
        distinct_words=len(words),
        kept_words=len(kept),
        capped_types=len(capped),
        capped_tokens=sum(counts[w] for w in capped),
    )
    logging.info(
        'Vocabulary: %d words + %s from %d training tokens; the cap removed '
        '%d word types (%d tokens -> %s).',
        len(kept),
        SPECIAL_TOKENS,
        len(tokens),
        len(capped),
        vocab.build_stats['capped_tokens'],
        UNK,
    )
    return vocab

  def __len__(self) -> int:
    return len(self._words)

  @property
  def words(self) -> List[str]:
    return list(self._words)

  def encode(self, tokens: Sequence[str]) -> Tuple[np.ndarray, EncodeStats]:
    """Token ids `[len(tokens)]` int32 and the counts of `UNK` mappings."""
    unk = self._ids[UNK]
    ids = np.fromiter(
        (self._ids.get(t, unk) for t in tokens),
        dtype=np.int32,
        count=len(tokens),
    )
    oov = [t for t in tokens if t not in self._ids]
    return ids, EncodeStats(
        tokens=len(tokens),
        unk_tokens=int(np.sum(ids == unk)),
        oov_tokens=len(oov),
        oov_types=len(set(oov)),
    )

  def decode(self, ids: Sequence[int]) -> List[str]:
    return [self._words[i] for i in ids]


def unigram_log_probs(ids: np.ndarray, vocab_size: int) -> np.ndarray:
  """Add-one smoothed log unigram probabilities `[vocab_size]` of `ids`."""
  counts = np.bincount(ids, minlength=vocab_size).astype(np.float64) + 1.0
  return np.log(counts / counts.sum()).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class WindowStats:
  """How a stream of N tokens became windows of `T + 1` with stride `T`.

  `dropped_targets`: the training tail filling no whole window.
  """

  stream_tokens: int
  windows: int
  target_tokens: int
  dropped_targets: int
  batches: int


def window_stats(
    num_tokens: int, seq_length: int, batch_size: int, training: bool
) -> WindowStats:
  """The `WindowStats` of `window_dataset` for a stream of `num_tokens`."""
  targets = max(num_tokens - 1, 0)
  if training:
    windows = targets // seq_length
    batches = windows // batch_size
  else:
    windows = -(-targets // seq_length)
    batches = -(-windows // batch_size)
  scored = min(windows * seq_length, targets)
  return WindowStats(
      stream_tokens=num_tokens,
      windows=windows,
      target_tokens=scored,
      dropped_targets=targets - scored,
      batches=batches,
  )


def window_dataset(
    stream: np.ndarray,
    seq_length: int,
    batch_size: int,
    training: bool,
    seed: Optional[int] = None,
    name: str = 'stream',
) -> tf.data.Dataset:
  """Batches of windows `stream[i * T : i * T + T + 1]` of int32 `[N]`.

  Training: whole windows, reshuffled each pass, repeated, whole batches.
  Evaluation: every window in order once, the last padded with `EOS` (weight
  0). Yields `tokens` int32 `[B, T + 1]` and `weights` float32 `[B, T]`.
  UserError for non-positive sizes or a stream too short.
  """
  if seq_length < 1 or batch_size < 1:
    raise cli.UserError(
        f'seq_length and batch_size must be >= 1, got '
        f'seq_length={seq_length}, batch_size={batch_size}.'
    )
  stats = window_stats(len(stream), seq_length, batch_size, training)
  if stats.batches == 0:
    need = (batch_size * seq_length + 1) if training else 2
    raise cli.UserError(
        f'The {name} stream has {len(stream)} tokens; '
        f'{"training" if training else "evaluation"} with seq_length='
        f'{seq_length} and batch_size={batch_size} needs at least {need}.'
    )
  # `[W * T + 1]` tokens (zero-padded) and `[W * T]` target weights.
  length = stats.windows * seq_length + 1
  padded = np.zeros([length], np.int32)
  padded[: min(length, len(stream))] = stream[:length]
  weights = np.zeros([length - 1], np.float32)
  weights[: stats.target_tokens] = 1.0
  tokens_t, weights_t = tf.constant(padded), tf.constant(weights)

  def window(index):
    start = tf.cast(index, tf.int32) * seq_length
    return dict(
        tokens=tf.slice(tokens_t, [start], [seq_length + 1]),
        weights=tf.slice(weights_t, [start], [seq_length]),
    )

  dataset = tf.data.Dataset.range(stats.windows)
  if training:
    dataset = dataset.shuffle(
        stats.windows, seed=seed, reshuffle_each_iteration=True
    ).repeat()
  dataset = dataset.map(window, num_parallel_calls=tf.data.AUTOTUNE)
  dataset = dataset.batch(batch_size, drop_remainder=training)
  return dataset.prefetch(tf.data.AUTOTUNE)


@dataclasses.dataclass
class Corpus:
  """Encoded int32 token streams (`test` None without a file), and how made.

  `stats` holds per split `text` and `encoding` counts and `vocab` (the cap's
  counts), JSON-serializable.
  """

  vocab: Vocabulary
  train: np.ndarray
  valid: np.ndarray
  test: Optional[np.ndarray]
  split_note: str
  stats: Dict[str, Mapping[str, object]]


def load_corpus(
    train_file: str,
    valid_file: Optional[str] = None,
    valid_fraction: Optional[float] = None,
    max_vocab_size: Optional[int] = None,
    test_file: Optional[str] = None,
) -> Corpus:
  """Reads, splits and encodes a WikiText-format corpus.

  Validation is `valid_file` or the `valid_fraction` tail of `train_file`
  (exactly one); `max_vocab_size` counts the specials.
  """
  if (valid_file is None) == (valid_fraction is None):
    raise cli.UserError(
        'Give exactly one of valid_file and valid_fraction, got '
        f'valid_file={valid_file!r}, valid_fraction='
        f'{valid_fraction!r}.'
    )
  lines = read_lines(train_file)
  if valid_file is not None:
    parts = {
        'train': (train_file, lines),
        'valid': (valid_file, read_lines(valid_file)),
    }
    split_note = f'validation file {valid_file!r}.'
  else:
    split = split_lines(lines, valid_fraction, train_file)
    name = os.path.basename(train_file)
    parts = {
        'train': (f'{name}[lines 1:{split.cut}]', split.train_lines),
        'valid': (
            f'{name}[lines {split.cut + 1}:{len(lines)}]',
            split.heldout_lines,
        ),
    }
    split_note = split.describe(train_file, valid_fraction)
  logging.info('WikiText split: %s', split_note)
  if test_file is not None:
    parts['test'] = (test_file, read_lines(test_file))
  tokens = {
      name: tokenize(part_lines) for name, (_, part_lines) in parts.items()
  }
  vocab = Vocabulary.build(tokens['train'], max_vocab_size)
  stats = {'vocab': dict(size=len(vocab), **vocab.build_stats)}
  ids = {}
  for name, (source, part_lines) in parts.items():
    ids[name], encoding = vocab.encode(tokens[name])
    stats[name] = dict(
        text=dataclasses.asdict(TextStats.of(source, part_lines)),
        encoding=dataclasses.asdict(encoding),
    )
    logging.info(
        '%s (%s): %d tokens, %d -> %s (%d not in the vocabulary, %d types).',
        name,
        source,
        encoding.tokens,
        encoding.unk_tokens,
        UNK,
        encoding.oov_tokens,
        encoding.oov_types,
    )
  return Corpus(
      vocab=vocab,
      train=ids['train'],
      valid=ids['valid'],
      test=ids.get('test'),
      split_note=split_note,
      stats=stats,
  )
