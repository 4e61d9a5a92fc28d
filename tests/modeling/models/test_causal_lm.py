"""Tests for the causal language model (transformer and mixed attention)."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from official.nlp.modeling import layers
from official_repro.modeling.layers import mixed_attention
from official_repro.modeling.models import causal_lm

_VOCAB = 40


def _model(architecture, embedding_width=16, **kwargs):
  tf_keras.utils.set_random_seed(0)
  options = dict(
      vocab_size=_VOCAB,
      architecture=architecture,
      hidden_size=32,
      num_layers=2,
      num_attention_heads=4,
      intermediate_size=64,
      max_seq_length=16,
      embedding_width=embedding_width,
      kernel_size=3,
      dropout_rate=0.0,
      attention_dropout_rate=0.0,
  )
  options.update(kwargs)
  return causal_lm.CausalLM(**options)


@pytest.mark.parametrize('architecture', causal_lm.ARCHITECTURES)
def test_output_does_not_depend_on_future_tokens(architecture):
  model = _model(architecture)
  rng = np.random.default_rng(1)
  tokens = rng.integers(0, _VOCAB, size=[2, 12]).astype(np.int32)
  logits = model(tokens).numpy()
  assert logits.shape == (2, 12, _VOCAB)
  for t in (0, 5, 10):
    changed = tokens.copy()
    changed[:, t + 1 :] = (changed[:, t + 1 :] + 7) % _VOCAB
    other = model(changed).numpy()
    np.testing.assert_allclose(other[:, : t + 1], logits[:, : t + 1], atol=1e-5)
    assert np.abs(other[:, t + 1 :] - logits[:, t + 1 :]).max() > 1e-4


@pytest.mark.parametrize('architecture', causal_lm.ARCHITECTURES)
def test_blocks_and_tied_output(architecture):
  model = _model(architecture)
  model(tf.zeros([1, 4], tf.int32))
  expected = (
      layers.TransformerEncoderBlock
      if architecture == 'transformer'
      else mixed_attention.ConvBertBlock
  )
  blocks = [b for b in model.layers if isinstance(b, expected)]
  assert len(blocks) == 2
  if architecture == 'mixed':
    assert blocks[0].attention_layer.num_self_attention_heads == 2
  # One [V, E] table serves input and output; projections since E != H.
  tables = [v for v in model.trainable_variables if v.shape == (_VOCAB, 16)]
  assert len(tables) == 1
  names = ' '.join(v.name for v in model.trainable_variables)
  assert 'embedding_projection' in names and 'output_projection' in names
  assert model.output_bias.shape == (_VOCAB,)
  tokens = tf.zeros([1, 4], tf.int32)
  before = model(tokens).numpy()
  bias = np.arange(_VOCAB, dtype=np.float32)
  model.output_bias.assign(bias)
  np.testing.assert_allclose(
      model(tokens).numpy() - before,
      np.broadcast_to(bias, before.shape),
      atol=1e-4,
  )


def test_no_projection_when_widths_match():
  model = _model('transformer', embedding_width=None)
  model(tf.zeros([1, 4], tf.int32))
  names = ' '.join(v.name for v in model.trainable_variables)
  assert 'projection' not in names
  assert model.word_embeddings.shape == (_VOCAB, 32)


def test_mixed_has_fewer_parameters_at_head_ratio_2():
  sizes = dict(hidden_size=64, embedding_width=None, kernel_size=9)
  counts = {}
  for architecture in causal_lm.ARCHITECTURES:
    model = _model(architecture, **sizes)
    model(tf.zeros([1, 2], tf.int32))
    counts[architecture] = model.count_params()
  assert counts['mixed'] < counts['transformer']


def test_sequence_nll_weights():
  logits = tf.zeros([1, 3, 4])
  tokens = tf.constant([[0, 1, 2, 3]])
  nll = causal_lm.sequence_nll(logits, tokens, tf.constant([[1.0, 1.0, 0.0]]))
  np.testing.assert_allclose(nll.numpy(), 2 * np.log(4.0), rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize('architecture', causal_lm.ARCHITECTURES)
def test_loss_decreases_on_a_repeated_sequence(architecture):
  model = _model(architecture)
  optimizer = tf_keras.optimizers.legacy.Adam(1e-2)
  tokens = tf.constant(np.tile(np.arange(9) % 5, [2, 1]), tf.int32)
  weights = tf.ones([2, 8])

  @tf.function
  def step():
    with tf.GradientTape() as tape:
      loss = (
          causal_lm.sequence_nll(
              model(tokens[:, :-1], training=True), tokens, weights
          )
          / 16.0
      )
    variables = model.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return loss

  losses = [float(step()) for _ in range(20)]
  assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize('architecture', causal_lm.ARCHITECTURES)
def test_config_round_trip(architecture):
  model = _model(architecture, num_groups=2)
  config = model.get_config()
  clone = causal_lm.CausalLM.from_config(config)
  assert clone.get_config() == config
  assert (config['architecture'], config['num_groups']) == (architecture, 2)
  token_ids = tf.constant(
      np.random.default_rng(0).integers(0, _VOCAB, (2, 8)), tf.int32
  )
  logits = model(token_ids)
  clone(token_ids)
  assert [w.shape for w in clone.weights] == [w.shape for w in model.weights]
  clone.set_weights(model.get_weights())
  np.testing.assert_allclose(
      clone(token_ids).numpy(), logits.numpy(), rtol=1e-5, atol=1e-6
  )
  restored = tf_keras.utils.deserialize_keras_object(
      tf_keras.utils.serialize_keras_object(model)
  )
  assert isinstance(restored, causal_lm.CausalLM)
  assert restored.get_config() == config
  assert [w.shape for w in restored.weights] == [w.shape for w in model.weights]


def test_bad_sizes():
  with pytest.raises(ValueError, match='architecture must be one of'):
    _model('lstm')
  with pytest.raises(ValueError, match='num_layers'):
    _model('transformer', num_layers=0)
