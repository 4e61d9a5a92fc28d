"""Released models through the command lines: convert, fine-tune, score."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import transformers

from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import pretrained
from tests.modeling.interchange import hf_reference

# One worker runs these (they share the releases): --dist loadgroup.
pytestmark = pytest.mark.xdist_group('test_convert')

_SENTENCES = ['the quick brown fox', 'a lazy dog sing in the river']


@pytest.fixture(scope='module')
def releases(tmp_path_factory):
  """An ELECTRA discriminator, a BERT and an ALBERT masked LM: Hub folders.

  The ALBERT one has a SentencePiece vocabulary (`spiece.model`).
  """
  root = tmp_path_factory.mktemp('releases')
  discriminator, state = hf_reference.build('electra', 'rtd')
  hf_reference.write_folder(str(root / 'electra'), discriminator.config, state)
  masked_lm, state = hf_reference.build('bert', 'mlm', seed=2)
  hf_reference.write_folder(str(root / 'bert'), masked_lm.config, state)
  albert, state = hf_reference.build('albert', 'mlm', seed=3, vocab_size=60)
  hf_reference.write_sentencepiece_folder(
      str(root / 'albert'),
      albert.config,
      state,
      hf_reference.sentencepiece_model(),
  )
  return root, discriminator, masked_lm


@pytest.mark.slow
def test_convert_writes_the_layout_every_command_reads(
    python_m, releases, tmp_path
):
  root, discriminator, _ = releases
  out = tmp_path / 'converted'
  completed = python_m(
      [
          'official_repro.convert',
          f'--input={root / "electra"}',
          f'--output_dir={out}',
      ]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  assert 'huggingface electra (ElectraForPreTraining), heads: rtd' in (
      completed.stdout
  )
  encoder = pretrained.resolve(str(out))
  assert encoder.config.embedding_width == 16  # from config.json, not gin
  assert encoder.config.hidden_activation == 'gelu_erf'  # Hugging Face gelu
  assert encoder.lower_case
  network = encoders.build_encoder(encoder.config)
  pretrained.restore(network, encoder.checkpoint_path)
  ids, mask, types = hf_reference.inputs()
  hf_reference.assert_same_sequence_output(
      network, discriminator, ids, mask, types
  )
  record = json.loads((out / 'conversion.json').read_text())
  assert record['heads'] == ['rtd'] and record['kind'] == 'huggingface'


def _write_mrpc(root):
  root.mkdir(parents=True)
  words = hf_reference.VOCAB[5:20]
  rng = np.random.RandomState(0)
  for split, rows in (('train', 8), ('dev', 4)):
    lines = ['Quality\t#1 ID\t#2 ID\t#1 String\t#2 String'] + [
        f'{i % 2}\t{i}\t{i + 9}\t{" ".join(rng.choice(words, 4))}\t'
        f'{" ".join(rng.choice(words, 4))}'
        for i in range(rows)
    ]
    (root / f'{split}.tsv').write_text('\n'.join(lines) + '\n')
  return root.parent


def _finetune_mrpc(init_checkpoint, tmp_path):
  """`finetune` of one short MRPC run into `tmp_path/ft`."""
  return [
      'official_repro.finetune',
      '--gin_file=gin/finetune/001_ale/mrpc.gin',
      f'--init_checkpoint={init_checkpoint}',
      f'--data_dir={_write_mrpc(tmp_path / "glue" / "MRPC")}',
      f'--model_dir={tmp_path / "ft"}',
      '--strategy=cpu',
      '--gin_param=run_protocol.num_runs = 1',
      '--gin_param=finetuning.num_epochs = 1',
      '--gin_param=finetuning.train_batch_size = 4',
      '--gin_param=finetuning.max_seq_length = 16',
  ]


@pytest.mark.slow
def test_finetune_takes_a_hugging_face_folder(python_m, releases, tmp_path):
  root, _, _ = releases
  completed = python_m(_finetune_mrpc(root / 'electra', tmp_path))
  assert completed.returncode == 0, completed.stderr[-3000:]
  with open(tmp_path / 'ft' / 'results.json') as f:
    results = json.load(f)
  assert results['task'] == 'mrpc' and np.isfinite(results['score'])
  assert os.environ['OFFICIAL_REPRO_CACHE'] in results['init_checkpoint']


def _naive_mlm_pll(model, sentence):
  """Salazar et al.'s PLL by a loop: mask each token, sum log p(token)."""
  tokens = [hf_reference.VOCAB.index(w) for w in sentence.split()]
  ids = [2, *tokens, 3]
  total = 0.0
  for position in range(1, len(ids) - 1):
    masked = list(ids)
    masked[position] = 4
    logits = model(input_ids=tf.constant([masked])).logits.numpy()[0, position]
    logits = logits.astype(np.float64)
    total += logits[ids[position]] - np.log(np.exp(logits).sum())
  return total


@pytest.mark.slow
def test_score_takes_a_masked_lm_folder(python_m, releases, tmp_path):
  root, _, masked_lm = releases
  sentences = tmp_path / 'sentences.txt'
  sentences.write_text('\n'.join(_SENTENCES) + '\n')
  completed = python_m(
      [
          'official_repro.score',
          f'--init_checkpoint={root / "bert"}',
          f'--input={sentences}',
      ]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  scores = [
      float(line.split('\t')[0])
      for line in completed.stdout.splitlines()
      if '\t' in line
  ]
  assert 'mlm: 2 sentences' in completed.stdout
  expected = [_naive_mlm_pll(masked_lm, s) for s in _SENTENCES]
  np.testing.assert_allclose(scores, expected, rtol=1e-4)


@pytest.mark.slow
def test_rescore_scores_with_a_masked_lm_folder_by_its_own_method(releases):
  """`rescore --init_checkpoint=<folder>`'s scorer: the masked-LM PLL."""
  from official_repro import score  # pylint: disable=g-import-not-at-top

  root, _, masked_lm = releases
  scorer = score.PllScorer.from_checkpoint(str(root / 'bert'))
  assert scorer.method == 'mlm'
  np.testing.assert_allclose(
      scorer(_SENTENCES[:1]),
      [_naive_mlm_pll(masked_lm, _SENTENCES[0])],
      rtol=1e-4,
  )


@pytest.mark.parametrize(
    'kind', ['model', pytest.param('rtd', marks=pytest.mark.slow)]
)
def test_scoring_a_release_without_an_mlm_head_names_the_folder_and_the_head(
    tmp_path, kind
):
  from official_repro import score  # pylint: disable=g-import-not-at-top
  from official_repro.common import cli  # pylint: disable=g-import-not-at-top

  model, state = hf_reference.build('electra', kind)
  folder = hf_reference.write_folder(str(tmp_path / 'hub'), model.config, state)
  with pytest.raises(cli.UserError) as error:
    score.PllScorer.from_checkpoint(folder)
  message = str(error.value)
  assert message.startswith(f'--init_checkpoint {folder} has no masked-LM head')
  assert os.environ['OFFICIAL_REPRO_CACHE'] not in message
  assert ('only rtd' in message) == (kind == 'rtd')


@pytest.mark.slow
def test_an_albert_release_with_sentencepiece_runs_through_every_command(
    python_m, releases, tmp_path
):
  root = releases[0]
  albert = root / 'albert'
  converted = tmp_path / 'converted'
  completed = python_m(
      [
          'official_repro.convert',
          f'--input={albert}',
          f'--output_dir={converted}',
      ]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  assert (converted / 'spiece.model').read_bytes() == (
      albert / 'spiece.model'
  ).read_bytes()
  completed = python_m(_finetune_mrpc(converted, tmp_path))
  assert completed.returncode == 0, completed.stderr[-3000:]
  results = json.loads((tmp_path / 'ft' / 'results.json').read_text())
  assert np.isfinite(results['score'])
  sentences = tmp_path / 'sentences.txt'
  sentences.write_text('\n'.join(_SENTENCES) + '\n')
  completed = python_m(
      [
          'official_repro.score',
          f'--init_checkpoint={albert}',
          f'--input={sentences}',
      ]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  assert 'mlm: 2 sentences' in completed.stdout
  exported = tmp_path / 'exported'
  completed = python_m(
      [
          'official_repro.export',
          f'--model_dir={converted}',
          '--format=huggingface',
          f'--output_dir={exported}',
      ]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  tokenizer = transformers.AutoTokenizer.from_pretrained(str(exported))
  release = transformers.AutoTokenizer.from_pretrained(str(albert))
  assert type(tokenizer).__name__ == 'AlbertTokenizerFast'
  assert tokenizer(_SENTENCES)['input_ids'] == release(_SENTENCES)['input_ids']


def _mismatch(python_m, args):
  """The one line a refused command prints (exit 2)."""
  completed = python_m(args)
  assert completed.returncode == 2, completed.stderr[-3000:]
  lines = completed.stderr.strip().splitlines()
  assert 'Traceback' not in completed.stderr
  return lines[-1]


@pytest.mark.slow
def test_a_mismatched_vocabulary_is_refused_naming_both_sides(
    python_m, releases, tmp_path
):
  root = releases[0]
  finetune = [
      'official_repro.finetune',
      '--gin_file=gin/finetune/001_ale/mrpc.gin',
      f'--data_dir={_write_mrpc(tmp_path / "glue" / "MRPC")}',
      f'--model_dir={tmp_path / "ft"}',
  ]
  # A SentencePiece model for a WordPiece encoder.
  line = _mismatch(
      python_m,
      finetune
      + [
          f'--init_checkpoint={root / "bert"}',
          f'--vocab_file={root / "albert" / "spiece.model"}',
      ],
  )
  assert 'spiece.model (sentencepiece, 60 tokens) is not the vocabulary' in line
  assert 'wordpiece, 50 tokens); drop --vocab_file.' in line
  # A WordPiece vocabulary of another size for a SentencePiece encoder.
  line = _mismatch(
      python_m,
      finetune
      + [
          f'--init_checkpoint={root / "albert"}',
          f'--vocab_file={root / "bert" / "vocab.txt"}',
      ],
  )
  assert 'vocab.txt (wordpiece, 50 tokens) is not the vocabulary' in line
  assert 'sentencepiece, 60 tokens); drop --vocab_file.' in line
  # A casing that contradicts the release's.
  line = _mismatch(
      python_m,
      [
          'official_repro.convert',
          f'--input={root / "albert"}',
          f'--output_dir={tmp_path / "cased"}',
          '--nolower_case',
      ],
  )
  assert 'the tokenizer is uncased (do_lower_case=True)' in line
  assert '--lower_case=False was given; drop the flag.' in line
  assert not (tmp_path / 'ft').exists()
