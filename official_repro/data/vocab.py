"""Vocabularies: loading, special tokens, learning, tokenizing.

A vocabulary is WordPiece (`vocab.txt`) or SentencePiece (`*.model`); text
becomes ids only through the original tokenizer of its kind (BERT's or
ALBERT's, `make_tokenizer`). Special token ids are looked up by string, never
assumed: BERT's uncased vocabulary has [UNK]..[MASK] at 100..103.
"""

import collections.abc
import contextlib
import dataclasses
import functools
import inspect
import re
from typing import Any, Dict, Iterable, Iterator, List, Mapping
from typing import Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import (
    wordpiece_tokenizer_learner_lib as learner,
)

from official_repro.common import cli
from official_repro.common import json_files
from official_repro.common import progress
from official_repro.data import sentencepiece_tokenization
from official_repro.data import tokenization

PAD_TOKEN = '[PAD]'
UNK_TOKEN = '[UNK]'
CLS_TOKEN = '[CLS]'
SEP_TOKEN = '[SEP]'
MASK_TOKEN = '[MASK]'
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)
WORDPIECE = 'wordpiece'
SENTENCEPIECE = 'sentencepiece'
WORDPIECE_FILENAME = 'vocab.txt'
SENTENCEPIECE_FILENAME = 'spiece.model'
_SENTENCEPIECE_SUFFIX = '.model'


class Vocabulary(collections.abc.Sequence):
  """A vocabulary's tokens (token `i` at index `i`) and its kind.

  A SentencePiece one keeps its serialized model (compared by
  `canonical_model`), and its pad and unknown pieces answer to [PAD] and [UNK]
  in `token_to_id`, so special tokens are looked up alike for both kinds.
  """

  def __init__(
      self,
      tokens: Sequence[str],
      sentencepiece_model: Optional[bytes] = None,
      aliases: Optional[Mapping[str, str]] = None,
  ):
    self._tokens = tuple(tokens)
    self.sentencepiece_model = sentencepiece_model
    self.token_to_id = {token: i for i, token in enumerate(self._tokens)}
    for name, token in (aliases or {}).items():
      self.token_to_id.setdefault(name, self.token_to_id[token])

  @classmethod
  def from_model(cls, model: bytes) -> 'Vocabulary':
    """A serialized SentencePiece model's (ValueError if it is not one)."""
    pieces, aliases = sentencepiece_tokenization.read_model(model)
    return cls(pieces, model, aliases)

  @functools.cached_property
  def canonical_model(self) -> Optional[bytes]:
    """What of the SentencePiece model decides ids (None for WordPiece)."""
    if self.sentencepiece_model is None:
      return None
    return sentencepiece_tokenization.canonical_model(self.sentencepiece_model)

  @property
  def kind(self) -> str:
    return WORDPIECE if self.sentencepiece_model is None else SENTENCEPIECE

  @property
  def filename(self) -> str:
    """The name a copy of it takes in a folder of ours."""
    return filename_of(self.kind)

  @property
  def tokenizer_name(self) -> str:
    """The tokenizer `metadata.json` names for records made with it."""
    return self.tokenizer_name_of(self.kind)

  @staticmethod
  def tokenizer_name_of(kind: str) -> str:
    if kind == WORDPIECE:
      return tokenization.TOKENIZER_NAME
    return sentencepiece_tokenization.TOKENIZER_NAME

  def __getitem__(self, index):
    return self._tokens[index]

  def __len__(self) -> int:
    return len(self._tokens)

  def __eq__(self, other) -> bool:
    if isinstance(other, Vocabulary):
      return (self._tokens, self.canonical_model) == (
          tuple(other),
          other.canonical_model,
      )
    if isinstance(other, (list, tuple)):
      return self.kind == WORDPIECE and self._tokens == tuple(other)
    return NotImplemented

  __hash__ = None

  def __repr__(self) -> str:
    return f'Vocabulary({self.kind}, {len(self)} tokens)'

  def write(self, path: str) -> None:
    """Writes it to `path` (a token per line, or the model), atomically."""
    if self.kind == WORDPIECE:
      write_vocab(self._tokens, path)
    else:
      json_files.write_bytes(path, self.sentencepiece_model)


def kind_of_file(path: str) -> str:
  """`SENTENCEPIECE` for a `*.model` file, else `WORDPIECE`."""
  return SENTENCEPIECE if path.endswith(_SENTENCEPIECE_SUFFIX) else WORDPIECE


def filename_of(kind: str) -> str:
  """The name a vocabulary of `kind` takes in a folder of ours."""
  return SENTENCEPIECE_FILENAME if kind == SENTENCEPIECE else WORDPIECE_FILENAME


def as_vocabulary(tokens: Sequence[str]) -> Vocabulary:
  """`tokens` as a `Vocabulary` (a plain sequence is WordPiece)."""
  return tokens if isinstance(tokens, Vocabulary) else Vocabulary(tokens)


@dataclasses.dataclass(frozen=True)
class SpecialTokenIds:
  """Ids of the special tokens of one vocabulary."""

  pad: int
  unk: int
  cls: int
  sep: int
  mask: int

  @classmethod
  def from_vocab(cls, tokens: Sequence[str]) -> 'SpecialTokenIds':
    """Looks the five special tokens up by string (ValueError if missing)."""
    ids = special_token_ids(as_vocabulary(tokens).token_to_id, SPECIAL_TOKENS)
    return cls(*ids.values())  # The fields' order is SPECIAL_TOKENS'.

  def all_ids(self) -> Tuple[int, ...]:
    """The five ids, in the order pad, unk, cls, sep, mask."""
    return dataclasses.astuple(self)

  def as_dict(self) -> Dict[str, int]:
    return dataclasses.asdict(self)


def special_token_ids(
    token_to_id: Mapping[str, int], tokens: Sequence[str]
) -> Dict[str, int]:
  """The ids of `tokens` in `token_to_id`; UserError names those missing."""
  missing = [token for token in tokens if token not in token_to_id]
  if missing:
    raise cli.UserError(
        f'The vocabulary lacks the special tokens {missing}; '
        f'expected all of {list(tokens)}.'
    )
  return {token: token_to_id[token] for token in tokens}


def finetuning_token_ids(tokenizer: Any, *extra: str) -> Dict[str, int]:
  """The ids of [CLS], [SEP], [PAD] and `extra` in `tokenizer.vocab`."""
  tokens = (CLS_TOKEN, SEP_TOKEN, PAD_TOKEN, *extra)
  return special_token_ids(tokenizer.vocab, tokens)


# A vocabulary is cased when at least this share of its word pieces with
# letters has a capital (BERT's cased vocabulary: about a fifth), uncased
# below the second (BERT's uncased one: 2 of 28,160, 'ℝ' and '##ℝ').
_CASED_SHARE = 0.02
_UNCASED_SHARE = 0.001
# Fewer word pieces with cased letters than this say nothing about casing.
_MIN_PIECES_FOR_CASING = 50
_SPECIAL_PIECE = re.compile(r'^\[[^\]]*\]$')
# How many distinct characters the WordPiece learner keeps by default.
_LEARNER_MAX_UNIQUE_CHARS = (
    inspect.signature(learner.learn).parameters['max_unique_chars'].default
)


def casing_mismatch(tokens: Sequence[str], lower_case: bool) -> Optional[str]:
  """Says why `tokens` cannot be read with that casing, or None.

  Uncased (next to no lettered piece has a capital) read without
  lower-casing, or cased (`_CASED_SHARE`) read lower-cased; bracketed tokens
  and caseless scripts do not count, and too few lettered pieces tell nothing.
  """
  pieces = [
      token.removeprefix('##')
      for token in tokens
      if not _SPECIAL_PIECE.match(token)
  ]
  # Pieces with a letter that has case (Latin, Greek, Cyrillic, ...): scripts
  # without case (Chinese, Devanagari, Arabic, ...) say nothing either way.
  lettered = [
      piece for piece in pieces if any(c.lower() != c.upper() for c in piece)
  ]
  if len(lettered) < _MIN_PIECES_FOR_CASING:
    return None
  capitals = sum(1 for piece in lettered if any(c.isupper() for c in piece))
  if not lower_case and capitals < _UNCASED_SHARE * len(lettered):
    return (
        f'uncased ({capitals} of its {len(lettered)} word pieces with '
        'cased letters have capitals), but the tokenizer keeps case '
        '(lower_case=False)'
    )
  if lower_case and capitals >= _CASED_SHARE * len(lettered):
    return (
        f'cased ({capitals} of its {len(lettered)} word pieces with letters '
        'have capitals), but the tokenizer lower-cases (lower_case=True)'
    )
  return None


def load_vocab(
    path: str, required_tokens: Sequence[str] = SPECIAL_TOKENS
) -> Vocabulary:
  """Reads a vocabulary: one token per line, or a SentencePiece `*.model`.

  A model's pad and unknown pieces stand for [PAD] and [UNK] in
  `required_tokens`.

  Raises:
    FileNotFoundError: `path` does not exist.
    ValueError: a folder, a byte-order mark, an empty file or line, a
      repeated token, or a required token missing.
  """
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f'Vocabulary file {path} does not exist.')
  if tf.io.gfile.isdir(path):
    raise cli.UserError(
        f'Vocabulary file {path} is a folder; give the vocabulary file in '
        'it (vocab.txt, one token per line, or a SentencePiece spiece.model).'
    )
  with tf.io.gfile.GFile(path, 'rb') as f:
    data = f.read()
  fix = ''
  if kind_of_file(path) == SENTENCEPIECE:
    try:
      vocabulary = Vocabulary.from_model(data)
    except ValueError as e:
      raise cli.UserError(f'Vocabulary file {path}: {e}') from None
    fix = (
        '; train it with them as control symbols (--vocab_type=sentencepiece'
        ' does)'
    )
  else:
    vocabulary = Vocabulary(_wordpiece_tokens(path, data))
  missing = [t for t in required_tokens if t not in vocabulary.token_to_id]
  if missing:
    raise cli.UserError(
        f'Vocabulary file {path} lacks required tokens {missing}{fix}.'
    )
  return vocabulary


def _wordpiece_tokens(path: str, data: bytes) -> List[str]:
  """A WordPiece file's tokens (UTF-8, no BOM, nothing empty or repeated)."""
  try:
    text = data.decode('utf-8')
  except UnicodeDecodeError as e:
    raise cli.UserError(
        f'Vocabulary file {path} is not UTF-8 text (byte {e.start}); give a '
        f'WordPiece vocab.txt, or a SentencePiece model named *'
        f'{_SENTENCEPIECE_SUFFIX}.'
    ) from None
  if text.startswith('\ufeff'):
    raise cli.UserError(
        f'Vocabulary file {path} starts with a UTF-8 byte-order mark, which '
        'would be part of its first token; save it as UTF-8 without one.'
    )
  lines = text.splitlines()
  if not lines:
    raise cli.UserError(
        f'Vocabulary file {path} is empty; expected one token per line.'
    )
  first_line = {}
  for line_number, line in enumerate(lines, start=1):
    token = line.strip()
    if not token:
      raise cli.UserError(
          f'Vocabulary file {path} line {line_number}: empty '
          'token; expected one token per line.'
      )
    if token in first_line:
      raise cli.UserError(
          f'Vocabulary file {path} line {line_number}: duplicate token '
          f'{token!r} (first on line {first_line[token]}).'
      )
    first_line[token] = line_number
  return list(first_line)


def write_vocab(tokens: Sequence[str], path: str):
  """Writes one token per line, atomically (renamed into place when whole)."""
  json_files.write_text(path, ''.join(token + '\n' for token in tokens))


def build_wordpiece_vocab(
    sentences: Iterable[str],
    vocab_size: int,
    output_path: Optional[str],
    lower_case: bool = True,
    learn_params: Optional[Mapping[str, Any]] = None,
) -> List[str]:
  """Learns a WordPiece vocabulary; writes it to `output_path` if given.

  Counts the words of `tokenization.BertTextSplitter` and runs TF Text's
  WordPiece learner (as `bert_vocab_from_dataset` does), reserving [PAD]=0,
  [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4. Returns the tokens; UserError for a
  `vocab_size` too small, or no text.
  """
  if vocab_size <= len(SPECIAL_TOKENS):
    raise cli.UserError(
        f'--vocab_size must exceed {len(SPECIAL_TOKENS)} (the '
        f'special tokens), got {vocab_size}.'
    )
  sentences = list(sentences)
  if not sentences:
    raise cli.UserError('build_wordpiece_vocab: no sentences to learn from.')
  splitter = tokenization.BertTextSplitter(lower_case)
  words = (
      tf.data.Dataset.from_tensor_slices(tf.constant(sentences, tf.string))
      .batch(1024)
      .map(splitter.split)
  )
  word_counts = learner.count_words(words)
  # Refused before learning: a size below the specials plus one piece per
  # character.
  characters = set().union(*map(set, word_counts)) if word_counts else set()
  limit = dict(learn_params or {}).get(
      'max_unique_chars', _LEARNER_MAX_UNIQUE_CHARS
  )
  smallest = len(SPECIAL_TOKENS) + min(len(characters), limit)
  if vocab_size < smallest:
    raise cli.UserError(
        f'--vocab_size={vocab_size} cannot hold the special tokens and the '
        f'{len(characters)} characters of the corpus: ask for at least '
        f'{smallest}.'
    )
  tokens = learner.learn(
      word_counts, vocab_size, list(SPECIAL_TOKENS), **dict(learn_params or {})
  )
  tokens = list(dict.fromkeys(tokens))
  if len(tokens) > vocab_size:
    # The learner keeps every character (and its ## form) of the text,
    # whatever the size asked for.
    raise cli.UserError(
        f'--vocab_size={vocab_size} cannot hold the special tokens and the '
        f'characters of the corpus: the smallest vocabulary of this text has '
        f'{len(tokens)} pieces; ask for at least that many.'
    )
  if output_path:
    write_vocab(tokens, output_path)
  return tokens


def build_sentencepiece_vocab(
    sentences: Iterable[str],
    vocab_size: int,
    output_path: Optional[str],
    lower_case: bool = True,
    learn_params: Optional[Mapping[str, Any]] = None,
) -> Vocabulary:
  """Learns a SentencePiece model as ALBERT's was (`learn_model`).

  `vocab_size` counts the special and ALBERT's 8 user-defined symbols. Returns
  the vocabulary with its model; UserError for a size the text cannot fill.
  """
  sentences = list(sentences)
  if not sentences:
    raise cli.UserError('build_sentencepiece_vocab: no sentences to learn.')
  try:
    model = sentencepiece_tokenization.learn_model(
        sentences, vocab_size, lower_case, **dict(learn_params or {})
    )
  except ValueError as e:
    most = re.search(r'value <= (\d+)', str(e))
    if most:
      raise cli.UserError(
          f'--vocab_size={vocab_size} is more pieces than SentencePiece can '
          f'learn from this text: ask for at most {most.group(1)}.'
      ) from None
    raise cli.UserError(
        f'--vocab_size={vocab_size}: SentencePiece cannot learn it from '
        f'this text ({e}).'
    ) from None
  vocabulary = Vocabulary.from_model(model)
  if output_path:
    vocabulary.write(output_path)
  return vocabulary


def make_tokenizer(tokens: Sequence[str], lower_case: bool) -> tf.Module:
  """The original tokenizer of `tokens`' kind (a `Vocabulary` or WordPiece).

  Its `tokenize` maps `[batch]` strings to `[batch, (ids)]` int32 ids.
  """
  vocabulary = as_vocabulary(tokens)
  if vocabulary.kind == SENTENCEPIECE:
    return sentencepiece_tokenization.AlbertSentencePieceTokenizer(
        vocabulary.sentencepiece_model, lower_case
    )
  return tokenization.BertWordPieceTokenizer(
      tokens, lower_case, unknown_token=UNK_TOKEN
  )


def tokenize_with_vocab(
    sentences: Sequence[str],
    tokens: Sequence[str],
    lower_case: bool,
    batch_size: int = 4096,
    progress_label: str = '',
) -> List[List[int]]:
  """One list of ids per sentence, by a `SentenceTokenizer` used once."""
  return SentenceTokenizer(tokens, lower_case, batch_size)(
      sentences, progress_label
  )


class SentenceTokenizer:
  """Tokenizes lists of sentences with one tokenizer traced once."""

  def __init__(
      self, tokens: Sequence[str], lower_case: bool, batch_size: int = 4096
  ):
    tokenizer = make_tokenizer(tokens, lower_case)
    self._batch_size = batch_size

    def flat_ids_and_lengths(batch):
      ids = tokenizer.tokenize(batch)
      return ids.flat_values, ids.row_lengths()

    self._tokenize = tf.function(
        flat_ids_and_lengths,
        input_signature=[tf.TensorSpec([None], tf.string)],
        autograph=False,
    )

  def __call__(
      self, sentences: Sequence[str], progress_label: str = ''
  ) -> List[List[int]]:
    """One list of ids per sentence (empty for one with no tokens).

    Batches of `batch_size` go through the traced tokenizer in turn (a
    `tf.data` pipeline would cost more to build than a short list takes);
    `progress_label` ('' none) logs progress.
    """
    reporter = progress.Progress(len(sentences), progress_label, 'sentences')
    ids = []
    for begin in range(0, len(sentences), self._batch_size):
      batch = tf.constant(
          list(sentences[begin : begin + self._batch_size]), tf.string
      )
      flat_ids, lengths = (t.numpy() for t in self._tokenize(batch))
      rows = np.split(flat_ids, np.cumsum(lengths)[:-1])
      ids.extend(row.tolist() for row in rows)
      reporter.advance(len(lengths))
    return ids


class FullTokenizer:
  """Model Garden's `FullTokenizer` interface over `make_tokenizer`.

  For the fine-tuning readers. A graph call per text is slow, so readers hand a
  whole split to `prefetched`, tokenized in batches and remembered for the
  `tokenize` calls that follow; other texts are tokenized alone.
  """

  def __init__(
      self, vocab_file: str, do_lower_case: bool = True, batch_size: int = 4096
  ):
    """`vocab_file` for `load_vocab`; `do_lower_case` for an uncased one."""
    self._tokens = load_vocab(vocab_file)
    self.kind = self._tokens.kind
    self.vocab = self._tokens.token_to_id
    self.lower_case = do_lower_case
    self._tokenize_ids = SentenceTokenizer(
        self._tokens, do_lower_case, batch_size
    )
    # The pieces of texts `prefetched` tokenized ahead, by text.
    self.remembered: Dict[str, Tuple[str, ...]] = {}

  def tokenize_many(self, texts: Sequence[str]) -> List[List[str]]:
    """The pieces of each text, tokenized in batches."""
    tokens = self._tokens
    return [[tokens[i] for i in ids] for ids in self._tokenize_ids(texts)]

  def tokenize(self, text: str) -> List[str]:
    """The pieces of `text` (WordPiece or SentencePiece strings)."""
    pieces = self.remembered.get(text)
    if pieces is None:
      return self.tokenize_many([text])[0]
    return list(pieces)

  def convert_tokens_to_ids(self, tokens: Iterable[str]) -> List[int]:
    return [self.vocab[token] for token in tokens]


@contextlib.contextmanager
def prefetched(tokenizer: Any, texts: Iterable[str]) -> Iterator[None]:
  """Tokenizes `texts` in batches for the `tokenizer.tokenize` calls inside.

  Only for a `FullTokenizer` (forgotten on leaving); others go one by one.
  """
  if not isinstance(tokenizer, FullTokenizer):
    yield
    return
  remembered = tokenizer.remembered
  new = [text for text in dict.fromkeys(texts) if text not in remembered]
  remembered.update(zip(new, map(tuple, tokenizer.tokenize_many(new))))
  try:
    yield
  finally:
    remembered.clear()
