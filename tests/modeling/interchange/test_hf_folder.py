"""Hugging Face folders' tokenizer files: refused unless BERT's original."""

import json

import numpy as np
import pytest
import safetensors.numpy

import transformers
from official_repro.common import cli
from official_repro.modeling.interchange import hf_folder
from official_repro.modeling.interchange import hf_models
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
    ('tokenizer.json', True, {'model.type': 'BPE'}, 'model.type="BPE"'),
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
      "this repository's tokenizer is the original BERT one, so the folder "
      'cannot be used as is.'
  ), message


def test_the_refusal_holds_without_a_vocab_txt(tmp_path):
  """The vocabulary then comes from tokenizer.json: its model is checked."""
  folder = _tokenizer_folder(tmp_path / 'folder')
  (folder / 'vocab.txt').unlink()
  _edit(folder / 'tokenizer.json', **{'model.type': 'Unigram'})
  with pytest.raises(cli.UserError, match=r'tokenizer\.json: model\.type='):
    hf_folder.read_folder(str(folder))


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
