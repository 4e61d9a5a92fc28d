"""Texts and models the tokenizer tests share: every rule, real text.

`RULE_TEXT` hits each rule of the original BERT and ALBERT tokenizers;
`corpus_lines` is text that ships with Python (pydoc's help topics), with
marks that text from the web carries; `train_sentencepiece` a model of
them as ALBERT's was trained; `detokenize` maps ids back to words.
"""

import io
import re
from typing import List, Sequence

from pydoc_data import topics
import sentencepiece

from official_repro.data import sentencepiece_tokenization
from official_repro.data import vocab

# Every rule of the original, one line per rule or so. The lines hold
# nothing Hugging Face's BERT tokenizer tokenizes otherwise.
RULE_TEXT = (
    # Accents: stripped when uncased (NFD, then Mn deleted), kept cased.
    'Café crème brûlée, naïve façade; señor Ñandú; Ångström Åsa Øre.',
    'Decomposed: cafe\u0301 n\u0303o A\u030angstro\u0308m.',
    # ß is lower-case already (NFKC case folding makes ss of it).
    'Fußach Straße STRASSE Maß ẞ groß',
    # Ligatures and compatibility forms are kept (NFKC would unfold them).
    'ﬁnal ﬂow ﬀ ﬃ ﬄ ﬅ ﬆ œuvre Æsir Ĳssel',
    'Full width ＡＢＣ１２３ ａｂｃ！？（ｘ） halfwidth ｶﾀｶﾅ',
    'Primes ′ ″ ‴ ⁗ x′ f″(x); x² H₂O ½ ⅓ ™ ℃ № Ⅻ ⓐ µ ſ',
    # Python's str.lower: İ -> i + U+0307, then stripped; title case;
    # the Kelvin sign; Georgian and Cherokee.
    'İstanbul DİYARBAKIR ıi Iİ ǅ ǈ Ǳ K Å Ω ᾼ ჀႠ ᏣᎳᎩ',
    # CJK ideographs are words of their own; kana and Hangul are not.
    '中文字 漢字かな カタカナ 한국어 글자 㐀 𠀀𠀁 丽 豈',
    # Emoji: symbols (So), with a variation selector (Mn), a skin tone, a
    # zero-width joiner (Cf) and flags.
    'emoji 😀👍🏽 👨\u200d👩\u200d👧 ❤\ufe0f 🇫🇷 ★☆ ✓',
    # Control and format characters are deleted, joining their neighbours.
    'a\x00b c\x07d e\x0bf g\x1fh i\x7fj k\u200bl m\u200dn o\ufeffp q\ufffdr',
    's\u00adt u\u2060v w\u202ex y\ue000z \x85nel \x0cff \x1cfs \x01\x02',
    # Whitespace becomes a space.
    'tab\there\nnew\rline\u00a0nbsp\u2003em\u3000ideo\u2028line\u2029para',
    # Words of up to 100 characters are WordPiece'd, longer ones [UNK].
    'a' * 100,
    'a' * 101,
    'ab' * 51,
    'ж' * 60,  # 120 bytes: a byte limit would make it [UNK]
    'é' * 101,
    'e\u0301' * 60,  # cased: 120 characters; uncased: 60
    'x' * 99 + '.' + 'y' * 99,  # two words of 99 around a point
    # Punctuation runs and the ASCII symbols counted as punctuation.
    'Wait...!?!! (a)[b]{c}<d> "q" \'s\' `b` ~t^ $5 #h @a %2 &amp; *s* _u_',
    '+p= |p| \\b/s ¿Qué? ¡Sí! «g» „A“ — – ‐ · • … ‰ § ¶ † ‡ ※ ⁂ 〜 、。',
    # Special tokens typed in the text are text.
    'This is [MASK] and [SEP] or [CLS] [UNK] [PAD] [unused0] ##ing',
    'Привет, МИР! Ελληνικά αλφάβητο עברית العربية हिन्दी ไทย',
    '',
    '   \t\n  ',
    '\x00\u200b',
)

# What text from the web carries and pydoc's does not, put in one line in
# five: a byte order mark at its start, or mid-line a soft hyphen, a
# left-to-right mark or a no-break space (the original deletes the first
# three and makes a space of the last).
_WEB_MARKS = ('\ufeff{}', '{}\u00ad{}', '{}\u200e{}', '{}\u00a0{}')


def corpus_lines():
  """Every third non-empty line of pydoc's help topics (2,900 lines).

  One line in five has one of `_WEB_MARKS` in it.
  """
  text = '\n'.join(topics.topics[key] for key in sorted(topics.topics))
  lines = [line for line in text.split('\n') if line.strip()][::3]
  for index in range(0, len(lines), 5):
    line = lines[index]
    middle = len(line) // 2
    mark = _WEB_MARKS[index // 5 % len(_WEB_MARKS)]
    if mark.count('{}') == 1:
      lines[index] = mark.format(line)
    else:
      lines[index] = mark.format(line[:middle], line[middle:])
  return lines


# ALBERT's user-defined pieces (its README's `spm_train` line).
ALBERT_USER_DEFINED_SYMBOLS = ('(', ')', '"', '-', '.', '–', '£', '€')


def train_sentencepiece(lines, vocab_size, **options):
  """A unigram model trained with ALBERT's special pieces, serialized.

  <pad> 0, <unk> 1, control [CLS] [SEP] [MASK]; `options` are further
  `SentencePieceTrainer` settings (e.g. `user_defined_symbols`).
  """
  model = io.BytesIO()
  sentencepiece.SentencePieceTrainer.train(
      sentence_iterator=iter(lines),
      model_writer=model,
      vocab_size=vocab_size,
      model_type='unigram',
      pad_id=0,
      unk_id=1,
      bos_id=-1,
      eos_id=-1,
      control_symbols=['[CLS]', '[SEP]', '[MASK]'],
      minloglevel=2,
      **options,
  )
  return model.getvalue()


def differences(texts, ours, reference, tokens):
  """The texts whose ids differ, with both tokenizations as pieces."""
  return [
      (text[:60], [tokens[i] for i in a], [tokens[i] for i in b])
      for text, a, b in zip(texts, ours, reference)
      if a != b
  ]


# Bracketed ([CLS]) and SentencePiece's own (<pad>, <unk>, <s>) pieces.
_SPECIAL_PIECE = re.compile(r'^(\[[^\]]*\]|<[^>]*>)$')


def detokenize(ids: Sequence[int], tokens: Sequence[str]) -> List[str]:
  """Maps ids to words, joining continuation pieces onto the word before.

  WordPiece's start with '##'; SentencePiece's lack the '▁' of a word start.
  """
  if vocab.as_vocabulary(tokens).kind == vocab.SENTENCEPIECE:
    return _sentencepiece_words([tokens[i] for i in ids])
  words = []
  for token in (tokens[i] for i in ids):
    if token.startswith('##') and words:
      words[-1] += token[2:]
    else:
      words.append(token)
  return words


def _sentencepiece_words(pieces: Sequence[str]) -> List[str]:
  """Words of SentencePiece pieces; special pieces are words of their own."""
  boundary = sentencepiece_tokenization.WORD_BOUNDARY
  words, joinable = [], False
  for piece in pieces:
    if _SPECIAL_PIECE.match(piece):
      words.append(piece)
      joinable = False
    elif piece.startswith(boundary) or not joinable:
      words.append(piece.removeprefix(boundary))
      joinable = True
    else:
      words[-1] += piece
  return [word for word in words if word]
