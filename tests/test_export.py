"""Trained models leave as Hugging Face folders and SavedModels."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from official_repro.data import vocab
from official_repro.modeling.interchange import hf_folder
from official_repro.modeling.interchange import hf_models
from official_repro.training import saved_runs

# One worker runs these (they share the runs): --dist loadgroup.
pytestmark = pytest.mark.xdist_group('test_export')

transformers = pytest.importorskip('transformers')
from transformers import modeling_tf_pytorch_utils as pt_utils  # noqa: E402  pylint: disable=g-import-not-at-top

from tests.conftest import write_tiny_records  # noqa: E402  pylint: disable=g-import-not-at-top
from tests.modeling.interchange import hf_reference  # noqa: E402  pylint: disable=g-import-not-at-top


@pytest.fixture(scope='module')
def runs(tmp_path_factory, run_tiny_pretraining):
  """Tiny runs: masked LM (E != H), ELECTRA (tied block), TEAMS, SCRIPT."""
  root = tmp_path_factory.mktemp('runs')
  run_tiny_pretraining(
      root / 'masked_lm',
      ['gin/pretrain/masked_lm.gin'],
      ['encoder.embedding_width = 16'],
      mode='train',
  )
  run_tiny_pretraining(  # tied as the papers' code ties (one embedding block)
      root / 'electra',
      ['gin/pretrain/electra.gin'],
      ['electra.generator_size = 0.5', 'electra.tie_embedding_block = True'],
      mode='train',
  )
  run_tiny_pretraining(
      root / 'teams',
      ['gin/pretrain/teams.gin'],
      [],
      mode='train',
  )
  run_tiny_pretraining(
      root / 'script', ['gin/pretrain/script.gin'], mode='train'
  )
  return root


def _hf_model(folder):
  """The folder's class, built from its config and loaded from its weights."""
  config = json.loads((folder / 'config.json').read_text())
  (class_name,) = config['architectures']
  hf_config = transformers.AutoConfig.for_model(**config)
  model = getattr(transformers, 'TF' + class_name)(hf_config)
  pt_utils.load_pytorch_state_dict_in_tf2_model(
      model, hf_folder.read_folder(str(folder)).state
  )
  return model


def _batch(vocab_size):
  ids = (
      np.random.RandomState(0).randint(5, vocab_size, (2, 12)).astype(np.int32)
  )
  mask = np.ones_like(ids)
  mask[1, 9:] = 0
  return ids, mask, np.zeros_like(ids)


@pytest.mark.slow
def test_a_masked_lm_run_exports_as_a_masked_lm(python_m, runs, tmp_path):
  out = tmp_path / 'hf'
  completed = python_m(
      [
          'official_repro.export',
          f'--model_dir={runs / "masked_lm"}',
          '--format=huggingface',
          f'--output_dir={out}',
      ]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  assert 'ElectraForMaskedLM (electra)' in completed.stdout  # E != H
  # Its MLM head applies the tanh GELU, Hugging Face's ELECTRA head the
  # exact one: said, with the size of the difference.
  assert 'applies gelu_erf there' in completed.stderr
  run = saved_runs.load(str(runs / 'masked_lm'))
  hf = _hf_model(out)
  ids, mask, types = _batch(run.model_config.encoder.vocab_size)
  hf_reference.assert_same_sequence_output(
      run.model.encoder_network, hf, ids, mask, types
  )
  tokenizer = json.loads((out / 'tokenizer_config.json').read_text())
  assert tokenizer['do_lower_case'] is True


@pytest.mark.slow
def test_an_electra_run_exports_discriminator_and_generator(
    python_m, runs, tmp_path
):
  out = tmp_path / 'hf'
  completed = python_m(
      [
          'official_repro.export',
          f'--model_dir={runs / "electra"}',
          '--format=huggingface',
          f'--output_dir={out}',
      ]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  assert 'ElectraForPreTraining' in completed.stdout
  run = saved_runs.load(str(runs / 'electra'))
  discriminator = _hf_model(out)
  ids, mask, types = _batch(run.model_config.discriminator.vocab_size)
  inputs = dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)
  ours = run.model.rtd_head(
      run.model.discriminator(inputs)['sequence_output']
  ).numpy()
  theirs = discriminator(
      input_ids=ids, attention_mask=mask, token_type_ids=types
  ).logits.numpy()
  real = mask.astype(bool)
  np.testing.assert_allclose(ours[real], theirs[real], atol=1e-5)
  generator = _hf_model(out / 'generator')
  assert type(generator).__name__ == 'TFElectraForMaskedLM'
  # The generator's folder carries the shared position table.
  np.testing.assert_array_equal(
      generator.electra.embeddings.position_embeddings.numpy(),
      run.model.discriminator.embedding_block[0].weights[0].numpy(),
  )
  # Round trip: the exported discriminator reads back bit for bit.
  back = hf_models.build(hf_models.read(str(out)))
  for variable, again in zip(
      run.model.discriminator.weights, back.encoder.weights
  ):
    if 'pooler' not in variable.name:  # Hugging Face's ELECTRA has none
      np.testing.assert_array_equal(variable.numpy(), again.numpy())


@pytest.mark.slow
def test_an_encoder_exports_as_a_saved_model_from_ids_and_text(
    python_m, runs, tmp_path
):
  out = tmp_path / 'saved_model'
  completed = python_m(
      [
          'official_repro.export',
          f'--model_dir={runs / "masked_lm" / "encoder"}',
          '--format=saved_model',
          f'--output_dir={out}',
          '--max_seq_length=16',
      ]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  loaded = tf.saved_model.load(str(out))
  run = saved_runs.load(str(runs / 'masked_lm'))
  ids, mask, types = _batch(run.model_config.encoder.vocab_size)
  served = loaded.signatures['serving_default'](
      input_word_ids=tf.constant(ids),
      input_mask=tf.constant(mask),
      input_type_ids=tf.constant(types),
  )
  ours = run.model.encoder_network(
      dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)
  )
  real = mask.astype(bool)
  np.testing.assert_allclose(
      served['sequence_output'].numpy()[real],
      ours['sequence_output'].numpy()[real],
      atol=1e-5,
  )
  text = loaded.signatures['serve_text'](
      text=tf.constant(['the quick brown fox', 'a dog'])
  )
  assert text['pooled_output'].shape == (
      2,
      run.model_config.encoder.hidden_size,
  )


@pytest.mark.slow
def test_a_glue_classifier_exports_with_its_labels(python_m, tmp_path):
  """Fine-tuned from a Hugging Face BERT, out as its sequence classifier."""
  from tests import test_convert  # pylint: disable=g-import-not-at-top

  _, state = hf_reference.build('bert', 'mlm')
  model, _ = hf_reference.build('bert', 'mlm')
  release = hf_reference.write_folder(
      str(tmp_path / 'bert'), model.config, state
  )
  data_dir = test_convert._write_mrpc(tmp_path / 'glue' / 'MRPC')  # pylint: disable=protected-access
  completed = python_m(
      [
          'official_repro.finetune',
          '--gin_file=gin/finetune/001_ale/mrpc.gin',
          f'--init_checkpoint={release}',
          f'--data_dir={data_dir}',
          f'--model_dir={tmp_path / "ft"}',
          '--strategy=cpu',
          '--gin_param=run_protocol.num_runs = 1',
          '--gin_param=finetuning.num_epochs = 1',
          '--gin_param=finetuning.train_batch_size = 4',
          '--gin_param=finetuning.max_seq_length = 16',
      ]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  out = tmp_path / 'hf'
  command = [
      'official_repro.export',
      f'--model_dir={tmp_path / "ft" / "seed_0"}',
      '--format=huggingface',
      f'--output_dir={out}',
  ]
  completed = python_m(command)
  assert completed.returncode == 0, completed.stderr[-3000:]
  assert 'BertForSequenceClassification' in completed.stdout
  config = json.loads((out / 'config.json').read_text())
  assert config['id2label'] == {'0': '0', '1': '1'}
  run = saved_runs.load_finetuned(str(tmp_path / 'ft' / 'seed_0'))
  hf = _hf_model(out)
  ids, mask, types = _batch(len(hf_reference.VOCAB))
  ours = run.classifier(
      dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)
  ).numpy()
  theirs = hf(
      input_ids=ids, attention_mask=mask, token_type_ids=types, training=False
  ).logits.numpy()
  np.testing.assert_allclose(ours, theirs, atol=1e-5)
  # The parent folder holds one run per seed: one must be named.
  completed = python_m(
      [
          *command[:1],
          f'--model_dir={tmp_path / "ft"}',
          *command[2:3],
          f'--output_dir={tmp_path / "other"}',
      ]
  )
  assert completed.returncode == 2 and 'seed_0' in completed.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    'run_name, classes, said',
    [
        (
            'teams',
            ('TFElectraModel', 'TFElectraForMaskedLM'),
            'not exported: the MWS head',
        ),
        ('script', ('TFBertForMaskedLM',), 'the critic (004 Eq. 4-5)'),
    ],
)
def test_teams_and_script_export_their_backbone_and_say_what_is_lost(
    python_m, runs, tmp_path, run_name, classes, said
):
  out = tmp_path / 'hf'
  completed = python_m(
      [
          'official_repro.export',
          f'--model_dir={runs / run_name}',
          '--format=huggingface',
          f'--output_dir={out}',
      ]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  assert said in completed.stderr
  run = saved_runs.load(str(runs / run_name))
  encoder = run.model.checkpoint_items['encoder']
  hf = _hf_model(out)
  assert type(hf).__name__ == classes[0]
  vocab_size = encoder.get_config()['vocab_size']
  ids, mask, types = _batch(vocab_size)
  hf_reference.assert_same_sequence_output(encoder, hf, ids, mask, types)
  if len(classes) > 1:
    assert type(_hf_model(out / 'generator')).__name__ == classes[1]


# A process of its own: the command's flags (--model_dir, ...) are defined
# at import and other commands' modules define them too.
_FAIL_MIDWAY = """
import os, sys
from official_repro import export
from official_repro.common import cli

def half_export(source, out):
  open(os.path.join(out, 'model.safetensors'), 'w').write('weights')
  print('wrote into', out)
  raise OSError('No space left on device')

export._export = half_export
cli.run(export.main)
"""


@pytest.mark.slow
def test_an_export_that_fails_midway_leaves_no_output_dir(tmp_path):
  # The disk fills after the weights: the same command can run again.
  out = tmp_path / 'out'
  completed = subprocess.run(
      [
          sys.executable,
          '-c',
          _FAIL_MIDWAY,
          f'--model_dir={tmp_path / "run"}',
          '--format=huggingface',
          f'--output_dir={out}',
      ],
      capture_output=True,
      text=True,
      cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
      check=False,
  )
  assert completed.returncode != 0
  assert 'wrote into' in completed.stdout
  assert str(out) + '.tmp-' in completed.stdout
  assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_run_on_sentencepiece_records_exports_its_tokenizer(
    python_m, run_tiny_pretraining, tmp_path
):
  records_dir = write_tiny_records(
      tmp_path / 'sentencepiece', vocab_type='sentencepiece', vocab_size=60
  )
  run_tiny_pretraining(
      tmp_path / 'run',
      ['gin/pretrain/masked_lm.gin'],
      [f'pretrain_data.input_path = {records_dir!r}'],
      mode='train',
  )
  out = tmp_path / 'hf'
  completed = python_m(
      [
          'official_repro.export',
          f'--model_dir={tmp_path / "run"}',
          '--format=huggingface',
          f'--output_dir={out}',
      ]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  assert (out / 'spiece.model').read_bytes() == (
      tmp_path / 'sentencepiece' / 'records' / 'spiece.model'
  ).read_bytes()
  tokenizer = transformers.AutoTokenizer.from_pretrained(str(out))
  assert type(tokenizer).__name__ == 'AlbertTokenizerFast'
  texts = ['the river ran under the old bridge', 'Children play']
  tokens = vocab.load_vocab(str(out / 'spiece.model'))
  assert tokenizer(texts, add_special_tokens=False)['input_ids'] == (
      vocab.tokenize_with_vocab(texts, tokens, lower_case=True)
  )
  run = saved_runs.load(str(tmp_path / 'run'))
  ids, mask, types = _batch(len(tokens))
  hf_reference.assert_same_sequence_output(
      run.model.encoder_network, _hf_model(out), ids, mask, types
  )
  # A SavedModel's serve_text tokenizes as the records were.
  saved = tmp_path / 'saved_model'
  completed = python_m(
      [
          'official_repro.export',
          f'--model_dir={tmp_path / "run"}',
          '--format=saved_model',
          f'--output_dir={saved}',
          '--max_seq_length=16',
      ]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  loaded = tf.saved_model.load(str(saved))
  (pieces,) = vocab.tokenize_with_vocab(['the dog'], tokens, lower_case=True)
  ids = np.zeros((1, 16), np.int32)
  ids[0, : len(pieces) + 2] = [2, *pieces, 3]
  mask = (np.arange(16) < len(pieces) + 2).astype(np.int32)[None]
  served = loaded.signatures['serving_default'](
      input_word_ids=tf.constant(ids),
      input_mask=tf.constant(mask),
      input_type_ids=tf.zeros_like(ids),
  )
  text = loaded.signatures['serve_text'](text=tf.constant(['the dog']))
  np.testing.assert_allclose(
      text['pooled_output'].numpy(), served['pooled_output'].numpy(), atol=1e-5
  )
