"""The causal-LM task: its data, loss, per-stream metrics and gin config."""

import math

import gin
import numpy as np
import pytest
import tensorflow as tf

from official_repro.common import cli
from official_repro.data import wikitext
from official_repro.modeling.models import causal_lm as causal_lm_model
from official_repro.tasks import causal_lm
from official_repro.training import gin_utils


def _write_text(path, num_lines=40):
  words = 'the a cat dog sat ran on under mat tree'.split()
  lines = [' = Article 0 = ']
  lines += [
      ' ' + ' '.join(words[(i + j) % len(words)] for j in range(7)) + ' '
      for i in range(num_lines)
  ]
  lines.append(' = Article 1 = ')
  lines += [' the cat sat on the mat . ' for _ in range(6)]
  path.write_text('\n'.join(lines) + '\n')
  return str(path)


def _task(train_file, **data):
  train, validation = causal_lm.data_configs(
      train_file=train_file, valid_fraction=0.2, seq_length=4, **data
  )
  corpus = causal_lm.load_corpus(train)
  config = causal_lm.CausalLMTaskConfig(
      model=causal_lm.CausalLMModelConfig(
          hidden_size=8,
          num_layers=1,
          num_attention_heads=2,
          intermediate_size=16,
          vocab_size=len(corpus.vocab),
          max_seq_length=4,
      ),
      train_data=train,
      validation_data=validation,
  )
  return causal_lm.CausalLMTask(config), corpus


def test_a_resumed_stream_reads_on_where_the_checkpoint_stopped(tmp_path):
  task, _ = _task(_write_text(tmp_path / 'text'), train_batch_size=2, seed=3)
  train = task.task_config.train_data
  full = [b[1]['tokens'].numpy() for b in task.build_inputs(train).take(7)]
  resumed = task.build_inputs(train.replace(start_step=4))
  tail = [batch[1]['tokens'].numpy() for batch in resumed.take(3)]
  np.testing.assert_array_equal(np.stack(full[4:]), np.stack(tail))
  features, labels = next(iter(task.build_inputs(train)))
  np.testing.assert_array_equal(features, labels['tokens'][:, :-1])


def test_evaluation_scores_each_stream_on_its_own(tmp_path):
  train_file = _write_text(tmp_path / 'text')
  test_file = _write_text(tmp_path / 'test', num_lines=3)
  task, corpus = _task(train_file, test_file=test_file, train_batch_size=3)
  assert task.task_config.validation_data.streams == ('valid', 'test')
  model = task.build_model()
  task.initialize(model)
  metrics = task.build_metrics(training=False)
  assert task.build_metrics(training=True) == []
  totals = {'valid': [0.0, 0.0], 'test': [0.0, 0.0]}
  names = task.task_config.validation_data.streams
  for features, labels in task.build_inputs(task.task_config.validation_data):
    logits = model(features, training=False)
    task.process_metrics(metrics, labels, logits)
    for index, name in enumerate(names):
      weights = (
          labels['weights']
          * tf.cast(labels['stream'] == index, tf.float32)[:, None]
      )
      totals[name][0] += float(
          causal_lm_model.sequence_nll(logits, labels['tokens'], weights)
      )
      totals[name][1] += float(tf.reduce_sum(weights))
  results = {metric.name: float(metric.result()) for metric in metrics}
  for name, stream in (('valid', corpus.valid), ('test', corpus.test)):
    nll, tokens = totals[name]
    assert tokens == len(stream) - 1
    assert results[f'{name}_tokens'] == tokens
    assert results[f'{name}_nll'] == pytest.approx(nll / tokens, rel=1e-5)
    assert results[f'{name}_perplexity'] == pytest.approx(
        math.exp(nll / tokens), rel=1e-5
    )
  # A new run starts the output bias at the log unigram probabilities.
  np.testing.assert_allclose(
      model.output_bias.numpy(),
      wikitext.unigram_log_probs(corpus.train, len(corpus.vocab)),
  )


def test_experiment_config_from_gin(tmp_path):
  train_file = _write_text(tmp_path / 'text')
  gin.clear_config()
  try:
    gin_utils.parse_config(
        [],
        [
            f'causal_lm_data.train_file = {train_file!r}',
            'causal_lm_data.valid_fraction = 0.2',
            "causal_lm.architecture = 'mixed'",
            'causal_lm_experiment.train_steps = 6',
            'causal_lm_experiment.steps_per_loop = 2',
            'causal_lm_experiment.checkpoint_interval = 4',
            'optimization.learning_rate = 1e-3',
        ],
    )
    params, settings = causal_lm.experiment_config()
    corpus = causal_lm.load_corpus(params.task.train_data)
    assert params.task.model.architecture == 'mixed'
    assert params.task.model.vocab_size == len(corpus.vocab)
    assert params.task.model.max_seq_length == 64
    assert params.trainer.validation_interval == 6
    assert params.trainer.checkpoint_interval == 4
    assert not settings.deterministic
    gin.parse_config('causal_lm_experiment.checkpoint_interval = 3')
    with pytest.raises(cli.UserError, match='multiple of'):
      causal_lm.experiment_config()
  finally:
    gin.clear_config()
