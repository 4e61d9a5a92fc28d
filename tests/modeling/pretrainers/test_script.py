"""SCRIPT model: the (V+1)-class critic, sampling, gradients, parameters."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import electra
from official_repro.modeling.pretrainers import script
from official_repro.tasks import masked_lm
from official_repro.tasks import script as script_task

_VOCAB = 30


def _encoder_config(backbone='bert'):
  return encoders.EncoderConfig(
      backbone=backbone,
      hidden_size=16,
      num_layers=2,
      num_attention_heads=2,
      intermediate_size=32,
      vocab_size=_VOCAB,
      max_position_embeddings=16,
      embedding_width=8,
      dropout_rate=0.0,
      attention_dropout_rate=0.0,
      options={'kernel_size': 3} if backbone == 'convbert' else {},
  )


def _batch():
  ids = np.arange(16, dtype=np.int32).reshape(2, 8) % 25 + 5
  mask = np.ones_like(ids)
  mask[1, 6:] = 0
  return dict(
      input_word_ids=ids,
      input_mask=mask,
      input_type_ids=np.zeros_like(ids),
      masked_lm_positions=np.array([[1, 2, 0], [3, 5, 0]], np.int32),
      masked_lm_ids=np.array([[7, 8, 0], [9, 10, 0]], np.int32),
      masked_lm_weights=np.array([[1, 1, 0], [1, 1, 0]], np.float32),
  )


def _log_softmax(x):
  x = x - x.max(axis=-1, keepdims=True)
  return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def test_critic_matches_a_softmax_over_v_plus_1_classes():
  logits = np.random.RandomState(0).normal(size=(3, 4, 7)).astype(np.float32)
  log_positive, log_negative = script.critic_log_probabilities(logits)
  # Brute force: V+1 classes, the last logit 0; t+ is any of the first V.
  augmented = np.concatenate([logits, np.zeros((3, 4, 1), np.float32)], -1)
  probabilities = np.exp(_log_softmax(augmented.astype(np.float64)))
  np.testing.assert_allclose(
      np.exp(log_positive), probabilities[..., :-1].sum(-1), rtol=1e-5
  )
  np.testing.assert_allclose(
      np.exp(log_negative), probabilities[..., -1], rtol=1e-5
  )


@pytest.mark.parametrize('scale', [1e4, -1e4])
def test_critic_is_stable_at_large_logits(scale):
  logits = tf.constant([[scale, 0.5 * scale, 0.0]], tf.float32)
  log_positive, log_negative = script.critic_log_probabilities(logits)
  assert np.all(np.isfinite(log_positive)) and np.all(np.isfinite(log_negative))
  if scale > 0:  # p(t+) = 1: log p(t-) = -1e4, log p(t+) ~ 0.
    np.testing.assert_allclose(log_negative, [-1e4], rtol=1e-6)
    np.testing.assert_allclose(log_positive, [0.0], atol=1e-6)
  else:  # sum exp(s) = 1 + 2 exp(-5e3) ~ 1 (s = 0 once): p(t+) = 1/2.
    np.testing.assert_allclose(log_positive, [np.log(0.5)], rtol=1e-6)
    np.testing.assert_allclose(log_negative, [np.log(0.5)], rtol=1e-6)


def test_only_masked_positions_are_replaced():
  model = script.ScriptPretrainer(_encoder_config())
  batch = _batch()
  outputs = model(batch, training=False)
  original = batch['input_word_ids'].copy()
  for row in range(2):
    original[row, batch['masked_lm_positions'][row, :2]] = batch[
        'masked_lm_ids'
    ][row, :2]
  critic_ids = outputs['critic_ids'].numpy()
  changed = critic_ids != original
  masked = np.zeros_like(changed)
  masked[[0, 0, 1, 1], [1, 2, 3, 5]] = True
  assert not np.any(changed & ~masked)
  np.testing.assert_array_equal(
      critic_ids[[0, 0, 1, 1], [1, 2, 3, 5]],
      outputs['sampled_ids'].numpy()[:, :2].reshape(-1),
  )
  # Negative = replaced and different; a sample equal to the original is
  # positive.
  np.testing.assert_array_equal(
      outputs['rtd_labels'].numpy(), changed & (batch['input_mask'] > 0)
  )


def _critic_loss(model, batch, outputs):
  return script_task.critic_loss(
      outputs['rtd_labels'],
      outputs['critic_log_positive'],
      outputs['critic_log_negative'],
      batch['input_mask'],
  )


@pytest.mark.parametrize('straight_through', [False, True])
def test_critic_loss_reaches_output_layer_and_encoder(straight_through):
  model = script.ScriptPretrainer(
      _encoder_config(), straight_through=straight_through
  )
  batch = _batch()
  with tf.GradientTape() as tape:
    loss = _critic_loss(model, batch, model(batch, training=True))
  variables = dict(
      bias=model.masked_lm.bias,
      table=model.encoder.get_embedding_table(),
      block=model.encoder.transformer_layers[0].trainable_variables[0],
      transform=model.masked_lm.dense.kernel,
  )
  gradients = tape.gradient(loss, list(variables.values()))
  for name, gradient in zip(variables, gradients):
    assert gradient is not None, name
    assert np.abs(tf.convert_to_tensor(gradient).numpy()).sum() > 0, name


def test_no_gradient_reaches_the_sample_by_default():
  model = script.ScriptPretrainer(_encoder_config())
  logits = tf.Variable(tf.random.normal([2, 3, _VOCAB]))
  with tf.GradientTape() as tape:
    ids, one_hot = model.sample_replacements(logits)
    assert one_hot is None
    proxy = tf.reduce_sum(tf.cast(ids, tf.float32))
  assert tape.gradient(proxy, logits) is None


def test_straight_through_is_exact_forward_and_reaches_pass_1():
  model = script.ScriptPretrainer(
      _encoder_config(), straight_through=True, temperature=0.5
  )
  batch = _batch()
  logits = tf.Variable(tf.random.normal([2, 3, _VOCAB]))
  with tf.GradientTape() as tape:
    sampled, one_hot = model.sample_replacements(logits)
    np.testing.assert_array_equal(tf.argmax(one_hot, -1), sampled)
    critic_ids, _ = electra.ElectraPretrainer.corrupt(batch, sampled)
    soft = model.critic_logits(critic_ids, batch, one_hot, training=False)
    proxy = tf.reduce_sum(script.critic_log_probabilities(soft)[0])
  lookup = model.critic_logits(critic_ids, batch, None, training=False)
  np.testing.assert_allclose(soft.numpy(), lookup.numpy(), atol=1e-5)
  gradient = tape.gradient(proxy, logits)
  assert gradient is not None
  # Only the real (weight 1) prediction slots feed pass 2.
  assert np.abs(gradient.numpy()[:, :2]).sum() > 0
  np.testing.assert_array_equal(gradient.numpy()[:, 2], 0.0)


def test_initial_positive_probability_is_the_critic_prior_at_every_token():
  batch = _batch()
  tf_keras.utils.set_random_seed(3)
  default = script.ScriptPretrainer(_encoder_config())
  default(batch)
  tf_keras.utils.set_random_seed(3)
  model = script.ScriptPretrainer(
      _encoder_config(), initial_positive_probability=0.85
  )
  model(batch)
  # The bias is the closed form logit(0.85) - log V, at every token id.
  np.testing.assert_allclose(
      model.masked_lm.bias.numpy(),
      np.full(_VOCAB, np.log(0.85 / 0.15) - np.log(_VOCAB)),
      rtol=1e-6,
  )
  np.testing.assert_array_equal(default.masked_lm.bias.numpy(), 0.0)
  # Every other weight is initialized as without the option (same seed).
  assert len(model.weights) == len(default.weights)
  for mine, theirs in zip(model.weights, default.weights):
    if mine is not model.masked_lm.bias:
      np.testing.assert_array_equal(mine.numpy(), theirs.numpy(), mine.name)

  # Brute force over V+1 classes: p(t+) is about 0.85 wherever the token
  # scores are near 0, as they are at initialization; the default is near
  # 1 - 1/V.
  def positive_probability(pretrainer):
    logits = pretrainer.token_logits(
        batch['input_word_ids'], batch['input_mask'], batch['input_type_ids']
    ).numpy()
    augmented = np.concatenate(
        [logits, np.zeros(logits.shape[:-1] + (1,))], -1
    ).astype(np.float64)
    return 1.0 - np.exp(_log_softmax(augmented))[..., -1]

  np.testing.assert_allclose(positive_probability(model), 0.85, atol=0.01)
  assert np.all(positive_probability(default) > 1.0 - 1.5 / _VOCAB)
  # So at initialization the masked-LM distribution is the default's.
  tensors = {name: tf.constant(value) for name, value in batch.items()}
  np.testing.assert_allclose(
      _log_softmax(model.mlm_logits(tensors, training=False).numpy()),
      _log_softmax(default.mlm_logits(tensors, training=False).numpy()),
      atol=1e-5,
  )


def test_initial_positive_probability_fails_loudly_if_the_bias_is_renamed(
    monkeypatch,
):
  # As if Model Garden's MaskedLM named its output bias differently.
  monkeypatch.setattr(
      script._MaskedLMWithOutputBias, '_BIAS_NAME', 'renamed/bias'
  )
  model = script.ScriptPretrainer(
      _encoder_config(), initial_positive_probability=0.85
  )
  with pytest.raises(RuntimeError, match='no weight named'):
    model(_batch())
  script.ScriptPretrainer(_encoder_config())(_batch())  # The default builds.


@pytest.mark.parametrize('probability', [0.0, 1.0, 1.5])
def test_initial_positive_probability_outside_0_1_is_rejected(probability):
  with pytest.raises(
      ValueError,
      match='^ScriptPretrainer: initial_positive_probability must be in',
  ):
    script.ScriptPretrainer(
        _encoder_config(), initial_positive_probability=probability
    )


def test_temperature_without_straight_through_is_rejected():
  with pytest.raises(
      ValueError,
      match='^ScriptPretrainer: temperature = 0.5 has no effect without '
      'straight_through = True',
  ):
    script.ScriptPretrainer(_encoder_config(), temperature=0.5)


@pytest.mark.slow
@pytest.mark.parametrize(
    'backbone,initial_positive_probability',
    [('bert', None), ('convbert', None), ('bert', 0.85)],
)
def test_parameters_equal_the_same_size_bert_masked_lm(
    backbone, initial_positive_probability
):
  config = _encoder_config(backbone)
  script_model = script_task.ScriptPretrainTask(
      script_task.ScriptPretrainConfig(
          model=script_task.ScriptModelConfig(
              encoder=config,
              initial_positive_probability=initial_positive_probability,
          )
      )
  ).build_model()
  bert_model = masked_lm.MaskedLMPretrainTask(
      masked_lm.MaskedLMPretrainConfig(
          model=masked_lm.MaskedLMModelConfig(encoder=config)
      )
  ).build_model()
  batch = _batch()
  script_model(batch)
  bert_model(batch)

  # Both hold the same encoder (its pooler included, unused by either
  # without next-sentence prediction) and Model Garden's MaskedLM head.
  def shapes(model):
    return sorted(
        (v.name.split('/', 1)[-1], tuple(v.shape)) for v in model.weights
    )

  assert shapes(script_model) == shapes(bert_model)
  assert script_model.count_params() == bert_model.count_params()
  assert set(script_model.checkpoint_items) == set(bert_model.checkpoint_items)


def test_pseudo_log_likelihood_is_the_sum_of_log_p_positive():
  model = script.ScriptPretrainer(_encoder_config())
  batch = _batch()
  scored = batch['input_mask'].copy()
  scored[:, 0] = 0
  pll = model.pseudo_log_likelihood(
      batch['input_word_ids'],
      batch['input_mask'],
      batch['input_type_ids'],
      scored,
  ).numpy()
  logits = model.token_logits(
      batch['input_word_ids'], batch['input_mask'], batch['input_type_ids']
  ).numpy()
  expected = np.zeros(2)
  for row in range(2):
    for position in range(8):
      if scored[row, position]:
        s = logits[row, position].astype(np.float64)
        expected[row] += np.log(np.exp(s).sum()) - np.log(np.exp(s).sum() + 1.0)
  np.testing.assert_allclose(pll, expected, rtol=1e-5)
