"""One training step of ours equals one of Model Garden's stock tasks.

For masked LM (`BertPretrainerV2` + `MaskedLMTask`), ELECTRA
(`ElectraPretrainer` + `ElectraPretrainTask`, with and without
`disallow_correct`) and TEAMS (`official.projects.teams`' `TeamsPretrainer`
+ `TeamsPretrainTask`), the stock task is built from our task config by the
objective's `stock_task_config` (the mapping the benchmark and the
dynamics-parity runs use), and both get:

* the same weights: ours are set to distinct random values (LayerNorm
  scales and biases included, so that no two variables are equal by
  chance) and written into Model Garden's networks, each encoder through a
  checkpoint (ours restore into its `BertEncoder`), TEAMS' `EncoderScaffold`
  layer by layer, the heads with `set_weights`. Which of our variables each
  of its variables is, is then found by value, not by a name map: each must
  equal exactly one of ours, except where a test names a difference;
* the same batch, with padding and padded prediction slots;
* the same sampled replacements (and TEAMS negatives): each side's sampler
  is replaced by one that records what it was asked (the generator's
  logits, the ids to exclude) and returns fixed ids. The samplers
  themselves are tested against the distributions they draw from in
  `tests/modeling/pretrainers/test_sampling.py` and `test_reference_losses.py`;
* no dropout (its masks cannot be shared).

Then every loss term, the total, and the gradient of the total with respect
to every variable agree within 1e-5, relative to the gradient's norm.
Attention key biases have an exact gradient of 0 (adding a constant to every
score of a softmax row changes nothing), so for them both sides must be
below 1e-6 of the whole gradient's norm instead.
"""

import os
from typing import Dict, List, Sequence
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

from official.core import task_factory
from official.nlp.data import pretrain_dataloader as stock_dataloader
from official.nlp.modeling.models import electra_pretrainer as stock_electra
from official.projects.teams import teams_pretrainer as stock_teams
from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import sampling
from official_repro.tasks import electra
from official_repro.tasks import masked_lm
from official_repro.tasks import teams

_VOCAB = 50
_BATCH, _SEQ, _PREDICTIONS = 3, 12, 4
_MASK_ID = 4
_RTOL = 1e-5


def _encoder(**overrides) -> encoders.EncoderConfig:
  settings = dict(
      hidden_size=32,
      num_layers=2,
      num_attention_heads=4,
      intermediate_size=64,
      embedding_width=16,
      vocab_size=_VOCAB,
      max_position_embeddings=16,
      dropout_rate=0.0,
      attention_dropout_rate=0.0,
      hidden_activation='gelu_tanh',
  )
  settings.update(overrides)
  return encoders.validate(encoders.EncoderConfig(**settings))


def _batch() -> Dict[str, tf.Tensor]:
  """Masked ids with padding (rows 1, 2) and padded slots (rows 0, 1).

  Position 3 of row 0 keeps its token and position 2 of row 2 shows a
  random one, as 80/10/10 masking does; the rest show [MASK].
  """
  rng = np.random.RandomState(0)
  ids = rng.randint(5, _VOCAB, (_BATCH, _SEQ)).astype(np.int32)
  ids[:, 0] = 2
  input_mask = np.ones((_BATCH, _SEQ), np.int32)
  input_mask[1, 9:] = 0
  input_mask[2, 6:] = 0
  ids[input_mask == 0] = 0
  positions = np.array([[1, 3, 5, 0], [2, 4, 0, 0], [1, 2, 3, 4]], np.int32)
  weights = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], np.float32)
  original = np.take_along_axis(ids, positions, 1) * weights.astype(np.int32)
  masked = ids.copy()
  for row, slot in zip(*np.nonzero(weights)):
    masked[row, positions[row, slot]] = _MASK_ID
  masked[0, 3] = ids[0, 3]
  masked[2, 2] = 7 if ids[2, 2] != 7 else 8
  return dict(
      input_word_ids=tf.constant(masked),
      input_mask=tf.constant(input_mask),
      input_type_ids=tf.constant((np.arange(_SEQ) >= 7).astype(np.int32)[None])
      * tf.constant(input_mask),
      masked_lm_positions=tf.constant(positions),
      masked_lm_ids=tf.constant(original),
      masked_lm_weights=tf.constant(weights),
  )


def _replacements(batch, allow_original: bool) -> np.ndarray:
  """Fixed samples `[B, P]`; one equals the original where that may happen."""
  original = batch['masked_lm_ids'].numpy()
  samples = (original + 1 + np.arange(_PREDICTIONS)) % (_VOCAB - 5) + 5
  samples[samples == original] = 6
  if allow_original:
    samples[0, 1] = original[0, 1]
    samples[2, 0] = original[2, 0]
  return samples.astype(np.int32)


def _expected_labels(batch, samples) -> np.ndarray:
  """1 where a real slot's sample differs from its original, by a loop."""
  labels = np.zeros((_BATCH, _SEQ), np.int32)
  positions = batch['masked_lm_positions'].numpy()
  original = batch['masked_lm_ids'].numpy()
  weights = batch['masked_lm_weights'].numpy()
  for row in range(_BATCH):
    for slot in range(_PREDICTIONS):
      if weights[row, slot] and samples[row, slot] != original[row, slot]:
        labels[row, positions[row, slot]] = 1
  return labels


def _stock_task(objective, task_config):
  train_data = stock_dataloader.BertPretrainDataConfig(
      seq_length=_SEQ,
      max_predictions_per_seq=_PREDICTIONS,
      global_batch_size=_BATCH,
      use_next_sentence_label=False,
  )
  return task_factory.get_task(
      objective.stock_task_config(task_config, train_data, _PREDICTIONS)
  )


def _randomize(model: tf.keras.Model, seed: int) -> None:
  """Distinct values in every variable: LayerNorm scales around 1."""
  rng = np.random.RandomState(seed)
  for variable in model.variables:
    values = rng.normal(0.0, 0.3, variable.shape)
    if 'gamma' in variable.name:
      values += 1.0
    variable.assign(values.astype(variable.dtype.as_numpy_dtype))


def _copy_encoder(ours, theirs, directory: str) -> None:
  """Ours into Model Garden's `BertEncoder` through a checkpoint."""
  path = tf.train.Checkpoint(encoder=ours).write(
      os.path.join(directory, f'encoder_{id(ours)}')
  )
  tf.train.Checkpoint(encoder=theirs).read(
      path
  ).assert_existing_objects_matched()


def _copy_encoder_into_scaffold(ours, scaffold) -> None:
  """Ours into Model Garden's `EncoderScaffold` (TEAMS), layer by layer."""
  embedding = scaffold.embedding_network
  for layer, name in (
      (ours.get_embedding_layer(), 'word_embeddings'),
      (ours._position_embedding_layer, 'position_embedding'),  # pylint: disable=protected-access
      (ours._type_embedding_layer, 'type_embeddings'),  # pylint: disable=protected-access
      (ours._embedding_norm_layer, 'embeddings/layer_norm'),  # pylint: disable=protected-access
  ):
    embedding.get_layer(name).set_weights(layer.get_weights())
  for block, theirs in zip(ours.transformer_layers, scaffold.hidden_layers):
    theirs.set_weights(block.get_weights())


def _dense(gradient) -> np.ndarray:
  return tf.convert_to_tensor(gradient).numpy()


def _equal_by_value(variable, candidates) -> List[tf.Variable]:
  value = variable.numpy()
  return [
      c
      for c in candidates
      if c.shape == variable.shape and np.array_equal(c.numpy(), value)
  ]


def assert_same_step(
    stock_variables: Sequence[tf.Variable],
    stock_gradients: Sequence,
    ours_variables: Sequence[tf.Variable],
    ours_gradients: Sequence,
    unused_stock: Sequence[str] = (),
    tied_in_stock: Sequence[str] = (),
) -> int:
  """Checks the gradients variable by variable; returns the pairs compared.

  Args:
    stock_variables: Model Garden's trainable variables, and
    stock_gradients: their gradients.
    ours_variables: ours, and
    ours_gradients: theirs.
    unused_stock: name fragments of Model Garden variables ours do not have
      and that get no gradient.
    tied_in_stock: name fragments of Model Garden variables that are one
      variable there and two equal ones here: its gradient is the sum of
      ours.
  """
  ours_gradient = {id(v): g for v, g in zip(ours_variables, ours_gradients)}
  norm = np.sqrt(
      sum(np.sum(_dense(g) ** 2) for g in stock_gradients if g is not None)
  )
  matched = set()
  compared = 0
  for variable, gradient in zip(stock_variables, stock_gradients):
    twins = _equal_by_value(variable, ours_variables)
    matched.update(id(t) for t in twins)
    if not twins:
      assert any(
          name in variable.name for name in unused_stock
      ), f'{variable.name}: no variable of ours has its value'
      assert gradient is None, variable.name
      continue
    if len(twins) > 1:
      assert any(
          name in variable.name for name in tied_in_stock
      ), f'{variable.name}: equal to {len(twins)} of ours'
    ours_sum = [ours_gradient[id(t)] for t in twins]
    if gradient is None or any(g is None for g in ours_sum):
      assert gradient is None and all(
          g is None for g in ours_sum
      ), f'{variable.name}: a gradient on one side only'
      continue
    theirs = _dense(gradient)
    ours = sum(_dense(g) for g in ours_sum)
    if '/key/bias' in variable.name:
      assert np.linalg.norm(theirs) < 1e-6 * norm, variable.name
      assert np.linalg.norm(ours) < 1e-6 * norm, variable.name
      continue
    difference = np.linalg.norm(ours - theirs) / np.linalg.norm(theirs)
    assert difference < _RTOL, f'{variable.name}: relative {difference:.2e}'
    compared += 1
  unmatched = [v.name for v in ours_variables if id(v) not in matched]
  assert not unmatched, f'variables of ours Model Garden lacks: {unmatched}'
  return compared


def _losses(task, model, batch, metric_names, training_outputs):
  """(total, {metric: value}, gradients) of one step of `task`."""
  with tf.GradientTape() as tape:
    outputs = training_outputs(model, batch)
    metrics = task.build_metrics()
    total = task.build_losses(batch, outputs, metrics)
  values = {m.name: float(m.result()) for m in metrics}
  terms = {ours_name: values[name] for ours_name, name in metric_names.items()}
  return float(total), terms, tape.gradient(total, model.trainable_variables)


def _ours_outputs(task):
  return lambda model, batch: task.model_outputs(model, batch, training=True)


def _stock_outputs(model, batch):
  return model(batch, training=True)


def _assert_terms_equal(ours, stock):
  (ours_total, ours_terms), (stock_total, stock_terms) = ours, stock
  np.testing.assert_allclose(ours_total, stock_total, rtol=_RTOL)
  assert ours_terms.keys() == stock_terms.keys()
  for name in ours_terms:
    np.testing.assert_allclose(
        ours_terms[name], stock_terms[name], rtol=_RTOL, err_msg=name
    )


def test_masked_lm_step_equals_bert_pretrainer_v2_and_masked_lm_task(tmp_path):
  config = masked_lm.MaskedLMPretrainConfig(
      model=masked_lm.MaskedLMModelConfig(encoder=_encoder())
  )
  ours_task = masked_lm.MaskedLMPretrainTask(config)
  stock_task = _stock_task(masked_lm.OBJECTIVE, config)
  ours, stock = ours_task.build_model(), stock_task.build_model()
  batch = _batch()
  ours(batch, training=True)
  stock(batch, training=True)
  _randomize(ours, seed=1)
  _copy_encoder(ours.encoder_network, stock.encoder_network, str(tmp_path))
  stock.masked_lm.set_weights(ours.masked_lm.get_weights())

  names = dict(mlm='lm_example_loss', accuracy='masked_lm_accuracy')
  ours_total, ours_terms, ours_gradients = _losses(
      ours_task, ours, batch, names, _ours_outputs(ours_task)
  )
  stock_total, stock_terms, stock_gradients = _losses(
      stock_task, stock, batch, names, _stock_outputs
  )
  _assert_terms_equal((ours_total, ours_terms), (stock_total, stock_terms))
  compared = assert_same_step(
      stock.trainable_variables,
      stock_gradients,
      ours.trainable_variables,
      ours_gradients,
  )
  assert compared == len(ours.trainable_variables) - 4  # 2 key biases, pooler


def _electra_pair(tmp_path, disallow_original: bool):
  config = electra.ElectraPretrainConfig(
      model=electra.ElectraModelConfig(
          discriminator=_encoder(),
          generator_size=0.5,
          rtd_loss_weight=50.0,
          temperature=1.0,
          disallow_original=disallow_original,
      )
  )
  ours_task = electra.ElectraPretrainTask(config)
  stock_task = _stock_task(electra.OBJECTIVE, config)
  ours, stock = ours_task.build_model(), stock_task.build_model()
  batch = _batch()
  ours(batch, training=True)
  stock(batch, training=True)
  _randomize(ours, seed=2)
  _copy_encoder(ours.discriminator, stock.discriminator_network, str(tmp_path))
  _copy_encoder(ours.generator, stock.generator_network, str(tmp_path))
  stock.masked_lm.set_weights(ours.mlm_head.get_weights())
  stock.discriminator_projection.set_weights(ours.rtd_head.dense.get_weights())
  stock.discriminator_head.set_weights(ours.rtd_head.logit.get_weights())
  return ours_task, ours, stock_task, stock, batch


@pytest.mark.parametrize('disallow_original', [False, True])
def test_electra_step_equals_electra_pretrainer_and_task(
    tmp_path, disallow_original
):
  """Also with Model Garden's `disallow_correct` (ours: `disallow_original`).

  Named differences: Model Garden's pretrainer always builds a next-sentence
  `ClassificationHead` on the generator (`generator_classification_head`),
  which gets no loss and no gradient; ours has none.
  """
  ours_task, ours, stock_task, stock, batch = _electra_pair(
      tmp_path, disallow_original
  )
  samples = _replacements(batch, allow_original=not disallow_original)
  asked = {}

  def ours_sampler(logits, temperature=1.0, disallowed_ids=None, seed=None):
    del seed
    asked['ours'] = (logits.numpy(), temperature, disallowed_ids)
    return tf.constant(samples)

  def stock_sampler(logits, disallow=None):
    asked['stock'] = (logits.numpy(), disallow)
    return tf.one_hot(samples, _VOCAB)

  names = dict(
      mlm='lm_example_loss',
      rtd=dict(ours='rtd_loss', stock='discriminator_loss'),
      accuracy='masked_lm_accuracy',
  )
  with mock.patch.object(sampling, 'sample_from_logits', ours_sampler):
    ours_total, ours_terms, ours_gradients = _losses(
        ours_task,
        ours,
        batch,
        {k: v['ours'] if isinstance(v, dict) else v for k, v in names.items()},
        _ours_outputs(ours_task),
    )
    ours_labels = ours(batch, training=True)['rtd_labels'].numpy()
  with mock.patch.object(stock_electra, 'sample_from_softmax', stock_sampler):
    stock_total, stock_terms, stock_gradients = _losses(
        stock_task,
        stock,
        batch,
        {k: v['stock'] if isinstance(v, dict) else v for k, v in names.items()},
        _stock_outputs,
    )
    stock_labels = stock(batch, training=True)['disc_label'].numpy()

  # Both samplers were asked for the same thing.
  ours_logits, temperature, disallowed = asked['ours']
  stock_logits, disallow = asked['stock']
  np.testing.assert_allclose(ours_logits, stock_logits, rtol=1e-5, atol=1e-5)
  assert temperature == 1.0
  if disallow_original:
    np.testing.assert_array_equal(disallowed, batch['masked_lm_ids'])
    np.testing.assert_array_equal(
        disallow, tf.one_hot(batch['masked_lm_ids'], _VOCAB)
    )
  else:
    assert disallowed is None and disallow is None
  np.testing.assert_array_equal(ours_labels, _expected_labels(batch, samples))
  np.testing.assert_array_equal(stock_labels, _expected_labels(batch, samples))
  _assert_terms_equal((ours_total, ours_terms), (stock_total, stock_terms))
  compared = assert_same_step(
      stock.trainable_variables,
      stock_gradients,
      ours.trainable_variables,
      ours_gradients,
      unused_stock=('generator_classification_head',),
  )
  assert compared > 60


def _negatives(batch, num_negatives: int) -> np.ndarray:
  """Fixed distinct non-original negatives `[B, P, K]`."""
  original = batch['masked_lm_ids'].numpy()
  negatives = np.zeros(original.shape + (num_negatives,), np.int32)
  for index in np.ndindex(*original.shape):
    pool = [i for i in range(5, _VOCAB) if i != original[index]]
    start = (3 * index[0] + 7 * index[1]) % (len(pool) - num_negatives)
    negatives[index] = pool[start : start + num_negatives]
  return negatives


@pytest.mark.parametrize('tie_embedding_block', [True, False])
def test_teams_step_equals_teams_pretrainer_and_task(tie_embedding_block):
  """TEAMS with Model Garden's settings made ours, each difference named.

  * Candidate size: Model Garden's `candidate_size` counts the original
    (`stock_task_config` gives it K + 1 = 4 for our K = 3).
  * RTD-head chaining: its head feeds each extra layer the same input
    instead of chaining them; with the paper's one extra layer (L - 1
    task-agnostic layers), as here, the two agree.
  * Embedding tying: it ties the whole embedding network (word, position
    and type tables and the LayerNorm), as ours does with
    `tie_embedding_block`: then every variable is one variable on both
    sides. Without it, ours ties the word table and each network keeps its
    own position and type tables and LayerNorm: ours are set equal to the
    discriminator's, so the forward passes are the same, and its gradient
    on each shared variable is the sum of ours on the two copies
    (`tied_in_stock`). Its embedding projection has no bias, so E = H here
    (no projection on either side).
  """
  num_negatives = 3
  config = teams.TeamsPretrainConfig(
      model=teams.TeamsModelConfig(
          discriminator=_encoder(num_layers=3, embedding_width=32),
          generator_num_layers=2,
          layer_sharing='partial',
          num_negatives=num_negatives,
          rtd_loss_weight=5.0,
          mws_loss_weight=2.0,
          tie_embedding_block=tie_embedding_block,
      )
  )
  ours_task = teams.TeamsPretrainTask(config)
  stock_task = _stock_task(teams.OBJECTIVE, config)
  assert stock_task.task_config.model.candidate_size == num_negatives + 1
  ours, stock = ours_task.build_model(), stock_task.build_model()
  batch = _batch()
  ours(batch, training=True)
  stock(batch, training=True)
  _randomize(ours, seed=3)
  shares_block = (
      ours.generator.embedding_block == ours.discriminator.embedding_block
  )
  assert shares_block is tie_embedding_block
  for layer, twin in zip(
      ours.generator.embedding_block, ours.discriminator.embedding_block
  ):
    layer.set_weights(twin.get_weights())
  _copy_encoder_into_scaffold(
      ours.discriminator, stock.discriminator_mws_network
  )
  stock.discriminator_mws_network._pooler_layer.set_weights(  # pylint: disable=protected-access
      ours.discriminator.pooler_layer.get_weights()
  )
  generator = stock.generator_network
  for block, theirs in zip(
      ours.generator.transformer_layers[1:], generator.hidden_layers[1:]
  ):
    theirs.set_weights(block.get_weights())
  generator._pooler_layer.set_weights(ours.generator.pooler_layer.get_weights())  # pylint: disable=protected-access
  stock.masked_lm.set_weights(ours.mlm_head.get_weights())
  (task_layer,) = stock.discriminator_rtd_head.hidden_layers
  task_layer.set_weights(ours.task_layer.get_weights())
  stock.discriminator_rtd_head.dense.set_weights(
      ours.rtd_head.dense.get_weights()
  )
  stock.discriminator_rtd_head.rtd_head.set_weights(
      ours.rtd_head.logit.get_weights()
  )
  stock.discriminator_mws_head.dense.set_weights(
      ours.mws_head.dense.get_weights()
  )
  stock.discriminator_mws_head.layer_norm.set_weights(
      ours.mws_head.layer_norm.get_weights()
  )

  samples = _replacements(batch, allow_original=True)
  negatives = _negatives(batch, num_negatives)
  asked = {}

  def ours_sampler(logits, temperature=1.0, disallowed_ids=None, seed=None):
    del seed
    asked['ours'] = (logits.numpy(), temperature, disallowed_ids)
    return tf.constant(samples)

  def ours_negatives(
      logits, num_samples, temperature=1.0, excluded_ids=None, seed=None
  ):
    del seed
    asked['ours_negatives'] = (
        logits.numpy(),
        num_samples,
        temperature,
        excluded_ids.numpy(),
    )
    return tf.constant(negatives)

  def stock_sampler(logits, disallow=None):
    asked['stock'] = (logits.numpy(), disallow)
    return tf.one_hot(samples, _VOCAB)

  def stock_negatives(logits, k, disallow=None, use_topk=False):
    del use_topk
    asked['stock_negatives'] = (logits.numpy(), k, disallow.numpy())
    return tf.constant(negatives)

  ours_names = dict(
      mlm='lm_example_loss',
      rtd='rtd_loss',
      mws='mws_loss',
      accuracy='masked_lm_accuracy',
      mws_accuracy='mws_accuracy',
  )
  stock_names = dict(
      mlm='masked_lm_loss',
      rtd='replaced_token_detection_loss',
      mws='multiword_selection_loss',
      accuracy='masked_lm_accuracy',
      mws_accuracy='multiword_selection_accuracy',
  )
  with (
      mock.patch.object(sampling, 'sample_from_logits', ours_sampler),
      mock.patch.object(sampling, 'sample_distinct', ours_negatives),
  ):
    ours_total, ours_terms, ours_gradients = _losses(
        ours_task, ours, batch, ours_names, _ours_outputs(ours_task)
    )
  with (
      mock.patch.object(stock_electra, 'sample_from_softmax', stock_sampler),
      mock.patch.object(stock_teams, 'sample_k_from_softmax', stock_negatives),
  ):
    stock_total, stock_terms, stock_gradients = _losses(
        stock_task, stock, batch, stock_names, _stock_outputs
    )

  np.testing.assert_allclose(
      asked['ours'][0], asked['stock'][0], rtol=1e-5, atol=1e-5
  )
  assert asked['ours'][1:] == (1.0, None) and asked['stock'][1] is None
  logits, k, temperature, excluded = asked['ours_negatives']
  np.testing.assert_allclose(
      logits, asked['stock_negatives'][0], rtol=1e-5, atol=1e-5
  )
  assert (k, temperature) == (num_negatives, 1.0)
  assert asked['stock_negatives'][1] == num_negatives
  np.testing.assert_array_equal(excluded, batch['masked_lm_ids'])
  np.testing.assert_array_equal(
      asked['stock_negatives'][2], tf.one_hot(batch['masked_lm_ids'], _VOCAB)
  )
  _assert_terms_equal((ours_total, ours_terms), (stock_total, stock_terms))
  compared = assert_same_step(
      stock.trainable_variables,
      stock_gradients,
      ours.trainable_variables,
      ours_gradients,
      tied_in_stock=()
      if tie_embedding_block
      else ('position_embedding', 'type_embeddings', 'embeddings/layer_norm'),
  )
  assert compared > 60
