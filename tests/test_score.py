"""The PLL scorers and `python -m official_repro.score`."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from official_repro import rescore
from official_repro import score
from official_repro.data import vocab
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import pretrained
from official_repro.modeling.pretrainers import script
from tests import test_rescore

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TOKENS = [
    *vocab.SPECIAL_TOKENS,
    'the',
    'cat',
    'sat',
    'on',
    'a',
    'mat',
    'dog',
    'ran',
    '##s',
    '.',
]
_SENTENCES = [
    'the cat sat on the mat .',
    'a dog ran',
    'cats',
    'the dog sat on a cat and ran .',
    'mat',
]


@pytest.fixture(scope='module')
def tiny_model():
  return script.ScriptPretrainer(
      encoders.EncoderConfig(
          hidden_size=16,
          num_layers=2,
          num_attention_heads=2,
          intermediate_size=32,
          vocab_size=len(_TOKENS),
          max_position_embeddings=16,
      )
  )


def _encoded(sentence):
  ids = vocab.tokenize_with_vocab([sentence], _TOKENS, lower_case=True)[0]
  special = vocab.SpecialTokenIds.from_vocab(_TOKENS)
  return np.array([[special.cls, *ids, special.sep]], np.int32), special


def _log_softmax(x):
  x = x.astype(np.float64) - x.max(axis=-1, keepdims=True)
  return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


@pytest.mark.slow
def test_script_pll_is_a_naive_sum_and_batching_does_not_matter(tiny_model):
  scorer = score.PllScorer(tiny_model, _TOKENS, True, 'script', batch_size=3)
  batched = scorer(_SENTENCES)
  one_at_a_time = np.concatenate([scorer([s]) for s in _SENTENCES])
  np.testing.assert_allclose(batched, one_at_a_time, rtol=1e-5, atol=1e-5)
  for sentence, value in zip(_SENTENCES, batched):
    ids, _ = _encoded(sentence)
    logits = tiny_model.token_logits(
        ids, np.ones_like(ids), np.zeros_like(ids)
    ).numpy()[0]
    expected = 0.0
    for position in range(1, ids.shape[1] - 1):  # not [CLS], [SEP]
      s = logits[position].astype(np.float64)
      expected += np.log(np.exp(s).sum()) - np.log(np.exp(s).sum() + 1)
    assert value == pytest.approx(expected, rel=1e-4)


@pytest.mark.slow
def test_mlm_pll_is_a_naive_loop_over_masked_tokens(tiny_model):
  scorer = score.PllScorer(tiny_model, _TOKENS, True, 'mlm', batch_size=4)
  scores = scorer(_SENTENCES)
  for sentence, value in zip(_SENTENCES, scores):
    ids, special = _encoded(sentence)
    expected = 0.0
    for position in range(1, ids.shape[1] - 1):
      masked = ids.copy()
      masked[0, position] = special.mask
      logits = tiny_model.token_logits(
          masked, np.ones_like(ids), np.zeros_like(ids)
      ).numpy()[0]
      expected += _log_softmax(logits[position])[ids[0, position]]
    assert value == pytest.approx(expected, rel=1e-4)


def test_the_timed_call_logs_its_progress(tiny_model, progress_lines):
  lines = progress_lines
  script_scorer = score.PllScorer(tiny_model, _TOKENS, True, 'script', 2)
  score.timed_scores(script_scorer, _SENTENCES)
  # 5 sentences in batches of 2; the warm-up batch logs nothing.
  assert [line.split(' (')[0].split(',')[0] for line in lines] == [
      'script PLL: 2/5 sentences',
      'script PLL: 4/5 sentences',
      'script PLL: 5/5 sentences',
  ]
  assert lines[-1].startswith('script PLL: 5/5 sentences, done in ')
  lines.clear()
  score.timed_scores(
      score.PllScorer(tiny_model, _TOKENS, True, 'mlm', 8), _SENTENCES
  )
  # Tokens: 7 + 3 + 2 (cat ##s) + 9 ('and' is [UNK]) + 1 = 22 masked copies.
  assert lines[0].startswith('mlm PLL: 8/22 masked tokens (36.4%), ')
  assert lines[-1].startswith('mlm PLL: 22/22 masked tokens, done in ')


def test_scorer_errors(tiny_model):
  with pytest.raises(ValueError, match='--method'):
    score.PllScorer(tiny_model, _TOKENS, True, 'gpt')
  with pytest.raises(ValueError, match='at most 14'):
    score.PllScorer(tiny_model, _TOKENS, True)([' '.join(['cat'] * 15)])


def test_a_run_of_another_objective_is_rejected(exported_encoder, tmp_path):
  with pytest.raises(ValueError, match="experiment.objective = 'script'"):
    score.load_model(exported_encoder)  # a masked_lm run
  with open(tmp_path / 'model_config.json', 'w') as f:
    json.dump(dict(encoder={}, next_sentence_prediction=False), f)
  with pytest.raises(FileNotFoundError, match='no training checkpoint'):
    score.load_model(str(tmp_path))


@pytest.mark.slow
def test_scores_a_pretraining_run_and_rescores_with_it(
    tiny_script_run, tmp_path
):
  model_dir = tiny_script_run
  model, encoder, critic = score.load_model(str(model_dir))
  assert critic
  # The training checkpoint restored the encoder that was exported.
  exported = encoders.build_encoder(encoder.config)
  pretrained.restore(exported, encoder.checkpoint_path)
  for restored, saved in zip(model.encoder.weights, exported.weights):
    np.testing.assert_array_equal(restored.numpy(), saved.numpy())
  scorer = score.PllScorer.from_checkpoint(str(model_dir))
  scores = scorer(['the quick brown fox', 'dog the the the'])
  assert scores.shape == (2,) and np.all(np.isfinite(scores))
  assert np.all(scores < 0)
  root = tmp_path / 'rescore'
  root.mkdir()
  test_rescore._write_inputs(root)  # pylint: disable=protected-access
  results = rescore.run(
      test_rescore._settings(root, lm_scores=()),  # pylint: disable=protected-access
      scorer=scorer,
  )
  assert results['sets']['test']['lm_scores'] == {'scorer': 'PllScorer'}


def _run_module(module, *args):
  return subprocess.run(
      [sys.executable, '-m', module, *args],
      cwd=REPO_ROOT,
      capture_output=True,
      text=True,
      check=False,
      env=dict(os.environ, TF_USE_LEGACY_KERAS='1'),
  )


@pytest.mark.slow
def test_commands_score_and_rescore_from_a_run(tiny_script_run, tmp_path):
  model_dir = tiny_script_run
  sentences = tmp_path / 'sentences.txt'
  sentences.write_text('the quick brown fox\n\nbirds sing in the trees\n')
  output = tmp_path / 'scores.tsv'
  completed = _run_module(
      'official_repro.score',
      f'--init_checkpoint={model_dir}',
      f'--input={sentences}',
      '--method=both',
      '--batch_size=4',
      f'--output={output}',
  )
  assert completed.returncode == 0, completed.stderr[-2000:]
  assert 'time ratio mlm / script:' in completed.stdout
  lines = tf.io.gfile.GFile(str(output)).read().splitlines()
  assert [line.split('\t')[2] for line in lines] == [
      'the quick brown fox',
      'birds sing in the trees',
  ]
  assert all(
      np.isfinite(float(v)) for line in lines for v in line.split('\t')[:2]
  )
  test_rescore._write_inputs(tmp_path)  # pylint: disable=protected-access
  completed = _run_module(
      'official_repro.rescore',
      f'--init_checkpoint={model_dir}',
      f'--nbest=dev={tmp_path / "dev.tsv"}',
      f'--nbest=test={tmp_path / "test"}',
      f'--references={tmp_path / "ref.trn"}',
      '--lower_case',
      '--dev_set=dev',
      '--weights=0:1:0.5',
      f'--output_json={tmp_path / "rescore.json"}',
  )
  assert completed.returncode == 0, completed.stderr[-2000:]
  with open(tmp_path / 'rescore.json') as f:
    assert json.load(f)['sets']['test']['lm_scores'] == {'scorer': 'PllScorer'}
