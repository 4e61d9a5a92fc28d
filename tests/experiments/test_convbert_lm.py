"""End-to-end test of the 002 Table 3 driver on a tiny WikiText-format file."""

import json
import math
import random

import numpy as np
import pytest
import tensorflow as tf

from experiments import convbert_lm
from official_repro.data import wikitext
from official_repro.tasks import causal_lm as causal_lm_task

_WORDS = 'the a cat dog sat ran on under mat tree , . <unk>'.split()


def _write_wikitext(path, num_articles=6, seed=0):
  rng = random.Random(seed)
  lines = [' ']
  for article in range(num_articles):
    lines += [f' = Article {article} = ', ' ']
    for section in range(2):
      lines += [f' = = Part {section} = = ', ' ']
      for _ in range(3):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(5, 15))]
        lines.append(' ' + ' '.join(words) + ' ')
      lines.append(' ')
  path.write_text('\n'.join(lines) + '\n')
  return str(path)


@pytest.mark.slow
def test_command_writes_table_and_json(tmp_path, python_m):
  train_file = _write_wikitext(tmp_path / 'wiki.train.tokens')
  test_file = _write_wikitext(tmp_path / 'wiki.test.tokens', 1, seed=1)
  output_dir = tmp_path / 'out'
  command = [
      'experiments.convbert_lm',
      f'--train_file={train_file}',
      '--valid_fraction=0.2',
      f'--test_file={test_file}',
      '--architectures=transformer,mixed',
      '--hidden_size=16',
      '--num_layers=1',
      '--num_attention_heads=2',
      '--intermediate_size=32',
      '--embedding_width=8',
      '--kernel_size=3',
      '--seq_length=8',
      '--batch_size=2',
      '--train_steps=2',
      '--warmup_steps=1',
      '--log_every=1',
      '--optimizer=lamb',
      '--match_parameters',
      f'--output_dir={output_dir}',
  ]
  completed = python_m(command, timeout=600)
  assert completed.returncode == 0, completed.stderr[-3000:]
  table = completed.stdout
  assert '| Transformer | 16 x 1 (2) |' in table
  assert '| Ours (mixed attention) |' in table
  assert '34.21' in table and '32.95' in table
  assert 'mixed / transformer perplexity: ours' in table
  assert 'held out the last 0.2 of' in table
  assert 'log unigram initial output bias' in table
  assert (output_dir / 'table.md').read_text().strip() == table.strip()

  results = json.loads((output_dir / 'results.json').read_text())
  # experiments.regenerate renders 002 Table 3 from results.json.
  assert convbert_lm.format_table(results).strip() == table.strip()
  assert results['settings']['train_steps'] == 2
  assert results['settings']['optimizer'] == 'lamb'
  assert results['published']['perplexity'] == {
      'transformer': 34.21,
      'mixed': 32.95,
  }
  models = results['models']
  assert set(models) == {'transformer', 'mixed'}
  for entry in models.values():
    assert entry['valid']['perplexity'] > 1.0
    assert (
        entry['test']['tokens']
        == results['data']['test']['encoding']['tokens'] - 1
    )
    assert (
        entry['valid']['tokens']
        == results['data']['valid']['encoding']['tokens'] - 1
    )
    assert [step for step, _ in entry['loss_history']] == [1, 2]
  # --match_parameters widened the mixed model towards the transformer.
  assert models['mixed']['sizes']['hidden_size'] >= 16
  transformer = models['transformer']['parameters']
  assert abs(models['mixed']['parameters'] - transformer) < 0.1 * transformer


def test_settings_errors():
  with pytest.raises(ValueError, match='--architectures must be'):
    convbert_lm.Settings(train_file='x', output_dir='y', architectures=('rnn',))


class _Killed(Exception):
  pass


def _tiny_settings(train_file, output_dir, **overrides):
  values = dict(
      train_file=train_file,
      valid_fraction=0.2,
      output_dir=str(output_dir),
      architectures=('transformer', 'mixed'),
      hidden_size=16,
      num_layers=1,
      num_attention_heads=2,
      intermediate_size=32,
      embedding_width=8,
      kernel_size=3,
      seq_length=8,
      batch_size=2,
      train_steps=4,
      warmup_steps=1,
      log_every=1,
      checkpoint_every=2,
      dropout_rate=0.0,
  )
  values.update(overrides)
  return convbert_lm.Settings(**values)


@pytest.mark.slow
def test_killed_run_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch):
  train_file = _write_wikitext(tmp_path / 'wiki.train.tokens')
  # Two Orbit loops of 2 steps: checkpoints after steps 2 and 4.
  reference = convbert_lm.run(
      _tiny_settings(train_file, tmp_path / 'ref', log_every=2)
  )

  # Kill the run right after the mixed model's step-2 checkpoint (Orbit's
  # controller writes it through the runner's checkpoint manager).
  save = tf.train.CheckpointManager.save

  def save_then_die(manager, checkpoint_number=None, **kwargs):
    path = save(manager, checkpoint_number=checkpoint_number, **kwargs)
    if (
        path is not None
        and 'mixed' in manager.directory
        and int(checkpoint_number) == 2
    ):
      raise _Killed()
    return path

  settings = _tiny_settings(train_file, tmp_path / 'killed', log_every=2)
  monkeypatch.setattr(tf.train.CheckpointManager, 'save', save_then_die)
  with pytest.raises(_Killed):
    convbert_lm.run(settings)
  monkeypatch.undo()
  resumed = convbert_lm.run(settings)

  assert (
      resumed['models']['transformer']
      == json.loads((tmp_path / 'killed' / 'results.json').read_text())[
          'models'
      ]['transformer']
  )
  mixed, expected = resumed['models']['mixed'], reference['models']['mixed']
  assert mixed['resumed_from_step'] == 2
  assert expected['resumed_from_step'] == 0
  # The library's runner wrote the run directory.
  model_dir = tmp_path / 'killed' / 'mixed'
  assert sorted(p.name for p in model_dir.glob('ckpt-*.index')) == [
      'ckpt-4.index'
  ]
  assert "causal_lm.architecture = 'mixed'" in (
      (model_dir / 'operative_config.gin').read_text()
  )
  np.testing.assert_allclose(
      np.array(mixed['loss_history']),
      np.array(expected['loss_history']),
      rtol=1e-5,
  )
  assert mixed['valid']['perplexity'] == pytest.approx(
      expected['valid']['perplexity'], rel=1e-5
  )


@pytest.mark.slow
def test_output_dir_of_other_settings_is_refused(tmp_path):
  train_file = _write_wikitext(tmp_path / 'wiki.train.tokens')
  convbert_lm.run(
      _tiny_settings(
          train_file,
          tmp_path / 'out',
          architectures=('transformer',),
          train_steps=1,
      )
  )
  with pytest.raises(ValueError, match=r'--train_steps: 1 there, 2 now'):
    convbert_lm.run(
        _tiny_settings(
            train_file,
            tmp_path / 'out',
            architectures=('transformer',),
            train_steps=2,
        )
    )


def _write_learnable_wikitext(path, num_articles=8):
  """Lines of one fixed word cycle: each next word follows from the last."""
  cycle = 'the cat sat on the mat under a tree .'
  lines = [' ']
  for article in range(num_articles):
    lines += [f' = Article {article} = ', ' ']
    lines += [' ' + cycle + ' ' for _ in range(6)]
    lines.append(' ')
  path.write_text('\n'.join(lines) + '\n')
  return str(path)


@pytest.mark.slow
def test_training_lowers_perplexity_below_the_untrained_model(tmp_path):
  train_file = _write_learnable_wikitext(tmp_path / 'wiki.train.tokens')
  settings = _tiny_settings(
      train_file,
      tmp_path / 'out',
      architectures=('transformer',),
      hidden_size=32,
      intermediate_size=64,
      embedding_width=16,
      train_steps=60,
      warmup_steps=5,
      learning_rate=3e-3,
      log_every=20,
      checkpoint_every=20,
      batch_size=8,
  )
  results = convbert_lm.run(settings)
  entry = results['models']['transformer']

  # The untrained model predicts (nearly) its initial output bias, the
  # training stream's log unigram probabilities: its perplexity is the
  # unigram model's on the validation stream.
  corpus = causal_lm_task.load_corpus(
      causal_lm_task.CausalLMDataConfig(
          train_file=train_file, valid_fraction=settings.valid_fraction
      )
  )
  log_prior = wikitext.unigram_log_probs(corpus.train, len(corpus.vocab))
  targets = corpus.valid[1:]
  untrained = math.exp(-float(np.mean(log_prior[targets])))
  assert entry['valid']['tokens'] == len(targets)
  assert untrained > 5.0
  assert entry['valid']['perplexity'] < 0.5 * untrained
  losses = [loss for _, loss in entry['loss_history']]
  assert [step for step, _ in entry['loss_history']] == [20, 40, 60]
  assert losses[-1] < losses[0]
