r"""Text to SentencePiece ids exactly as google-research/albert's tokenizer.

ALBERT's releases were pretrained on the ids of albert's `FullTokenizer`;
`AlbertSentencePieceTokenizer` makes them in graph: (1) whitespace
collapsed, (2) accents stripped (NFKD), (3) `str.lower`, (4) TF Text's
`SentencepieceTokenizer`, (5) the digit-comma rule as it runs on Python 2
(the comma its own piece). TF Text's op stops at a
NUL, so NUL becomes U+10FFFF (`_NUL_STAND_IN`). Not reused: Hugging Face's
`AlbertTokenizer` rewrites `` and '' (XLNet's rule) and `AlbertTokenizerFast`
splits user-defined symbols and approximates the digit-comma rule
(`tests/data/test_sentencepiece_tokenization.py` lists each case).
"""

import base64
import functools
import io
import unicodedata
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Tuple

import sentencepiece
from sentencepiece import sentencepiece_model_pb2
import tensorflow as tf
import tensorflow_text as tf_text

from official_repro.data import tokenization

# The name `metadata.json` gives this tokenizer (records.py).
TOKENIZER_NAME = 'sentencepiece-albert'
WORD_BOUNDARY = '\u2581'
_NUL_STAND_IN = '\U0010ffff'
_SPACE, _COMBINING, _DIGIT = range(1, 4)


class _CharacterTables(NamedTuple):
  """RE2 classes of the Python predicates the original applies."""

  space: str  # str.isspace
  combining: str  # unicodedata.combining(c) != 0
  digit: str  # str.isdigit


@functools.lru_cache(maxsize=None)
def _character_tables() -> _CharacterTables:
  """Reads the classes off this Python's `unicodedata` (once per process)."""
  kinds = bytearray(0x110000)
  for code_point in range(0x110000):
    if 0xD800 <= code_point <= 0xDFFF:  # surrogates: never in UTF-8
      continue
    char = chr(code_point)
    if char.isspace():
      kinds[code_point] = _SPACE
    elif unicodedata.combining(char):
      kinds[code_point] = _COMBINING
    elif char.isdigit():
      kinds[code_point] = _DIGIT
  kinds = bytes(kinds)
  return _CharacterTables(
      *(
          f'[{tokenization.regex_ranges(kinds, kind)}]'
          for kind in (_SPACE, _COMBINING, _DIGIT)
      )
  )


class AlbertSentencePieceTokenizer(tf.Module):
  """The original ALBERT `FullTokenizer`: strings -> ids, in graph."""

  def __init__(
      self,
      model: bytes,
      lower_case: bool,
      strip_accents: bool = True,
      name: str = 'albert_sentencepiece_tokenizer',
  ):
    """Loads `model`, a serialized `ModelProto` (`spiece.model`).

    `strip_accents`: NFKD and combining marks deleted (the original's only way).
    """
    super().__init__(name=name)
    self.lower_case = lower_case
    self.strip_accents = strip_accents
    self._tables = _character_tables()
    self.normalize = self.preprocessor(lower_case, strip_accents)
    self._model = tf_text.SentencepieceTokenizer(model, out_type=tf.string)
    self.vocab_size = int(self._model.vocab_size())

  @staticmethod
  def preprocessor(lower_case: bool, strip_accents: bool = True):
    """Steps 1-3 as a function of `[batch]` strings (`preprocess_text`)."""
    tables = _character_tables()
    if lower_case:
      tokenization.lower_as_python(tf.constant(['']))  # caches its tables

    def preprocess(text: tf.Tensor) -> tf.Tensor:
      text = tf.reshape(tf.convert_to_tensor(text), [-1])
      text = tf.strings.regex_replace(
          text, tokenization.regex_code(0), _NUL_STAND_IN
      )
      text = tf.strings.regex_replace(text, f'{tables.space}+', ' ')
      text = tf.strings.strip(text)
      if strip_accents:
        text = tf_text.normalize_utf8(text, 'NFKD')
        text = tf.strings.regex_replace(text, tables.combining, '')
      if lower_case:
        text = tokenization.lower_as_python(text)
      return text

    return preprocess

  def tokenize_to_pieces(self, text: tf.Tensor) -> tf.RaggedTensor:
    """`[batch]` strings -> `[batch, (pieces)]` piece strings."""
    pieces = self._model.tokenize(self.normalize(text))
    flat = pieces.flat_values
    split = tf.strings.regex_full_match(flat, f'(?s).*{self._tables.digit},')
    return pieces.with_flat_values(
        self._digit_comma_rule(flat, split)
    ).merge_dims(1, 2)

  def _digit_comma_rule(
      self, flat: tf.Tensor, split: tf.Tensor
  ) -> tf.RaggedTensor:
    """Step 5: `[n]` pieces -> `[n, (pieces)]`, the `split` ones redone."""
    chosen = tf.boolean_mask(flat, split)
    text = tf.strings.regex_replace(
        tf.strings.regex_replace(chosen, ',$', ''), WORD_BOUNDARY, ''
    )
    again = self._model.tokenize(text)
    # The piece had no boundary mark: drop the one SentencePiece gives the
    # first piece of its re-encoding (the whole piece if only the mark).
    had_mark = tf.strings.substr(chosen, 0, 3) == WORD_BOUNDARY
    first = again[:, :1].flat_values
    unmarked = tf.strings.regex_replace(first, f'^{WORD_BOUNDARY}', '')
    first = tf.where(had_mark, first, unmarked)
    first = tf.RaggedTensor.from_tensor(
        first[:, None], lengths=tf.cast(tf.strings.length(first) > 0, tf.int64)
    )
    comma = tf.fill(tf.shape(chosen)[:1], ',')[:, None]
    again = tf.concat([first, again[:, 1:], comma], axis=1)
    single = tf.RaggedTensor.from_tensor(flat[:, None])
    rows = tf.concat([single, again], axis=0)
    index = tf.where(
        split,
        tf.shape(flat, out_type=tf.int64)[0]
        + tf.cumsum(tf.cast(split, tf.int64))
        - 1,
        tf.range(tf.shape(flat, out_type=tf.int64)[0]),
    )
    return tf.gather(rows, index)

  def tokenize(self, text: tf.Tensor) -> tf.RaggedTensor:
    """`[batch]` strings -> `[batch, (ids)]` int32 SentencePiece ids."""
    pieces = self.tokenize_to_pieces(text)
    return pieces.with_flat_values(self._model.string_to_id(pieces.flat_values))


def read_model(model: bytes) -> Tuple[List[str], Dict[str, str]]:
  """(pieces, {'[PAD]': pad piece, '[UNK]': unknown piece} of those it has).

  Raises ValueError when `model` is not a serialized SentencePiece model.
  """
  processor = sentencepiece.SentencePieceProcessor()
  try:
    processor.LoadFromSerializedProto(model)
  except RuntimeError:
    raise ValueError(
        'not a SentencePiece model (its ModelProto does not parse)'
    ) from None
  pieces = [processor.IdToPiece(i) for i in range(processor.GetPieceSize())]
  special = (('[PAD]', processor.pad_id()), ('[UNK]', processor.unk_id()))
  aliases = {name: pieces[i] for name, i in special if i >= 0}
  return pieces, aliases


# google-research/albert's README: how its `spiece.model` was trained.
_ALBERT_TRAINER_OPTIONS = dict(
    model_type='unigram',
    pad_id=0,
    unk_id=1,
    bos_id=-1,
    eos_id=-1,
    pad_piece='<pad>',
    unk_piece='<unk>',
    control_symbols=['[CLS]', '[SEP]', '[MASK]'],
    user_defined_symbols=['(', ')', '"', '-', '.', '–', '£', '€'],
    shuffle_input_sentence=True,
    character_coverage=0.99995,
)


def learn_model(
    sentences: Iterable[str],
    vocab_size: int,
    lower_case: bool,
    seed_sentences: int = 10_000_000,
) -> bytes:
  """The serialized model learned as ALBERT's was, from preprocessed text.

  `vocab_size` counts the special pieces; at most `seed_sentences` are
  sampled. ValueError carries the trainer's own message.
  """
  preprocess = tf.function(
      AlbertSentencePieceTokenizer.preprocessor(lower_case),
      input_signature=[tf.TensorSpec([None], tf.string)],
  )
  dataset = (
      tf.data.Dataset.from_generator(
          lambda: iter(sentences), output_signature=tf.TensorSpec([], tf.string)
      )
      .batch(4096)
      .map(preprocess)
      .unbatch()
  )
  model = io.BytesIO()
  try:
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=(
            text.decode('utf-8') for text in dataset.as_numpy_iterator()
        ),
        model_writer=model,
        vocab_size=vocab_size,
        input_sentence_size=seed_sentences,
        minloglevel=2,
        **_ALBERT_TRAINER_OPTIONS,
    )
  except RuntimeError as e:
    raise ValueError(str(e).strip().splitlines()[-1]) from None
  return model.getvalue()


def model_from_tokenizer_json(tokenizer: Dict[str, Any]) -> bytes:
  """The SentencePiece model a `tokenizers` Unigram file was converted from.

  Pieces, scores (the digit-comma ones raised back), special, user-defined
  and unknown pieces and the `Precompiled` character map go back into a
  `ModelProto` with SentencePiece's defaults. ValueError names what is missing.
  """
  model = tokenizer.get('model') or {}
  if model.get('type') != 'Unigram' or not model.get('vocab'):
    raise ValueError(f'model.type={model.get("type")!r}, not a Unigram model')
  if not isinstance(model.get('unk_id'), int):
    raise ValueError(
        f'model.unk_id={model.get("unk_id")!r}: a SentencePiece model needs '
        'its unknown piece'
    )
  charsmap = [
      step['precompiled_charsmap']
      for step in normalizer_steps(tokenizer.get('normalizer'))
      if step.get('type') == 'Precompiled'
  ]
  if not charsmap:
    raise ValueError(
        'no Precompiled normalizer (the SentencePiece character map)'
    )
  proto = sentencepiece_model_pb2.ModelProto()
  special = {
      token['id']
      for token in tokenizer.get('added_tokens', [])
      if token.get('special')
  }
  # The Unigram model's pieces and scores, typed.
  piece_type = sentencepiece_model_pb2.ModelProto.SentencePiece
  for index, (piece, score) in enumerate(model['vocab']):
    ends_in_digit_comma = piece[-2:-1].isdigit() and piece.endswith(',')
    if score <= _DIGIT_COMMA_PENALTY and ends_in_digit_comma:
      score -= _DIGIT_COMMA_PENALTY  # Hugging Face's AlbertConverter's
    entry = proto.pieces.add(piece=piece, score=score)
    if index == model['unk_id']:
      entry.type = piece_type.UNKNOWN
    elif index in special:
      entry.type = piece_type.CONTROL
    elif score == 0.0:
      # The trainer scores user-defined pieces 0, learned ones below.
      entry.type = piece_type.USER_DEFINED
  # Model type, size and special piece ids, for the Unigram model.
  proto.trainer_spec.model_type = sentencepiece_model_pb2.TrainerSpec.UNIGRAM
  proto.trainer_spec.vocab_size = len(model['vocab'])
  proto.trainer_spec.unk_id = model['unk_id']
  pieces = [piece for piece, _ in model['vocab']]
  for name, piece in (
      ('pad_id', '<pad>'),
      ('bos_id', '<s>'),
      ('eos_id', '</s>'),
  ):
    setattr(
        proto.trainer_spec, name, pieces.index(piece) if piece in pieces else -1
    )
  proto.normalizer_spec.precompiled_charsmap = base64.b64decode(charsmap[0])
  return proto.SerializeToString()


# Hugging Face's `AlbertConverter` (and `XLNetConverter`) lower the score of
# every piece ending in a digit and a comma by 100, so that its Unigram model
# avoids what the original's digit-comma rule splits.
_DIGIT_COMMA_PENALTY = -100.0


def normalizer_steps(normalizer: Optional[Dict[str, Any]]):
  """The steps of a `tokenizers` normaliser (a `Sequence` flattened)."""
  if not normalizer:
    return []
  if normalizer.get('type') == 'Sequence':
    return [
        step
        for inner in normalizer.get('normalizers', [])
        for step in normalizer_steps(inner)
    ]
  return [normalizer]


def canonical_model(model: bytes) -> bytes:
  """What of a serialized model decides its ids, serialized again.

  Trainer settings encoding does not read are dropped, so a model rebuilt or
  saved by another tool compares equal to the one it came from.
  """
  proto = sentencepiece_model_pb2.ModelProto()
  proto.ParseFromString(model)
  kept = sentencepiece_model_pb2.ModelProto()
  kept.pieces.extend(proto.pieces)
  kept.normalizer_spec.CopyFrom(proto.normalizer_spec)
  if proto.HasField('denormalizer_spec'):
    kept.denormalizer_spec.CopyFrom(proto.denormalizer_spec)
  for name in _ENCODING_TRAINER_FIELDS:
    setattr(kept.trainer_spec, name, getattr(proto.trainer_spec, name))
  kept.normalizer_spec.ClearField('name')
  return kept.SerializeToString(deterministic=True)


# The `TrainerSpec` fields SentencePiece reads when it encodes.
_ENCODING_TRAINER_FIELDS = (
    'model_type',
    'treat_whitespace_as_suffix',
    'byte_fallback',
    'unk_surface',
)
