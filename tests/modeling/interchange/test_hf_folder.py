"""Hugging Face folders' tokenizer files: refused unless BERT's or ALBERT's."""

import json
import shutil

import numpy as np
import pytest
import safetensors.numpy

import transformers
from official_repro.common import cli
from official_repro.data import vocab
from official_repro.modeling.interchange import hf_folder
from official_repro.modeling.interchange import hf_models
from tests.data.tokenizer_texts import ALBERT_USER_DEFINED_SYMBOLS
from tests.data.tokenizer_texts import corpus_lines
from tests.data.tokenizer_texts import RULE_TEXT
from tests.data.tokenizer_texts import train_sentencepiece
from tests.modeling.interchange import hf_reference


def _save_tokenizer(path, lower_case):
  """`BertTokenizerFast.save_pretrained`: vocab.txt, tokenizer(_config).json."""
  path.mkdir(parents=True, exist_ok=True)
  (path / 'vocab.txt').write_text('\n'.join(hf_reference.VOCAB) + '\n')
  transformers.BertTokenizerFast(
      str(path / 'vocab.txt'), do_lower_case=lower_case
  ).save_pretrained(str(path))


def _tokenizer_folder(path, lower_case=True):
  """A standard tokenizer beside a stand-in config and weights."""
  _save_tokenizer(path, lower_case)
  (path / 'config.json').write_text('{"model_type": "bert"}')
  safetensors.numpy.save_file(
      {'x': np.zeros(1, np.float32)}, str(path / 'model.safetensors')
  )
  return path


def _edit(path, **settings):
  """Sets `settings` (dotted keys: `normalizer.lowercase`) in a JSON file."""
  data = json.loads(path.read_text())
  for key, value in settings.items():
    *parents, last = key.split('.')
    target = data
    for parent in parents:
      target = target[parent]
    target[last] = value
  path.write_text(json.dumps(data))


_SEQUENCE = dict(
    type='Sequence',
    normalizers=[
        dict(
            type='BertNormalizer',
            clean_text=True,
            handle_chinese_chars=True,
            strip_accents=None,
            lowercase=True,
        )
    ],
)

# (file, casing of the folder, settings set, the setting the message names).
_REFUSED = [
    (
        'tokenizer.json',
        True,
        {'normalizer': _SEQUENCE},
        'normalizer.type="Sequence"',
    ),
    ('tokenizer.json', True, {'normalizer': None}, 'normalizer.type=null'),
    (
        'tokenizer.json',
        True,
        {'normalizer.type': 'Lowercase'},
        'normalizer.type="Lowercase"',
    ),
    (
        'tokenizer.json',
        True,
        {'normalizer.strip_accents': False},
        'normalizer.strip_accents=false (with lowercase=true',
    ),
    (
        'tokenizer.json',
        False,
        {'normalizer.strip_accents': True},
        'normalizer.strip_accents=true (with lowercase=false',
    ),
    (
        'tokenizer.json',
        True,
        {'normalizer.clean_text': False},
        'normalizer.clean_text=false',
    ),
    (
        'tokenizer.json',
        True,
        {'normalizer.handle_chinese_chars': False},
        'normalizer.handle_chinese_chars=false',
    ),
    (
        'tokenizer.json',
        True,
        {'pre_tokenizer': {'type': 'Whitespace'}},
        'pre_tokenizer.type="Whitespace"',
    ),
    (
        'tokenizer.json',
        True,
        {
            'pre_tokenizer': {
                'type': 'Sequence',
                'pretokenizers': [{'type': 'BertPreTokenizer'}],
            }
        },
        'pre_tokenizer.type="Sequence"',
    ),
    (
        'tokenizer.json',
        True,
        {'model.type': 'WordLevel'},
        'model.type="WordLevel"',
    ),
    (
        'tokenizer.json',
        True,
        {'model.max_input_chars_per_word': 200},
        'model.max_input_chars_per_word=200 (ours: 100)',
    ),
    (
        'tokenizer.json',
        True,
        {'model.unk_token': '<unk>'},
        'model.unk_token="<unk>" (ours: "[UNK]")',
    ),
    (
        'tokenizer.json',
        True,
        {'model.continuing_subword_prefix': '@@'},
        'model.continuing_subword_prefix="@@" (ours: "##")',
    ),
    (
        'tokenizer_config.json',
        True,
        {'do_basic_tokenize': False},
        'do_basic_tokenize=false',
    ),
    (
        'tokenizer_config.json',
        True,
        {'strip_accents': False},
        'strip_accents=false (with do_lower_case=true',
    ),
    (
        'tokenizer_config.json',
        False,
        {'strip_accents': True},
        'strip_accents=true (with do_lower_case=false',
    ),
    (
        'tokenizer_config.json',
        True,
        {'tokenize_chinese_chars': False},
        'tokenize_chinese_chars=false',
    ),
]


@pytest.mark.parametrize(
    'filename, lower_case, settings, named',
    _REFUSED,
    ids=[f'{case[0]}:{case[3].split("=")[0]}' for case in _REFUSED],
)
def test_a_tokenizer_other_than_bert_s_original_is_refused(
    tmp_path, filename, lower_case, settings, named
):
  folder = _tokenizer_folder(tmp_path / 'folder', lower_case)
  _edit(folder / filename, **settings)
  with pytest.raises(cli.UserError) as error:
    hf_folder.read_folder(str(folder))
  message = str(error.value)
  assert '\n' not in message
  assert message.startswith(f'{folder / filename}: {named}'), message
  assert message.endswith(
      "this repository's tokenizers are the original BERT and ALBERT ones, "
      'so the folder cannot be used as is.'
  ), message


def test_the_refusal_holds_without_a_vocab_txt(tmp_path):
  """The vocabulary then comes from tokenizer.json: its model is checked."""
  folder = _tokenizer_folder(tmp_path / 'folder')
  (folder / 'vocab.txt').unlink()
  _edit(folder / 'tokenizer.json', **{'model.type': 'WordLevel'})
  with pytest.raises(cli.UserError, match=r'tokenizer\.json: model\.type='):
    hf_folder.read_folder(str(folder))


def test_a_bpe_tokenizer_json_alone_names_its_model_file(tmp_path):
  folder = _tokenizer_folder(tmp_path / 'folder')
  (folder / 'vocab.txt').unlink()
  _edit(folder / 'tokenizer.json', **{'model.type': 'BPE'})
  with pytest.raises(cli.UserError) as error:
    hf_folder.read_folder(str(folder))
  assert str(error.value) == (
      f'{folder / "tokenizer.json"}: a BPE model without the spiece.model '
      'it was converted from: BPE merges do not give back a SentencePiece '
      'model, and byte-level BPE (GPT-2, RoBERTa) is neither tokenizer of '
      'ours.'
  )


def test_a_wordpiece_model_of_older_tokenizers_without_type_is_read(tmp_path):
  folder = _tokenizer_folder(tmp_path / 'folder')
  (folder / 'vocab.txt').unlink()
  tokenizer = json.loads((folder / 'tokenizer.json').read_text())
  del tokenizer['model']['type']
  (folder / 'tokenizer.json').write_text(json.dumps(tokenizer))
  assert hf_folder.read_folder(str(folder)).vocab_tokens == hf_reference.VOCAB


def test_the_export_layout_s_tokenizer_json_is_not_checked(tmp_path):
  """An encoder-only export's `{vocab_file, lower_case}` (`--from=teams`)."""
  (tmp_path / 'vocab.txt').write_text('\n'.join(hf_reference.VOCAB) + '\n')
  (tmp_path / 'tokenizer.json').write_text(
      json.dumps(dict(vocab_file='vocab.txt', lower_case=True))
  )
  tokens, lower_case = hf_folder.read_tokenizer(str(tmp_path))
  assert tokens == hf_reference.VOCAB and lower_case is None


@pytest.fixture(scope='module', name='bert')
def _bert():
  return hf_reference.build('bert')


@pytest.mark.parametrize('lower_case', [True, False], ids=['uncased', 'cased'])
@pytest.mark.parametrize(
    'vocab_txt', [True, False], ids=['vocab.txt', 'tokenizer.json only']
)
def test_a_standard_bert_tokenizer_fast_folder_imports(
    tmp_path, bert, lower_case, vocab_txt
):
  model, state = bert
  folder = tmp_path / 'bert'
  hf_reference.write_folder(str(folder), model.config, state)
  _save_tokenizer(folder, lower_case)
  if not vocab_txt:
    (folder / 'vocab.txt').unlink()
  imported = hf_models.read(str(folder))
  assert imported.lower_case is lower_case
  assert imported.vocab_tokens == hf_reference.VOCAB
  # Casing from tokenizer.json's normalizer when tokenizer_config.json is
  # gone.
  (folder / 'tokenizer_config.json').unlink()
  assert hf_models.read(str(folder)).lower_case is lower_case


@pytest.fixture(scope='module')
def corpus_model(tmp_path_factory):
  """(spiece.model of 2,000 pieces trained as ALBERT's, on real text; text)."""
  texts = corpus_lines()
  model = train_sentencepiece(
      texts, 2000, user_defined_symbols=ALBERT_USER_DEFINED_SYMBOLS
  )
  path = tmp_path_factory.mktemp('corpus_model') / 'spiece.model'
  path.write_bytes(model)
  return path, texts + list(RULE_TEXT)


@pytest.fixture(scope='module')
def albert_folder(tmp_path_factory):
  """An ALBERT release's tokenizer (`spiece.model`, saved by Hugging Face)."""
  path = tmp_path_factory.mktemp('albert')
  model, state = hf_reference.build('albert', 'mlm', vocab_size=60)
  hf_reference.write_sentencepiece_folder(
      str(path), model.config, state, hf_reference.sentencepiece_model()
  )
  return path


def test_an_albert_folder_reads_its_sentencepiece_model(albert_folder):
  folder = hf_folder.read_folder(str(albert_folder))
  tokens = folder.vocab_tokens
  assert tokens.kind == vocab.SENTENCEPIECE
  assert (
      tokens.sentencepiece_model
      == (albert_folder / 'spiece.model').read_bytes()
  )
  assert folder.lower_case is True
  hugging_face = transformers.AlbertTokenizerFast.from_pretrained(
      str(albert_folder)
  )
  texts = ['The quick brown fox jumps.', 'birds sing in old trees']
  assert (
      vocab.tokenize_with_vocab(texts, tokens, True)
      == hugging_face(texts, add_special_tokens=False)['input_ids']
  )


def test_an_exported_sentencepiece_folder_loads_in_transformers(
    albert_folder, tmp_path
):
  tokens = hf_folder.read_folder(str(albert_folder)).vocab_tokens
  config = json.loads((albert_folder / 'config.json').read_text())
  hf_folder.write_folder(str(tmp_path / 'out'), config, {}, tokens, True)
  loaded = transformers.AutoTokenizer.from_pretrained(str(tmp_path / 'out'))
  assert type(loaded).__name__ == 'AlbertTokenizerFast'
  texts = ['the lazy dog, in summer, ran.', 'Children play games']
  assert (
      vocab.tokenize_with_vocab(texts, tokens, True)
      == loaded(texts, add_special_tokens=False)['input_ids']
  )
  assert loaded.pad_token_id == 0 and loaded.mask_token == '[MASK]'
  again = hf_folder.read_folder(str(tmp_path / 'out'))
  assert again.vocab_tokens == tokens and again.lower_case is True


@pytest.mark.parametrize(
    'filename, settings, named',
    [
        ('tokenizer_config.json', {'keep_accents': True}, 'keep_accents=true'),
        (
            'tokenizer_config.json',
            {'remove_space': False},
            'remove_space=false',
        ),
        (
            'tokenizer_config.json',
            {'tokenizer_class': 'T5Tokenizer'},
            'tokenizer_class="T5Tokenizer"',
        ),
    ],
)
def test_a_sentencepiece_setting_albert_lacks_is_refused(
    albert_folder, tmp_path, filename, settings, named
):
  folder = tmp_path / 'folder'
  shutil.copytree(albert_folder, folder)
  _edit(folder / filename, **settings)
  with pytest.raises(cli.UserError) as error:
    hf_folder.read_folder(str(folder))
  assert str(error.value).startswith(f'{folder / filename}: {named}')


def test_a_tokenizer_json_of_other_pieces_than_spiece_model_is_refused(
    albert_folder, tmp_path
):
  folder = tmp_path / 'folder'
  shutil.copytree(albert_folder, folder)
  tokenizer = json.loads((folder / 'tokenizer.json').read_text())
  tokenizer['model']['vocab'] = tokenizer['model']['vocab'][:-1]
  (folder / 'tokenizer.json').write_text(json.dumps(tokenizer))
  with pytest.raises(cli.UserError) as error:
    hf_folder.read_folder(str(folder))
  assert str(error.value) == (
      f'{folder / "tokenizer.json"}: its 59 pieces are not those of '
      f'{folder / "spiece.model"} (60); the folder mixes two tokenizers.'
  )


@pytest.mark.parametrize(
    'lower_case',
    [True, pytest.param(False, marks=pytest.mark.slow)],
    ids=['uncased', 'cased'],
)
def test_a_unigram_tokenizer_json_alone_gives_back_its_model(
    corpus_model, tmp_path, lower_case
):
  """Rebuilt from Hugging Face's conversion, the model tokenizes alike."""
  model_file, texts = corpus_model
  folder = tmp_path / 'folder'
  transformers.AlbertTokenizerFast(
      vocab_file=str(model_file), do_lower_case=lower_case
  ).save_pretrained(str(folder))
  (folder / 'spiece.model').unlink()
  tokens, folder_lower_case = hf_folder.read_tokenizer(str(folder))
  original = vocab.load_vocab(str(model_file))
  # Equal pieces, scores, types and normalisers (`canonical_model`).
  assert tokens == original and folder_lower_case == lower_case
  assert vocab.tokenize_with_vocab(texts, tokens, lower_case) == (
      vocab.tokenize_with_vocab(texts, original, lower_case)
  )


def test_a_unigram_tokenizer_json_that_keeps_accents_is_refused(
    corpus_model, tmp_path
):
  model_file, _ = corpus_model
  folder = tmp_path / 'folder'
  transformers.AlbertTokenizerFast(
      vocab_file=str(model_file), keep_accents=True
  ).save_pretrained(str(folder))
  (folder / 'spiece.model').unlink()
  with pytest.raises(cli.UserError) as error:
    hf_folder.read_tokenizer(str(folder))
  assert str(error.value).startswith(
      f'{folder / "tokenizer.json"}: normalizer=["Lowercase", "Precompiled",'
  )


def test_a_unigram_tokenizer_json_without_an_unknown_piece_is_named(
    corpus_model, tmp_path
):
  folder = tmp_path / 'folder'
  transformers.AlbertTokenizerFast(
      vocab_file=str(corpus_model[0])
  ).save_pretrained(str(folder))
  (folder / 'spiece.model').unlink()
  _edit(folder / 'tokenizer.json', **{'model.unk_id': None})
  with pytest.raises(cli.UserError) as error:
    hf_folder.read_tokenizer(str(folder))
  assert str(error.value) == (
      f'{folder / "tokenizer.json"}: model.unk_id=None: a SentencePiece '
      'model needs its unknown piece.'
  )
