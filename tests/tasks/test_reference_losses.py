"""The losses as the reference code and the papers define them.

Each objective's model and task run one step on a tiny batch (padding,
padded prediction slots, a kept and a randomly replaced token, a sample
equal to its original), and every loss term is recomputed here in float64
numpy from the model's own logits and the raw batch, by the definitions of
google-research/electra (its `pretrain_helpers.py` and `run_pretraining.py`)
and of 004 (SCRIPT, equations cited by number), never by our loss code:

* the generator's cross-entropy averaged over the real masked positions;
* the replaced-token sigmoid cross-entropy averaged over the real
  (non-padding) tokens, labelled "masked and changed" (a sample equal to the
  original is labelled original);
* the total, generator weight 1 plus lambda = 50 times the RTD loss;
* the replacement drawn from softmax(logits / T) (001 samples at T = 0.8),
  with no gradient from the discriminator's loss into the generator;
* SCRIPT's (V+1)-class critic (004 Eq. 4-6) and its one-pass
  pseudo-log-likelihood (Eq. 7), from logits s_t = W e_t (Eq. 2) computed
  here from the encoder's output.

The ELECTRA tests run on BERT, ALBERT (001's ALE, tied ALBERT networks) and
ConvBERT (002): settings Model Garden's ELECTRA does not have, so the
reference here is the formula (`test_model_garden_parity.py` compares BERT
with Model Garden's tasks).
"""

from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import sampling
from official_repro.tasks import electra
from official_repro.tasks import script

_VOCAB = 40
_MASK_ID = 4


def _encoder(backbone='bert', **overrides) -> encoders.EncoderConfig:
  settings = dict(
      backbone=backbone,
      hidden_size=32,
      num_layers=2,
      num_attention_heads=4,
      intermediate_size=64,
      embedding_width=16,
      vocab_size=_VOCAB,
      max_position_embeddings=16,
      dropout_rate=0.0,
      attention_dropout_rate=0.0,
      options=dict(kernel_size=3) if backbone == 'convbert' else {},
  )
  settings.update(overrides)
  return encoders.validate(encoders.EncoderConfig(**settings))


def _batch():
  """Row 1 is padded from position 7, row 2 from 5; slots padded in both.

  Position 3 of row 0 keeps its token and position 4 of row 1 shows a
  random one (80/10/10); the other chosen positions show [MASK].
  """
  rng = np.random.RandomState(4)
  ids = rng.randint(5, _VOCAB, (3, 10)).astype(np.int32)
  ids[:, 0] = 2
  input_mask = np.ones((3, 10), np.int32)
  input_mask[1, 7:] = 0
  input_mask[2, 5:] = 0
  ids[input_mask == 0] = 0
  positions = np.array([[1, 3, 6], [2, 4, 0], [1, 3, 0]], np.int32)
  weights = np.array([[1, 1, 1], [1, 1, 0], [1, 1, 0]], np.float32)
  original = np.take_along_axis(ids, positions, 1) * weights.astype(np.int32)
  masked = ids.copy()
  for row, slot in zip(*np.nonzero(weights)):
    masked[row, positions[row, slot]] = _MASK_ID
  masked[0, 3] = ids[0, 3]
  masked[1, 4] = 5 if ids[1, 4] != 5 else 6
  return dict(
      input_word_ids=tf.constant(masked),
      input_mask=tf.constant(input_mask),
      input_type_ids=tf.zeros((3, 10), tf.int32),
      masked_lm_positions=tf.constant(positions),
      masked_lm_ids=tf.constant(original),
      masked_lm_weights=tf.constant(weights),
  )


def _samples(batch) -> np.ndarray:
  """Replacements: slot (0, 0) draws its original, the others do not."""
  original = batch['masked_lm_ids'].numpy()
  samples = np.where(original + 1 < _VOCAB, original + 1, 5)
  samples[0, 0] = original[0, 0]
  return samples.astype(np.int32)


def _log_softmax(x: np.ndarray) -> np.ndarray:
  x = x.astype(np.float64)
  x = x - x.max(axis=-1, keepdims=True)
  return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def _reference_mlm_loss(mlm_logits, batch) -> float:
  """Mean over real masked slots of -log p(original)."""
  log_p = _log_softmax(np.asarray(mlm_logits))
  original = batch['masked_lm_ids'].numpy()
  weights = batch['masked_lm_weights'].numpy()
  total, count = 0.0, 0.0
  for row, slot in zip(*np.nonzero(weights)):
    total -= log_p[row, slot, original[row, slot]]
    count += 1
  return total / count


def _reference_labels(batch, samples) -> np.ndarray:
  """1 at a masked position whose sample is not its original."""
  positions = batch['masked_lm_positions'].numpy()
  original = batch['masked_lm_ids'].numpy()
  weights = batch['masked_lm_weights'].numpy()
  labels = np.zeros(batch['input_word_ids'].shape, np.int32)
  for row, slot in zip(*np.nonzero(weights)):
    if samples[row, slot] != original[row, slot]:
      labels[row, positions[row, slot]] = 1
  return labels


def _reference_rtd_loss(rtd_logits, labels, batch) -> float:
  """Mean over real tokens of -[y log sigmoid(z) + (1-y) log sigmoid(-z)]."""
  z = np.asarray(rtd_logits, np.float64)
  real = batch['input_mask'].numpy()
  total = 0.0
  for row, position in zip(*np.nonzero(real)):
    p = 1.0 / (1.0 + np.exp(-z[row, position]))
    y = labels[row, position]
    total -= y * np.log(p) + (1 - y) * np.log(1.0 - p)
  return total / real.sum()


def _electra_task(backbone, temperature, rtd_loss_weight=50.0):
  return electra.ElectraPretrainTask(
      electra.ElectraPretrainConfig(
          model=electra.ElectraModelConfig(
              discriminator=_encoder(backbone),
              generator_size=0.5,
              temperature=temperature,
              generator_loss_weight=1.0,
              rtd_loss_weight=rtd_loss_weight,
          )
      )
  )


@pytest.mark.parametrize(
    'backbone, temperature',
    [('bert', 1.0), ('albert', 0.8), ('convbert', 0.8)],
)
def test_electra_losses_are_the_reference_definitions(backbone, temperature):
  task = _electra_task(backbone, temperature)
  model = task.build_model()
  batch = _batch()
  samples = _samples(batch)
  asked = {}

  def sampler(logits, temperature=1.0, disallowed_ids=None, seed=None):
    del seed
    asked.update(
        logits=logits.numpy(), temperature=temperature, excluded=disallowed_ids
    )
    return tf.constant(samples)

  with mock.patch.object(sampling, 'sample_from_logits', sampler):
    outputs = task.model_outputs(model, batch, training=True)
  metrics = task.build_metrics()
  total = float(task.build_losses(batch, outputs, metrics))
  by_name = {m.name: float(m.result()) for m in metrics}

  np.testing.assert_allclose(asked['logits'], outputs['mlm_logits'], rtol=1e-6)
  assert asked['temperature'] == temperature and asked['excluded'] is None
  labels = _reference_labels(batch, samples)
  np.testing.assert_array_equal(outputs['rtd_labels'], labels)
  mlm = _reference_mlm_loss(outputs['mlm_logits'], batch)
  rtd = _reference_rtd_loss(outputs['rtd_logits'], labels, batch)
  np.testing.assert_allclose(by_name['lm_example_loss'], mlm, rtol=1e-5)
  np.testing.assert_allclose(by_name['rtd_loss'], rtd, rtol=1e-5)
  np.testing.assert_allclose(total, mlm + 50.0 * rtd, rtol=1e-5)


def _chi_square(counts: np.ndarray, probabilities: np.ndarray) -> float:
  expected = probabilities * counts.sum()
  return float(((counts - expected) ** 2 / expected).sum())


@pytest.mark.parametrize('temperature', [0.8, 2.0])
def test_replacements_are_drawn_from_the_tempered_softmax(temperature):
  """The task config's T reaches the draw: softmax(logits / T), not T = 1.

  The global seed makes the draw, and so the test, deterministic.
  """
  tf.random.set_seed(7)
  model = _electra_task('bert', temperature).build_model()
  logits = np.array([2.0, 1.0, 0.5, 0.0, -1.0, -3.0], np.float32)
  draws = 30000
  sampled = model.sample_replacements(
      tf.constant(np.tile(logits, (draws, 1, 1))),
      dict(masked_lm_ids=tf.zeros((draws, 1), tf.int32)),
      training=True,
  ).numpy()
  counts = np.bincount(sampled.ravel(), minlength=len(logits))
  tempered = np.exp(_log_softmax(logits / temperature))
  untempered = np.exp(_log_softmax(logits))
  # 5 degrees of freedom: 20.5 is the 0.999 quantile.
  assert _chi_square(counts, tempered) < 20.5
  assert _chi_square(counts, untempered) > 200.0


def test_the_discriminator_loss_does_not_reach_the_generator():
  """Replacements are drawn under stop-gradient: L_RTD trains no generator.

  The shared word-embedding table gets gradients from both losses; every
  variable that is the generator's alone (its blocks, position and type
  tables, the MLM head) gets none from the RTD loss, and every variable
  that is the discriminator's alone none from the MLM loss.
  """
  task = _electra_task('bert', 1.0)
  model = task.build_model()
  batch = _batch()
  model(batch, training=True)
  with tf.GradientTape(persistent=True) as tape:
    outputs = task.model_outputs(model, batch, training=True)
    mlm = _mlm_loss(outputs, batch)
    rtd = tf.reduce_mean(
        tf.nn.sigmoid_cross_entropy_with_logits(
            tf.cast(outputs['rtd_labels'], tf.float32), outputs['rtd_logits']
        )
    )
  table = model.discriminator.get_embedding_table()
  generator_only = [
      v
      for v in model.generator.trainable_variables
      + model.mlm_head.trainable_variables
      if v is not table and 'pooler' not in v.name
  ]
  discriminator_only = [
      v
      for v in model.discriminator.trainable_variables
      + model.rtd_head.trainable_variables
      if v is not table and 'pooler' not in v.name
  ]
  assert generator_only and discriminator_only
  assert all(g is None for g in tape.gradient(rtd, generator_only))
  assert all(g is None for g in tape.gradient(mlm, discriminator_only))
  assert tape.gradient(rtd, table) is not None
  assert tape.gradient(mlm, table) is not None


def _mlm_loss(outputs, batch) -> tf.Tensor:
  losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
      batch['masked_lm_ids'], outputs['mlm_logits']
  )
  return tf.reduce_sum(losses * batch['masked_lm_weights'])


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
  return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def _reference_token_logits(model, word_ids, batch) -> np.ndarray:
  """004 Eq. 2, s_t = W e_t, in numpy from the encoder's output e_t.

  W is the MLM output layer: dense + GELU + LayerNorm, then the tied
  word-embedding table and the output bias (BERT's `MaskedLM`).
  """
  sequence = (
      model.encoder(
          dict(
              input_word_ids=word_ids,
              input_mask=batch['input_mask'],
              input_type_ids=batch['input_type_ids'],
          ),
          training=False,
      )['sequence_output']
      .numpy()
      .astype(np.float64)
  )
  head = model.masked_lm
  kernel, bias = (w.numpy() for w in head.dense.weights)
  gamma, beta = (w.numpy() for w in head.layer_norm.weights)
  hidden = _gelu_tanh(sequence @ kernel + bias)
  mean = hidden.mean(-1, keepdims=True)
  variance = hidden.var(-1, keepdims=True)
  hidden = (hidden - mean) / np.sqrt(variance + head.layer_norm.epsilon)
  hidden = hidden * gamma + beta
  table = model.encoder.get_embedding_table().numpy()
  return hidden @ table.T + head.bias.numpy()


def _v_plus_1_positive_probability(s: np.ndarray) -> np.ndarray:
  """004 Eq. 5 by brute force: V+1 classes, the extra logit 0 (Eq. 4)."""
  augmented = np.concatenate([s, np.zeros(s.shape[:-1] + (1,))], axis=-1)
  probabilities = np.exp(_log_softmax(augmented))
  return probabilities[..., :-1].sum(-1)


def _script_task(critic_loss_weight=50.0):
  return script.ScriptPretrainTask(
      script.ScriptPretrainConfig(
          model=script.ScriptModelConfig(
              encoder=_encoder(embedding_width=None),
              critic_loss_weight=critic_loss_weight,
              initial_positive_probability=0.85,
          )
      )
  )


def test_script_critic_loss_is_004_eq_6_over_v_plus_1_classes():
  """L = L_MLM + alpha L_Disc (Sec. 2), L_Disc by Eq. 4-6 over real tokens.

  The critic pass reads x- (the samples written at the masked positions);
  a token is positive (t+) where x-_t = x_t, including a sample equal to its
  original, negative (t-) elsewhere; Eq. 6 is averaged over the real
  tokens as ELECTRA averages its loss.
  """
  task = _script_task()
  model = task.build_model()
  batch = _batch()
  samples = _samples(batch)
  with mock.patch.object(
      type(model),
      'sample_replacements',
      lambda self, logits, seed=None, training=None: (
          tf.constant(samples),
          None,
      ),
  ):
    outputs = task.model_outputs(model, batch, training=True)
  metrics = task.build_metrics()
  total = float(task.build_losses(batch, outputs, metrics))
  by_name = {m.name: float(m.result()) for m in metrics}

  labels = _reference_labels(batch, samples)
  np.testing.assert_array_equal(outputs['rtd_labels'], labels)
  critic_input = batch['input_word_ids'].numpy().copy()
  positions = batch['masked_lm_positions'].numpy()
  original = batch['masked_lm_ids'].numpy()
  for row, slot in zip(*np.nonzero(batch['masked_lm_weights'].numpy())):
    critic_input[row, positions[row, slot]] = samples[row, slot]
  np.testing.assert_array_equal(outputs['critic_ids'], critic_input)
  np.testing.assert_array_equal(
      critic_input[labels == 1] != 0, True
  )  # negatives are real tokens
  s = _reference_token_logits(model, tf.constant(critic_input), batch)
  positive = _v_plus_1_positive_probability(s)
  real = batch['input_mask'].numpy()
  disc = 0.0
  for row, position in zip(*np.nonzero(real)):
    p = positive[row, position]
    disc -= np.log(1 - p) if labels[row, position] else np.log(p)
  disc /= real.sum()
  mlm_logits = _reference_token_logits(model, batch['input_word_ids'], batch)[
      np.arange(3)[:, None], positions
  ]
  mlm = _reference_mlm_loss(mlm_logits, batch)
  assert original[0, 0] == samples[0, 0] and labels[0, positions[0, 0]] == 0
  np.testing.assert_allclose(by_name['lm_example_loss'], mlm, rtol=1e-5)
  np.testing.assert_allclose(by_name['critic_loss'], disc, rtol=1e-5)
  np.testing.assert_allclose(total, mlm + 50.0 * disc, rtol=1e-5)


def test_script_pseudo_log_likelihood_is_004_eq_7():
  """PLL(x) = sum over scored tokens of log p(t+ | x), one pass, unmasked x."""
  model = _script_task().build_model()
  batch = _batch()
  ids = batch['input_word_ids'].numpy().copy()
  for row, slot in zip(*np.nonzero(batch['masked_lm_weights'].numpy())):
    position = batch['masked_lm_positions'].numpy()[row, slot]
    ids[row, position] = batch['masked_lm_ids'].numpy()[row, slot]
  scored = batch['input_mask'].numpy().copy()
  scored[:, 0] = 0  # [CLS] is not scored
  pll = model.pseudo_log_likelihood(
      tf.constant(ids), batch['input_mask'], batch['input_type_ids'], scored
  ).numpy()
  positive = _v_plus_1_positive_probability(
      _reference_token_logits(model, tf.constant(ids), batch)
  )
  expected = [
      sum(
          np.log(positive[row, t])
          for t in range(ids.shape[1])
          if scored[row, t]
      )
      for row in range(3)
  ]
  np.testing.assert_allclose(pll, expected, rtol=1e-5)
