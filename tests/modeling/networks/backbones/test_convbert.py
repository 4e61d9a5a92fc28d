"""ConvBERT backbone: outputs, tying, attention scores, checks, training."""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from official.nlp.modeling import models
from official_repro.modeling import arguments
from official_repro.modeling.layers import mixed_attention
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import pretrained
from official_repro.modeling.networks import transformer_encoder
from official_repro.modeling.pretrainers import networks
from official_repro.optimization import layerwise_decay

VOCAB = 50
NUM_LAYERS = 2


_OPTIONS = (
    'head_ratio',
    'kernel_size',
    'num_groups',
    'conv_only',
    'attention_only',
)


def _config(**overrides):
  """A tiny ConvBERT config; ConvBERT options go to `options`."""
  fields = dict(
      backbone='convbert',
      hidden_size=32,
      num_layers=NUM_LAYERS,
      num_attention_heads=4,
      intermediate_size=64,
      embedding_width=16,
      vocab_size=VOCAB,
      max_position_embeddings=16,
  )
  options = dict(kernel_size=3, num_groups=2)
  for name, value in overrides.items():
    (options if name in _OPTIONS else fields)[name] = value
  if fields['backbone'] != 'convbert':
    options = {}
  return encoders.validate(encoders.EncoderConfig(**fields, options=options))


def _inputs(batch=2, length=8, real_lengths=None):
  ids = np.arange(batch * length).reshape(batch, length) % (VOCAB - 1) + 1
  mask = np.ones_like(ids)
  for row, real in enumerate(real_lengths or []):
    ids[row, real:] = 0
    mask[row, real:] = 0
  return dict(
      input_word_ids=tf.constant(ids, tf.int32),
      input_mask=tf.constant(mask, tf.int32),
      input_type_ids=tf.zeros([batch, length], tf.int32),
  )


def test_outputs_and_interface():
  encoder = encoders.build_encoder(_config())
  assert isinstance(encoder, transformer_encoder.TransformerEncoder)
  outputs = encoder(_inputs())
  assert outputs['sequence_output'].shape == (2, 8, 32)
  assert outputs['pooled_output'].shape == (2, 32)
  assert [o.shape for o in outputs['encoder_outputs']] == [(2, 8, 32)] * 2
  np.testing.assert_array_equal(
      outputs['encoder_outputs'][-1], outputs['sequence_output']
  )
  assert 'attention_scores' not in outputs
  assert encoder.get_embedding_table().shape == (VOCAB, 16)
  assert encoder.get_embedding_layer().embeddings is (
      encoder.get_embedding_table()
  )
  blocks = encoder.transformer_layers
  assert len(blocks) == NUM_LAYERS and len({id(b) for b in blocks}) == 2
  assert all(isinstance(b, mixed_attention.ConvBertBlock) for b in blocks)
  np.testing.assert_allclose(
      outputs['pooled_output'],
      encoder.pooler_layer(outputs['sequence_output'][:, 0]),
      atol=1e-6,
  )


@pytest.mark.slow
def test_tied_word_embedding_is_one_variable():
  discriminator = encoders.build_encoder(_config())
  generator_config = networks.scale_generator(_config(), 0.25)
  generator = encoders.build_encoder(
      generator_config, shared=encoders.shared_from(discriminator)
  )
  shared = discriminator.get_embedding_table()
  assert generator.get_embedding_table() is shared
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(
        generator(_inputs())['sequence_output']
    ) + tf.reduce_sum(discriminator(_inputs())['sequence_output'])
  assert tape.gradient(loss, shared) is not None
  assert sum(v is shared for v in generator.trainable_variables) == 1


def test_generator_with_fewer_heads_than_head_ratio_keeps_one():
  # ConvBERT-small: 4 heads, ratio 2; the 1/4 generator has one head, and
  # the reference's N' = max(1, 1 // 2) keeps one self-attention head of
  # the full generator width.
  small = _config(
      hidden_size=256,
      num_attention_heads=4,
      intermediate_size=1024,
      num_groups=1,
  )
  generator = networks.scale_generator(small, 0.25)
  assert (
      generator.hidden_size,
      generator.num_attention_heads,
      generator.options.head_ratio,
  ) == (64, 1, 2)
  encoder = encoders.build_encoder(generator, return_attention_scores=True)
  outputs = encoder(_inputs())
  assert outputs['sequence_output'].shape == (2, 8, 64)
  assert [s.shape for s in outputs['attention_scores']] == [
      (2, 1, 8, 8)
  ] * NUM_LAYERS
  for block in encoder.transformer_layers:
    attention = block.attention_layer
    assert (
        attention.num_self_attention_heads,
        attention.num_conv_heads,
        attention.head_size,
    ) == (1, 1, 64)
    (kernel,) = [
        w
        for w in attention.weights
        if 'attention_output' in w.name and 'kernel' in w.name
    ]
    assert tuple(kernel.shape) == (2 * 64, 64)
  bert = networks.scale_generator(_config(backbone='bert'), 0.25)
  assert not bert.options_dict()  # Other backbones have no ConvBERT options.


@pytest.mark.parametrize(
    'heads, ratio, attention_heads', [(4, 3, 1), (4, 8, 1), (8, 3, 2)]
)
def test_head_ratio_need_not_divide_heads(heads, ratio, attention_heads):
  encoder = encoders.build_encoder(
      _config(num_attention_heads=heads, head_ratio=ratio),
      return_attention_scores=True,
  )
  outputs = encoder(_inputs())
  assert outputs['sequence_output'].shape == (2, 8, 32)
  assert [s.shape for s in outputs['attention_scores']] == [
      (2, attention_heads, 8, 8)
  ] * NUM_LAYERS


def test_attention_scores_are_bottleneck_probabilities():
  encoder = encoders.build_encoder(_config(), return_attention_scores=True)
  outputs = encoder(_inputs(real_lengths=[8, 5]))
  scores = outputs['attention_scores']
  assert len(scores) == NUM_LAYERS
  for probabilities in scores:
    assert probabilities.shape == (2, 2, 8, 8)  # N' = 4 heads / ratio 2.
    np.testing.assert_allclose(tf.reduce_sum(probabilities, -1), 1.0, rtol=1e-5)
    assert float(tf.reduce_max(probabilities[1, :, :, 5:])) < 1e-6


@pytest.mark.parametrize('backbone', ['bert', 'albert'])
def test_attention_scores_for_other_backbones(backbone):
  encoder = encoders.build_encoder(
      _config(backbone=backbone), return_attention_scores=True
  )
  scores = encoder(_inputs(real_lengths=[8, 5]))['attention_scores']
  assert [s.shape for s in scores] == [(2, 4, 8, 8)] * NUM_LAYERS
  np.testing.assert_allclose(tf.reduce_sum(scores[0], -1), 1.0, rtol=1e-5)


def test_conv_only_has_no_attention_scores():
  with pytest.raises(ValueError, match='conv_only=True'):
    encoders.build_encoder(
        _config(conv_only=True), return_attention_scores=True
    )


def test_attention_only_encoder_ignores_padding():
  # Without convolution heads nothing reads padded positions, so padding
  # content cannot change the outputs at real positions.
  encoder = encoders.build_encoder(_config(attention_only=True))
  inputs = _inputs(real_lengths=[8, 5])
  changed = dict(inputs)
  ids = inputs['input_word_ids'].numpy()
  ids[1, 5:] = 7
  changed['input_word_ids'] = tf.constant(ids)
  real = slice(0, 5)
  np.testing.assert_allclose(
      encoder(changed)['sequence_output'][1, real],
      encoder(inputs)['sequence_output'][1, real],
      atol=1e-5,
  )
  attention = encoder.transformer_layers[0].attention_layer
  assert attention.num_conv_heads == 0
  assert not any(
      'span_dynamic_conv' in v.name for v in encoder.trainable_variables
  )


def test_attention_only_block_round_trips_and_excludes_conv_only():
  block = mixed_attention.ConvBertBlock(32, 4, 64, attention_only=True)
  clone = mixed_attention.ConvBertBlock.from_config(block.get_config())
  assert clone.get_config() == block.get_config()
  assert clone.get_config()['attention_only']
  with pytest.raises(ValueError, match='exclude each other'):
    mixed_attention.MixedAttention(32, 4, conv_only=True, attention_only=True)


@pytest.mark.parametrize(
    'overrides, message',
    [
        (dict(head_ratio=0), r'options.head_ratio must be a positive int'),
        (dict(head_ratio=-2), r'options.head_ratio must be a positive int'),
        (
            dict(num_attention_heads=3),
            r'hidden_size=32 is not divisible by num_attention_heads=3',
        ),
        (dict(kernel_size=4), r'options.kernel_size=4 must be odd'),
        (dict(kernel_size=-1), r'options.kernel_size must be a positive'),
        (
            dict(num_groups=3, intermediate_size=66),
            r'hidden_size=32 is not divisible by options.num_groups=3',
        ),
        (
            dict(num_groups=4, intermediate_size=66),
            r'intermediate_size=66 is not divisible by options.num_groups=4',
        ),
        (
            dict(conv_only=True, attention_only=True),
            'options.conv_only and options.attention_only exclude each other',
        ),
        (
            dict(hidden_activation='gelu'),
            "hidden_activation='gelu' is ambiguous",
        ),
    ],
)
def test_bad_config_names_the_argument(overrides, message):
  with pytest.raises(
      arguments.ArgumentError, match=f'^EncoderConfig: {message}'
  ):
    _config(**overrides)


def test_options_belong_to_their_backbone():
  with pytest.raises(
      ValueError,
      match=r"^EncoderConfig: options=\{'head_ratio': 4\} "
      r"but backbone 'bert' takes no options",
  ):
    encoders.validate(
        encoders.EncoderConfig(
            backbone='bert',
            hidden_size=32,
            num_layers=1,
            num_attention_heads=4,
            intermediate_size=64,
            options=dict(head_ratio=4),
        )
    )
  with pytest.raises(ValueError, match="'kernel_siz'"):
    encoders.validate(
        encoders.EncoderConfig(
            backbone='convbert',
            hidden_size=32,
            num_layers=1,
            num_attention_heads=4,
            intermediate_size=64,
            options=dict(kernel_siz=3),
        )
    )


def test_activation_defaults_to_the_reference():
  # ConvBERT's reference uses the exact (erf) GELU, BERT's the tanh form.
  assert _config().hidden_activation == 'gelu_erf'
  assert _config(backbone='bert').hidden_activation == 'gelu_tanh'
  block = encoders.build_encoder(_config()).transformer_layers[0]
  x = tf.constant([-1.5, 0.3, 2.0])
  np.testing.assert_allclose(
      block._activation(x),  # pylint: disable=protected-access
      0.5 * x * (1 + tf.math.erf(x / np.sqrt(2.0))),
      rtol=1e-6,
  )


def test_model_garden_config_refuses_convbert():
  with pytest.raises(ValueError, match='has no Model Garden encoder'):
    encoders.to_model_garden_config(_config())


def test_layerwise_depths():
  encoder = encoders.build_encoder(_config())
  model = models.BertClassifier(network=encoder, num_classes=2)
  depths = layerwise_decay.variable_depths(model, encoder)
  head = NUM_LAYERS + 2
  assert len(depths) == len(model.trainable_variables)
  for index, block in enumerate(encoder.transformer_layers):
    assert block.trainable_variables
    for variable in block.trainable_variables:
      assert depths[variable.name] == index + 1, variable.name
  for variable in encoder.pooler_layer.trainable_variables:
    assert depths[variable.name] == head
  for name in (
      'word_embeddings/embeddings:0',
      'embedding_projection/kernel:0',
      'embeddings/layer_norm/gamma:0',
  ):
    assert depths[name] == 0, name
  assert sorted(set(depths.values())) == [0, 1, 2, head]


@pytest.mark.slow
@pytest.mark.parametrize('variant', ['conv_only', 'attention_only'])
def test_ablations_train(variant):
  tf_keras.utils.set_random_seed(1)
  encoder = encoders.build_encoder(_config(**{variant: True}))
  model = models.BertClassifier(network=encoder, num_classes=2)
  optimizer = tf_keras.optimizers.SGD(0.005)
  inputs = _inputs()
  labels = tf.constant([0, 1])
  losses = []
  for _ in range(3):
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(
          tf_keras.losses.sparse_categorical_crossentropy(
              labels, model(inputs, training=False), from_logits=True
          )
      )
    gradients = tape.gradient(loss, model.trainable_variables)
    assert all(g is not None for g in gradients)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    losses.append(float(loss))
  assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]


@pytest.mark.slow
def test_electra_pretraining_then_restore_for_finetuning(
    run_tiny_electra, tmp_path
):
  result = run_tiny_electra(
      tmp_path,
      [
          "encoder.backbone = 'convbert'",
          'convbert.num_groups = 2',
          'convbert.kernel_size = 3',
      ],
      mode='train',
  )
  assert result['global_step'] == 2
  for name in (
      'training_loss',
      'lm_example_loss',
      'rtd_loss',
      'discriminator_auc',
  ):
    assert np.isfinite(result['train'][name]), name

  resolved = pretrained.resolve(str(tmp_path))
  assert resolved.config.backbone == 'convbert'
  assert (
      resolved.config.options.num_groups,
      resolved.config.options.kernel_size,
  ) == (2, 3)
  # Two encoders with different random initialisations end up identical:
  # every variable came from the exported checkpoint.
  restored = []
  for _ in range(2):
    encoder = encoders.build_encoder(resolved.config)
    pretrained.restore(encoder, resolved.checkpoint_path)
    restored.append(encoder)
  for first, second in zip(
      restored[0].trainable_variables, restored[1].trainable_variables
  ):
    np.testing.assert_array_equal(first.numpy(), second.numpy())
