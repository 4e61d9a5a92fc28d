"""TEAMS pretrainer: negatives, candidate sets, task heads, sharing, MWS."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from official.nlp.configs import encoders as mg_encoders
from official.projects.teams import teams as stock_teams
from official.projects.teams import teams_task as stock_teams_task
from official_repro.modeling.heads import mws
from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import teams

_VOCAB = 40


def _config(backbone='bert', num_layers=2, **overrides):
  settings = dict(
      backbone=backbone,
      hidden_size=32,
      num_layers=num_layers,
      num_attention_heads=4,
      intermediate_size=64,
      embedding_width=16,
      vocab_size=_VOCAB,
      max_position_embeddings=16,
      options=dict(kernel_size=3) if backbone == 'convbert' else {},
  )
  settings.update(overrides)
  return encoders.validate(encoders.EncoderConfig(**settings))


def _inputs(seed=0, batch=2, seq=8):
  rng = np.random.RandomState(seed)
  return dict(
      input_word_ids=tf.constant(
          rng.randint(5, _VOCAB, (batch, seq)), tf.int32
      ),
      input_mask=tf.constant(
          [[1] * seq, [1] * (seq - 2) + [0, 0]][:batch], tf.int32
      ),
      input_type_ids=tf.zeros((batch, seq), tf.int32),
      masked_lm_positions=tf.constant([[1, 2, 3], [2, 4, 0]][:batch]),
      masked_lm_ids=tf.constant([[7, 8, 9], [10, 11, 0]][:batch]),
      masked_lm_weights=tf.constant([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]][:batch]),
  )


def _pretrainer(discriminator=None, generator_num_layers=1, **kwargs):
  discriminator = discriminator or _config()
  kwargs.setdefault('num_negatives', 3)
  return teams.TeamsPretrainer(
      discriminator,
      discriminator.replace(num_layers=generator_num_layers),
      **kwargs,
  )


@pytest.mark.parametrize('negative_sampling', ['sampled', 'hardest'])
def test_negatives_are_distinct_and_never_the_original(negative_sampling):
  model = _pretrainer(num_negatives=5, negative_sampling=negative_sampling)
  rng = np.random.RandomState(1)
  # The original gets by far the largest logit: it would be drawn first.
  original = rng.randint(0, 8, (4, 50))
  logits = rng.normal(size=(4, 50, 8)).astype(np.float32)
  np.put_along_axis(logits, original[..., None], 20.0, axis=-1)
  negatives = model.sample_negatives(
      tf.constant(logits), dict(masked_lm_ids=tf.constant(original))
  ).numpy()
  assert negatives.shape == (4, 50, 5)
  assert not np.any(negatives == original[..., None])
  for row in negatives.reshape(-1, 5):
    assert len(set(row)) == 5


def test_sampled_negatives_follow_sequential_sampling_without_replacement():
  """TEAMS' candidate draws match sampling without replacement.

  Ordered pairs of draws against the exact probabilities of drawing one
  token from the softmax without the original, then one more without the
  first (chi-square over all 12 ordered pairs).
  """
  model = _pretrainer(num_negatives=2, negative_sampling='sampled')
  logits = np.array([1.5, 0.0, 0.7, -0.5, 0.2], np.float32)  # original: 0
  n = 20000
  negatives = model.sample_negatives(
      tf.constant(np.tile(logits, (1, n, 1))),
      dict(masked_lm_ids=tf.zeros((1, n), tf.int32)),
  ).numpy()[0]
  assert _pair_chi_square(negatives, logits) < 31.3  # 11 dof, p = 0.001


def test_hardest_negatives_are_the_most_likely_non_original_ids():
  model = _pretrainer(num_negatives=3, negative_sampling='hardest')
  rng = np.random.RandomState(2)
  logits = rng.normal(size=(2, 6, 10)).astype(np.float32)
  original = rng.randint(0, 10, (2, 6))
  negatives = model.sample_negatives(
      tf.constant(logits), dict(masked_lm_ids=tf.constant(original))
  ).numpy()
  for b, p in itertools.product(range(2), range(6)):
    ranked = [i for i in np.argsort(-logits[b, p]) if i != original[b, p]]
    assert list(negatives[b, p]) == ranked[:3]


def test_candidate_sets_put_the_original_first():
  inputs = _inputs()
  negatives = tf.constant(np.arange(18).reshape(2, 3, 3), tf.int32)
  candidates = teams.TeamsPretrainer.candidate_sets(inputs, negatives).numpy()
  np.testing.assert_array_equal(
      candidates[..., 0], inputs['masked_lm_ids'].numpy()
  )
  np.testing.assert_array_equal(candidates[..., 1:], negatives.numpy())
  assert teams.model_garden_candidate_size(5) == 6


def test_call_outputs_and_shapes():
  model = _pretrainer(num_negatives=4)
  outputs = model(_inputs(), training=True)
  assert outputs['mws_candidates'].shape == (2, 3, 5)
  assert outputs['mws_logits'].shape == (2, 3, 5)
  assert outputs['rtd_logits'].shape == (2, 8)
  np.testing.assert_array_equal(
      outputs['mws_candidates'][..., 0], _inputs()['masked_lm_ids']
  )
  # The replacement is written in, and the RTD label marks changed tokens.
  replaced = tf.gather(
      outputs['discriminator_ids'],
      _inputs()['masked_lm_positions'],
      batch_dims=1,
  )
  np.testing.assert_array_equal(replaced[0], outputs['sampled_ids'][0])


def _perturb(block):
  block.set_weights(
      [
          w + np.random.RandomState(3).normal(size=w.shape).astype(w.dtype)
          for w in block.get_weights()
      ]
  )


@pytest.mark.parametrize(
    'exported, moves, stays', [('mws', 'mws', 'rtd'), ('rtd', 'rtd', 'mws')]
)
def test_the_extra_task_layer_reads_layer_l_minus_1(exported, moves, stays):
  """Changing layer L's weights moves only the exported side's logits.

  Changing layer L's weights moves only the exported side's logits; the
  other side's extra layer reads layer L-1.
  """
  model = _pretrainer(
      _config(num_layers=3), num_negatives=3, exported_representations=exported
  )
  inputs = _inputs()
  candidates = tf.constant(
      np.random.RandomState(4).randint(0, _VOCAB, (2, 3, 4)), tf.int32
  )

  def logits():
    states = model.task_states(
        model.discriminate(inputs['input_word_ids'], inputs, False),
        inputs['input_mask'],
        False,
    )
    return dict(
        rtd=model.rtd_head(states['rtd']).numpy(),
        mws=model.mws_logits(states['mws'], inputs, candidates).numpy(),
    )

  before = logits()
  _perturb(model.discriminator.transformer_layers[-1])
  after = logits()
  np.testing.assert_array_equal(before[stays], after[stays])
  assert np.abs(before[moves] - after[moves]).max() > 1e-3
  _perturb(model.discriminator.transformer_layers[-2])
  assert np.abs(after[stays] - logits()[stays]).max() > 1e-3


def test_task_heads_on_top_read_layer_l_and_export_l_plus_1_layers():
  model = _pretrainer(
      _config(num_layers=3), num_negatives=2, task_heads='attention_on_top'
  )
  assert len(model.discriminator.transformer_layers) == 3
  inputs = _inputs()
  outputs = model.discriminate(inputs['input_word_ids'], inputs, False)
  states = model.task_states(outputs, inputs['input_mask'], False)
  mask = tf.cast(inputs['input_mask'], tf.float32)
  attention_mask = mask[:, None, :] * tf.ones_like(mask)[:, :, None]
  expected = model.task_layer(
      [outputs['encoder_outputs'][1], attention_mask], training=False
  )
  np.testing.assert_allclose(states['rtd'], expected, atol=1e-6)
  np.testing.assert_array_equal(states['mws'], outputs['sequence_output'])


def test_ffn_heads_are_per_token_on_the_top_layer():
  model = _pretrainer(num_negatives=2, task_heads='ffn')
  assert model.task_layer is None
  inputs = _inputs()
  outputs = model.discriminate(inputs['input_word_ids'], inputs, False)
  states = model.task_states(outputs, inputs['input_mask'], False)
  top = outputs['sequence_output']
  for task in ('rtd', 'mws'):
    head = model.ffn_heads[task]
    np.testing.assert_allclose(
        states[task], head(top, training=False), atol=1e-6
    )
  # Per token: changing one token's state changes only that token's output.
  changed = top.numpy()
  changed[0, 3] += 1.0
  delta = np.abs(
      model.ffn_heads['rtd'](changed, training=False)
      - model.ffn_heads['rtd'](top, training=False)
  ).sum(-1)
  assert delta[0, 3] > 0 and delta.sum() == pytest.approx(delta[0, 3])


def test_ffn_heads_refuse_rtd_export():
  with pytest.raises(ValueError, match='exported_representations'):
    _pretrainer(task_heads='ffn', exported_representations='rtd')


@pytest.mark.parametrize(
    'setting, value',
    [
        ('task_heads', 'conv'),
        ('negative_sampling', 'random'),
        ('num_negatives', 0),
        ('exported_representations', 'mlm'),
    ],
)
def test_unknown_settings_are_refused_by_name(setting, value):
  with pytest.raises(ValueError, match=f'^TeamsPretrainer: {setting}'):
    _pretrainer(**{setting: value})


def test_attention_heads_need_two_layers():
  with pytest.raises(ValueError, match='at least 2 layers'):
    _pretrainer(_config(num_layers=1))


def _layer_norm(x, gamma, beta, epsilon=1e-12):
  mean = x.mean(-1, keepdims=True)
  variance = x.var(-1, keepdims=True)
  return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def test_mws_logits_are_dot_products_with_candidate_embeddings():
  head = mws.MultiWordSelectionHead(embedding_width=6, activation='relu')
  rng = np.random.RandomState(5)
  sequence = rng.normal(size=(2, 5, 8)).astype(np.float32)
  positions = np.array([[0, 3], [4, 1]])
  candidates = rng.randint(0, 11, (2, 2, 3))
  table = rng.normal(size=(11, 6)).astype(np.float32)
  logits = head(
      tf.constant(sequence),
      tf.constant(positions),
      tf.constant(candidates),
      tf.constant(table),
  ).numpy()
  kernel, bias = head.dense.get_weights()
  gamma, beta = head.layer_norm.get_weights()
  for b, p in itertools.product(range(2), range(2)):
    state = np.maximum(sequence[b, positions[b, p]] @ kernel + bias, 0.0)
    state = _layer_norm(state, gamma, beta)
    for c in range(3):
      assert logits[b, p, c] == pytest.approx(
          float(state @ table[candidates[b, p, c]]), rel=1e-4, abs=1e-5
      )


def test_mws_head_serializes():
  head = mws.MultiWordSelectionHead(
      embedding_width=6, activation='relu', name='mws'
  )
  rebuilt = mws.MultiWordSelectionHead.from_config(head.get_config())
  assert rebuilt.get_config() == head.get_config()


@pytest.mark.slow
@pytest.mark.parametrize('backbone', ['bert', 'convbert', 'albert'])
def test_shared_layers_are_the_discriminators_and_learn_from_both_sides(
    backbone,
):
  discriminator = _config(backbone, num_layers=4)
  model = _pretrainer(
      discriminator,
      generator_num_layers=2,
      num_shared_layers=1,
      num_negatives=2,
  )
  generator_blocks = model.generator.transformer_layers
  discriminator_blocks = model.discriminator.transformer_layers
  assert generator_blocks[0] is discriminator_blocks[0]
  assert generator_blocks[1] is not discriminator_blocks[1]
  shared_ids = {id(v) for v in discriminator_blocks[0].trainable_variables}
  all_ids = [id(v) for v in model.trainable_variables]
  assert len(all_ids) == len(set(all_ids))  # each variable once
  inputs = _inputs()
  for side in ('generator', 'discriminator'):
    with tf.GradientTape() as tape:
      outputs = model(inputs, training=True)
      if side == 'generator':
        loss = tf.reduce_mean(outputs['mlm_logits'] ** 2)
      else:
        loss = tf.reduce_mean(outputs['rtd_logits'] ** 2) + tf.reduce_mean(
            outputs['mws_logits'] ** 2
        )
    shared = [v for v in model.trainable_variables if id(v) in shared_ids]
    gradients = tape.gradient(loss, shared)
    assert any(
        g is not None and float(tf.reduce_max(tf.abs(g))) > 0 for g in gradients
    ), side


@pytest.mark.slow
def test_pretrainer_rebuilds_from_its_config():
  model = _pretrainer(
      _config(num_layers=3),
      generator_num_layers=2,
      num_shared_layers=1,
      num_negatives=4,
      negative_sampling='hardest',
      exported_representations='rtd',
  )
  model(_inputs())
  rebuilt = teams.TeamsPretrainer.from_config(model.get_config())
  rebuilt(_inputs())
  assert rebuilt.get_config() == model.get_config()
  assert rebuilt.num_negatives == 4
  assert rebuilt.generator.transformer_layers[0] is (
      rebuilt.discriminator.transformer_layers[0]
  )
  assert model.count_params() == rebuilt.count_params()


def _copy_scaffold_into(scaffold, encoder):
  """Copies a Model Garden `EncoderScaffold` (TEAMS' encoder) into ours."""
  embedding = scaffold.embedding_network
  for ours, name in (
      (encoder.get_embedding_layer(), 'word_embeddings'),
      (encoder._position_embedding_layer, 'position_embedding'),
      (encoder._type_embedding_layer, 'type_embeddings'),
      (encoder._embedding_norm_layer, 'embeddings/layer_norm'),
  ):
    ours.set_weights(embedding.get_layer(name).get_weights())
  for ours, theirs in zip(encoder.transformer_layers, scaffold.hidden_layers):
    ours.set_weights(theirs.get_weights())


@pytest.mark.slow
def test_model_garden_teams_gives_same_logits_with_candidate_size_k_plus_1():
  """Our TEAMS pretrainer matches Model Garden's where they coincide.

  Where Model Garden's TeamsPretrainer and ours coincide (E = H: its
  embedding projection has no bias; relu; K = 3 so its candidate_size 4),
  the same weights give the same RTD and MWS logits.
  """
  num_negatives, num_layers = 3, 3
  bert = mg_encoders.BertEncoderConfig(
      vocab_size=_VOCAB,
      hidden_size=32,
      num_layers=num_layers,
      num_attention_heads=4,
      intermediate_size=64,
      hidden_activation='relu',
      max_position_embeddings=16,
  )
  stock = stock_teams_task._build_pretrainer(
      stock_teams.TeamsPretrainerConfig(  # pylint: disable=protected-access
          candidate_size=teams.model_garden_candidate_size(num_negatives),
          num_shared_generator_hidden_layers=1,
          num_discriminator_task_agnostic_layers=num_layers - 1,
          generator=bert.replace(num_layers=2),
          discriminator=bert,
      )
  )
  ours_config = _config(
      num_layers=num_layers, hidden_activation='relu', embedding_width=32
  )
  ours = teams.TeamsPretrainer(
      ours_config,
      ours_config.replace(num_layers=2),
      num_negatives=num_negatives,
      num_shared_layers=1,
      mlm_activation='relu',
  )
  inputs = _inputs()
  stock(inputs)
  ours(inputs)
  _copy_scaffold_into(stock.discriminator_mws_network, ours.discriminator)
  (stock_layer,) = stock.discriminator_rtd_head.hidden_layers
  ours.task_layer.set_weights(stock_layer.get_weights())
  ours.rtd_head.dense.set_weights(
      stock.discriminator_rtd_head.dense.get_weights()
  )
  ours.rtd_head.logit.set_weights(
      stock.discriminator_rtd_head.rtd_head.get_weights()
  )
  ours.mws_head.dense.set_weights(
      stock.discriminator_mws_head.dense.get_weights()
  )
  ours.mws_head.layer_norm.set_weights(
      stock.discriminator_mws_head.layer_norm.get_weights()
  )

  candidates = tf.constant(
      np.random.RandomState(6).randint(0, _VOCAB, (2, 3, num_negatives + 1)),
      tf.int32,
  )
  word_ids = inputs['input_word_ids']
  stock_outputs = stock.discriminator_mws_network(
      [word_ids, inputs['input_mask'], inputs['input_type_ids']], training=False
  )['encoder_outputs']
  stock_rtd = stock.discriminator_rtd_head(
      stock_outputs[num_layers - 2], inputs['input_mask']
  )
  stock_mws = stock.discriminator_mws_head(
      stock_outputs[-1], inputs['masked_lm_positions'], candidates
  )
  states = ours.task_states(
      ours.discriminate(word_ids, inputs, False), inputs['input_mask'], False
  )
  np.testing.assert_allclose(ours.rtd_head(states['rtd']), stock_rtd, atol=1e-5)
  np.testing.assert_allclose(
      ours.mws_logits(states['mws'], inputs, candidates), stock_mws, atol=1e-5
  )


def _pair_chi_square(negatives, logits):
  """Chi-square of ordered first-two draws.

  Chi-square of ordered first-two draws (original id 0 excluded) against
  sequential sampling without replacement.
  """
  p = np.exp(logits[1:]) / np.exp(logits[1:]).sum()
  pairs = list(itertools.permutations(range(len(p)), 2))
  n = len(negatives)
  expected = np.array([p[a] * p[b] / (1 - p[a]) for a, b in pairs]) * n
  observed = np.array(
      [
          np.sum((negatives[:, 0] == a + 1) & (negatives[:, 1] == b + 1))
          for a, b in pairs
      ]
  )
  return ((observed - expected) ** 2 / expected).sum()


def test_model_garden_negatives_have_the_same_distribution():
  """Model Garden's K argmax passes draw from the same distribution.

  Model Garden's K argmax passes with a finite penalty draw from the same
  distribution as our one-pass Gumbel-top-k.
  """
  from official.projects.teams import teams_pretrainer  # pylint: disable=g-import-not-at-top

  logits = np.array([1.5, 0.0, 0.7, -0.5, 0.2], np.float32)
  n = 20000
  disallow = tf.one_hot(tf.zeros((1, n), tf.int32), 5)
  negatives = teams_pretrainer.sample_k_from_softmax(
      tf.constant(np.tile(logits, (1, n, 1))), k=2, disallow=disallow
  ).numpy()[0]
  assert _pair_chi_square(negatives, logits) < 31.3  # 11 dof, p = 0.001


def test_model_garden_rtd_head_feeds_every_extra_layer_the_same_input():
  """With two extra layers, only the last layer applies.

  With two extra layers its output is the last layer applied to the head's
  input, not the two chained (harmless with the paper's one layer).
  """
  from official.projects.teams import teams_pretrainer  # pylint: disable=g-import-not-at-top

  bert = mg_encoders.BertEncoderConfig(
      vocab_size=_VOCAB,
      hidden_size=32,
      num_layers=3,
      num_attention_heads=4,
      intermediate_size=64,
      hidden_activation='relu',
  )
  scaffold = stock_teams.get_encoder(bert)
  head = teams_pretrainer.ReplacedTokenDetectionHead(
      encoder_cfg=scaffold.get_config(), num_task_agnostic_layers=1
  )
  states = tf.constant(
      np.random.RandomState(7).normal(size=(2, 5, 32)), tf.float32
  )
  mask = tf.ones((2, 5), tf.int32)
  logits = head(states, mask)
  first, last = head.hidden_layers
  attention_mask = tf.ones((2, 5, 5))
  unchained = head.rtd_head(head.dense(last([states, attention_mask])))[..., 0]
  chained = head.rtd_head(
      head.dense(last([first([states, attention_mask]), attention_mask]))
  )[..., 0]
  # The logits are small (0.02-scale initialisers): compare at their scale.
  np.testing.assert_allclose(logits, unchained, rtol=1e-5, atol=1e-7)
  assert np.abs(logits - chained).max() > 1e-5


def test_model_garden_ties_the_whole_embedding_network_ours_the_word_table():
  bert = mg_encoders.BertEncoderConfig(
      vocab_size=_VOCAB,
      hidden_size=32,
      num_layers=2,
      num_attention_heads=4,
      intermediate_size=64,
      embedding_size=16,
  )
  stock = stock_teams_task._build_pretrainer(
      stock_teams.TeamsPretrainerConfig(  # pylint: disable=protected-access
          candidate_size=4,
          num_shared_generator_hidden_layers=1,
          num_discriminator_task_agnostic_layers=1,
          generator=bert.replace(num_layers=2),
          discriminator=bert,
      )
  )
  assert (
      stock.generator_network.embedding_network
      is stock.discriminator_mws_network.embedding_network
  )
  # Its E -> H projection has no bias; BertEncoder's (and ours) has one.
  projection = stock.discriminator_mws_network.embedding_network.get_layer(
      'embedding_projection'
  )
  assert [w.name for w in projection.weights if 'bias' in w.name] == []
  ours = _pretrainer(num_shared_layers=1)
  assert ours.generator.get_embedding_layer() is (
      ours.discriminator.get_embedding_layer()
  )
  assert (
      ours.generator._position_embedding_layer
      is not (  # pylint: disable=protected-access
          ours.discriminator._position_embedding_layer
      )
  )  # pylint: disable=protected-access
  assert ours.discriminator._embedding_projection.bias is not None  # pylint: disable=protected-access


def test_more_negatives_than_the_vocabulary_holds_are_refused():
  """Found by the every-table rehearsal: K = 50 of a 34-token vocabulary."""
  with pytest.raises(
      ValueError,
      match=rf'^TeamsPretrainer: num_negatives={_VOCAB} needs a vocabulary '
      rf'of more than {_VOCAB} tokens .* the encoder has {_VOCAB}\.$',
  ):
    _pretrainer(num_negatives=_VOCAB)
  # K = V - 1: every other token is a candidate.
  outputs = _pretrainer(num_negatives=_VOCAB - 1)(_inputs(), training=True)
  assert outputs
