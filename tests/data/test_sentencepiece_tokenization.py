r"""The SentencePiece tokenizer against the original ALBERT tokenizer.

References, over models this module trains with ALBERT's options (its
README's `spm_train` line) on pydoc's help topics:
  * google-research/albert's `tokenization.py`, written out below from its
    `preprocess_text` and `encode_pieces` over the `sentencepiece` library
    (the digit-comma rule with str pieces, as it runs on Python 2);
  * Hugging Face's `AlbertTokenizer` (its port of them), but where it first
    makes `"` of `` and '' (`_QUOTES`);
  * Hugging Face's `AlbertTokenizerFast`, where it agrees with them: it
    departs on the texts of `_WHERE_FAST_DEPARTS`, which a test keeps true.
SentencePiece never matches control symbols in raw text (`[MASK]` typed in
the text is text), and the original neither; Hugging Face's tokenizers do
even with `split_special_tokens=True`, so texts with them are compared
with the original only.
"""

import re
import unicodedata

import pytest
import sentencepiece
import tensorflow as tf

from official_repro.data import sentencepiece_tokenization
from official_repro.data import vocab
from tests.data.tokenizer_texts import corpus_lines
from tests.data.tokenizer_texts import detokenize
from tests.data.tokenizer_texts import differences
from tests.data.tokenizer_texts import ALBERT_USER_DEFINED_SYMBOLS
from tests.data.tokenizer_texts import RULE_TEXT
from tests.data.tokenizer_texts import train_sentencepiece

transformers = pytest.importorskip('transformers')

# What only the SentencePiece path has rules for: whitespace runs, `` and
# '', the digit-comma rule, NUL, combining marks outside Mn, and Python's
# lower-casing (final sigma).
_SENTENCEPIECE_RULE_TEXT = (
    'a  b\t\tc \u3000 d\u2028e\x1cf\x85g  ',
    'In 1990, 2,000 people; x1, y22, z3,4 ,5 a,1 ٣, ３, ²,',
    'a\x00b \x00 \x00\x00 c\x00',
    'cafe\u0301 \u0915\u093c \u0e48 \u302a \u0f71\u0f72 a\u0345',
    "ΟΔΟΣ ΣΑΣ ΑΣ. ΑΣ'Α İstanbul",
    # A letter of Unicode 14 that TF's ICU does not lower-case.
    'a\u2c2fb \u2c2f',
    # A nonspacing mark of combining class 0 (kept), a spacing one of 230
    # (deleted).
    'a\u0915\u0901b c\u302ed',
)

# Hugging Face's tokenizers make `"` of `` and '' (XLNet's preprocessing);
# the original keeps them.
_QUOTES = "``quoted'' and `single' and ''' ``"

# Where `AlbertTokenizerFast` departs from the original: name -> texts, on
# one of which at least it departs.
_WHERE_FAST_DEPARTS = {
    'quotes': (_QUOTES,),
    # A user-defined symbol is split off first, and the text after it gets
    # a word-boundary mark of its own.
    'user-defined symbol': ('say "assert" (x)',),
    # Not the rule: '▁3,' stays one piece (the original's '▁', '3', ',').
    'digit-comma rule': ('[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]',),
    # Only whitespace, or a control character at the end: a lone mark.
    'whitespace only': ('   \t\n  ',),
    'control character at the end': ('ab \x01\x02',),
    # Python's `str.split` splits at these; the fast tokenizer does not.
    'other whitespace': ('e\x0bf g\x1fh i\x1cj k\x85l',),
    # Equal-score segmentations of a run of one character.
    'tie in a run': ('*' * 28, '=' * 20, '-' * 15, '111', '7   111', '1111'),
}
_RUN_OF_ONE_CHARACTER = re.compile(r'(\S)\1\1')
_OTHER_WHITESPACE = re.compile('[\x0b\x0c\x1c-\x1f\x85]')
_CONTROL_SYMBOLS = ('[CLS]', '[SEP]', '[MASK]')

_SPIECE_UNDERLINE = '\u2581'
# ALBERT's, and characters that rules of `_SENTENCEPIECE_RULE_TEXT` keep or
# change, so that a wrong rule gives another piece.
_USER_DEFINED_SYMBOLS = list(ALBERT_USER_DEFINED_SYMBOLS) + [
    '\u2c2f',
    '\u2c5f',
    '\u0901',
    '\u302e',
]


def _train(lines, lower_case):
  """A model trained as ALBERT's README says (its options, a small size)."""
  if lower_case:
    lines = [_preprocess_text(line, lower=True) for line in lines]
  return train_sentencepiece(
      lines,
      2000,
      user_defined_symbols=_USER_DEFINED_SYMBOLS,
      character_coverage=0.99995,
  )


def _preprocess_text(inputs, lower=False):
  """google-research/albert's `preprocess_text` (remove_space=True)."""
  outputs = ' '.join(inputs.strip().split())
  outputs = unicodedata.normalize('NFKD', outputs)
  outputs = ''.join([c for c in outputs if not unicodedata.combining(c)])
  if lower:
    outputs = outputs.lower()
  return outputs


def _encode_pieces(sp_model, text):
  """google-research/albert's `encode_pieces` (no sampling)."""
  pieces = sp_model.EncodeAsPieces(text)
  new_pieces = []
  for piece in pieces:
    if len(piece) > 1 and piece[-1] == ',' and piece[-2].isdigit():
      cur_pieces = sp_model.EncodeAsPieces(
          piece[:-1].replace(_SPIECE_UNDERLINE, '')
      )
      if (
          piece[0] != _SPIECE_UNDERLINE
          and cur_pieces[0][0] == _SPIECE_UNDERLINE
      ):
        if len(cur_pieces[0]) == 1:
          cur_pieces = cur_pieces[1:]
        else:
          cur_pieces[0] = cur_pieces[0][1:]
      cur_pieces.append(piece[-1])
      new_pieces.extend(cur_pieces)
    else:
      new_pieces.append(piece)
  return new_pieces


def _original(model, lower_case):
  """google-research/albert's `FullTokenizer(spm_model_file)`, as ids."""
  sp_model = sentencepiece.SentencePieceProcessor()
  sp_model.LoadFromSerializedProto(model)
  return lambda texts: [
      [
          sp_model.PieceToId(piece)
          for piece in _encode_pieces(
              sp_model, _preprocess_text(text, lower=lower_case)
          )
      ]
      for text in texts
  ]


def _hugging_face(tokenizer_class, model_file, lower_case):
  tokenizer = tokenizer_class(
      vocab_file=model_file,
      do_lower_case=lower_case,
      keep_accents=False,
      model_max_length=10**9,
  )
  return lambda texts: tokenizer(
      list(texts), add_special_tokens=False, split_special_tokens=True
  )['input_ids']


@pytest.fixture(scope='module')
def corpus():
  return corpus_lines()


# ALBERT's releases are uncased; the cased model runs in the slow tier.
@pytest.fixture(
    scope='module',
    params=[True, pytest.param(False, marks=pytest.mark.slow)],
    ids=['uncased', 'cased'],
)
def setup(request, corpus, tmp_path_factory):
  """(lower_case, vocabulary, ours, original, slow, fast) for one casing."""
  lower_case = request.param
  path = tmp_path_factory.mktemp('spiece') / 'spiece.model'
  path.write_bytes(_train(corpus, lower_case))
  vocabulary = vocab.load_vocab(str(path))
  model = path.read_bytes()
  return (
      lower_case,
      vocabulary,
      lambda texts: vocab.tokenize_with_vocab(
          list(texts), vocabulary, lower_case
      ),
      _original(model, lower_case),
      _hugging_face(transformers.AlbertTokenizer, str(path), lower_case),
      _hugging_face(transformers.AlbertTokenizerFast, str(path), lower_case),
  )


def _without_control_symbols(texts):
  return [t for t in texts if not any(s in t for s in _CONTROL_SYMBOLS)]


_ALL_RULE_TEXT = RULE_TEXT + _SENTENCEPIECE_RULE_TEXT


def test_hugging_face_makes_double_quotes_of_pairs_of_quotes(setup):
  _, _, ours, original, slow, _ = setup
  assert ours([_QUOTES]) == original([_QUOTES])
  # If this fails, Hugging Face now agrees: drop `_without_quotes`.
  assert slow([_QUOTES]) != original([_QUOTES])


def _without_quotes(texts):
  return [text for text in texts if '``' not in text and "''" not in text]


def test_rule_text_is_tokenized_as_the_original(setup):
  _, tokens, ours, original, slow, _ = setup
  ids = ours(_ALL_RULE_TEXT)
  assert (
      differences(_ALL_RULE_TEXT, ids, original(_ALL_RULE_TEXT), tokens) == []
  )
  texts = _without_quotes(_without_control_symbols(_ALL_RULE_TEXT))
  assert differences(texts, ours(texts), slow(texts), tokens) == []
  assert sum(len(line) for line in ids) > 1000


def test_real_text_is_tokenized_as_the_original(setup, corpus):
  _, tokens, ours, original, slow, _ = setup
  ids = ours(corpus)
  assert len(corpus) > 2500
  assert differences(corpus, ids, original(corpus), tokens) == []
  texts = _without_quotes(_without_control_symbols(corpus))
  assert differences(texts, ours(texts), slow(texts), tokens) == []
  # The digit-comma rule applied to real text.
  comma = tokens.token_to_id[',']
  assert sum(line.count(comma) for line in ids) > 500


def test_fast_tokenizer_agrees_but_where_it_departs(setup, corpus):
  _, tokens, ours, original, _, fast = setup
  texts = [
      text
      for text in _without_control_symbols(_ALL_RULE_TEXT + tuple(corpus))
      if not _fast_may_depart(text)
  ]
  assert len(texts) > 700
  assert differences(texts, ours(texts), fast(texts), tokens) == []
  for name, texts in _WHERE_FAST_DEPARTS.items():
    assert ours(texts) == original(texts), name
    # If this fails, Hugging Face now agrees: drop the line.
    assert fast(texts) != original(texts), name


def _fast_may_depart(text):
  """Whether `text` has what a line of `_WHERE_FAST_DEPARTS` shows."""
  stripped = text.rstrip()
  return (
      not stripped
      or not _without_quotes([text])
      or any(symbol in text for symbol in _USER_DEFINED_SYMBOLS)
      or bool(_RUN_OF_ONE_CHARACTER.search(text))
      or bool(_OTHER_WHITESPACE.search(text))
      or bool(re.search(r'\d,', text))
      or unicodedata.category(stripped[-1]).startswith('C')
  )


def test_every_caller_gets_the_original_ids(setup, tmp_path):
  lower_case, tokens, ours, original, _, _ = setup
  path = tmp_path / 'spiece.model'
  path.write_bytes(tokens.sentencepiece_model)
  expected = original(_ALL_RULE_TEXT)
  assert (
      vocab.SentenceTokenizer(tokens, lower_case, batch_size=7)(_ALL_RULE_TEXT)
      == expected
  )
  full = vocab.FullTokenizer(str(path), do_lower_case=lower_case)
  assert [
      full.convert_tokens_to_ids(full.tokenize(text)) for text in _ALL_RULE_TEXT
  ] == expected
  traced = tf.function(vocab.make_tokenizer(tokens, lower_case).tokenize)
  assert traced(tf.constant(_ALL_RULE_TEXT)).to_list() == expected


def test_a_model_is_a_vocabulary_with_bert_names_for_its_special_pieces(
    setup,
):
  _, tokens, *_ = setup
  assert tokens.kind == vocab.SENTENCEPIECE
  assert tokens.filename == 'spiece.model'
  assert tokens[:5] == ('<pad>', '<unk>', '[CLS]', '[SEP]', '[MASK]')
  assert vocab.SpecialTokenIds.from_vocab(tokens).all_ids() == (0, 1, 2, 3, 4)
  ids = vocab.tokenize_with_vocab(['The river, in 1990, ran.'], tokens, True)
  assert detokenize([2] + ids[0] + [3], tokens) == [
      '[CLS]',
      'the',
      'river,',
      'in',
      '1990,',
      'ran.',
      '[SEP]',
  ]


def test_learned_model_tokenizes_as_the_original(corpus, tmp_path):
  model = sentencepiece_tokenization.learn_model(corpus, 1500, lower_case=True)
  path = tmp_path / 'spiece.model'
  path.write_bytes(model)
  tokens = vocab.load_vocab(str(path))
  assert len(tokens) == 1500
  assert tokens[:5] == ('<pad>', '<unk>', '[CLS]', '[SEP]', '[MASK]')
  # Learned from lower-cased text: no piece has a capital.
  assert not any(piece != piece.lower() for piece in tokens[5:])
  texts = corpus[:500]
  assert vocab.tokenize_with_vocab(texts, tokens, True) == _original(
      model, True
  )(texts)


def test_a_file_that_is_not_a_model_is_named(tmp_path):
  path = tmp_path / 'broken.model'
  path.write_bytes(b'not a model')
  with pytest.raises(ValueError, match='broken.model: not a SentencePiece'):
    vocab.load_vocab(str(path))
