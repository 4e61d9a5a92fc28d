"""SCRIPT task: loss, metrics, FLOPs terms and short training runs."""

import numpy as np
import pytest
import tensorflow as tf

from official_repro.metrics import flops
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import pretrained
from official_repro.modeling.pretrainers import script as script_model
from official_repro.tasks import objectives
from official_repro.tasks import pretraining
from official_repro.tasks import script


def _labels_and_outputs():
  labels = dict(
      masked_lm_ids=tf.constant([[1, 2]]),
      masked_lm_weights=tf.constant([[1.0, 0.0]]),
      masked_lm_positions=tf.constant([[1, 0]]),
      input_mask=tf.constant([[1, 1, 1, 0]]),
  )
  token_logits = (
      np.random.RandomState(0).normal(size=(1, 4, 3)).astype(np.float32)
  )
  log_positive, log_negative = script_model.critic_log_probabilities(
      token_logits
  )
  outputs = dict(
      mlm_logits=tf.constant([[[0.0, 2.0, 0.0], [5.0, 0.0, 0.0]]]),
      critic_log_positive=log_positive,
      critic_log_negative=log_negative,
      rtd_logits=log_negative - log_positive,
      rtd_labels=tf.constant([[0, 1, 1, 1]]),
  )
  return labels, outputs, token_logits


def test_loss_is_mlm_plus_alpha_critic_cross_entropy_over_real_tokens():
  labels, outputs, token_logits = _labels_and_outputs()
  mlm = -np.log(np.exp(2.0) / (np.exp(2.0) + 2.0))  # only slot 0 is real
  # Brute force over V+1 classes for the 3 real tokens (the 4th is padding).
  augmented = np.concatenate([token_logits[0, :3], np.zeros((3, 1))], -1)
  probabilities = np.exp(augmented) / np.exp(augmented).sum(-1, keepdims=True)
  negative = probabilities[:, -1]
  critic = -np.mean(
      [np.log(1 - negative[0]), np.log(negative[1]), np.log(negative[2])]
  )
  for alpha in (50.0, 2.0):
    task = script.ScriptPretrainTask(
        script.ScriptPretrainConfig(
            model=script.ScriptModelConfig(critic_loss_weight=alpha)
        )
    )
    metrics = task.build_metrics()
    loss = task.build_losses(labels, outputs, metrics).numpy()
    np.testing.assert_allclose(loss, mlm + alpha * critic, rtol=1e-5)
    by_name = {m.name: m.result().numpy() for m in metrics}
    np.testing.assert_allclose(by_name['critic_loss'], critic, rtol=1e-5)


def test_critic_loss_equals_sigmoid_loss_on_the_log_odds():
  labels, outputs, _ = _labels_and_outputs()
  np.testing.assert_allclose(
      script.critic_loss(
          outputs['rtd_labels'],
          outputs['critic_log_positive'],
          outputs['critic_log_negative'],
          labels['input_mask'],
      ),
      pretraining.replaced_token_loss(
          outputs['rtd_labels'], outputs['rtd_logits'], labels['input_mask']
      ),
      rtol=1e-5,
  )


@pytest.mark.parametrize(
    'settings, message',
    [
        (
            dict(temperature=0.5),
            'script.temperature = 0.5 has no effect without '
            'script.straight_through = True',
        ),
        (
            dict(initial_positive_probability=1.0),
            'script.initial_positive_probability must be in (0, 1), got 1.0.',
        ),
    ],
)
def test_the_pretrainers_settings_are_checked_when_read(settings, message):
  """The model names its arguments; read from gin, they are the bindings."""
  config = script.ScriptPretrainConfig(
      model=script.ScriptModelConfig(**settings)
  )
  with pytest.raises(ValueError) as raised:
    script.OBJECTIVE.finalized(config)
  assert str(raised.value).startswith(message), str(raised.value)
  with pytest.raises(ValueError) as raised:
    script.OBJECTIVE.finalize(config)
  assert str(raised.value).startswith(
      'ScriptPretrainer: ' + message.replace('script.', '')
  )


def test_flops_are_two_passes_of_one_model():
  encoder = encoders.EncoderConfig(
      hidden_size=256,
      num_layers=12,
      num_attention_heads=4,
      intermediate_size=1024,
      embedding_width=128,
      vocab_size=30522,
  )
  config = script.ScriptPretrainConfig(
      model=script.ScriptModelConfig(encoder=encoder)
  )
  terms = objectives.get('script').flops(config, 128, 20)
  shape = objectives.network_shape(encoder, 128)
  assert set(terms) == {'mlm_pass', 'critic_pass'}
  assert terms['mlm_pass'].shape == terms['critic_pass'].shape == shape
  assert terms['mlm_pass'].heads == {
      'mlm': flops.mlm_head_flops(shape, 20 / 128)
  }
  assert terms['critic_pass'].heads == {
      'critic': flops.mlm_head_flops(shape, 1.0)
  }
  masked_lm_terms = objectives.get('masked_lm').flops(config, 128, 20)
  assert terms['mlm_pass'].per_token_forward() == pytest.approx(
      masked_lm_terms['encoder'].per_token_forward()
  )
  assert objectives.get('script').stock_task_config is None


@pytest.mark.parametrize(
    'backbone, initial_positive_probability',
    [
        pytest.param('bert', 0.85, marks=pytest.mark.slow),
        ('bert', None),
        # Every objective trains on every backbone in the slow tier
        # (tests/training/test_mixed_precision.py).
        pytest.param('convbert', None, marks=pytest.mark.slow),
    ],
)
def test_two_training_steps_and_export(
    run_tiny_pretraining, tmp_path, backbone, initial_positive_probability
):
  bindings = [f'encoder.backbone = {backbone!r}']
  if initial_positive_probability is not None:
    bindings.append(
        'script.initial_positive_probability = '
        f'{initial_positive_probability}'
    )
  if backbone == 'convbert':
    bindings.append('convbert.kernel_size = 3')
  result = run_tiny_pretraining(tmp_path, ['gin/pretrain/script.gin'], bindings)
  assert result['global_step'] == 2
  assert np.isfinite(result['train']['training_loss'])
  for name in (
      'masked_lm_accuracy',
      'critic_loss',
      'discriminator_accuracy',
      'discriminator_auc',
      'replaced_fraction',
  ):
    assert np.isfinite(result['eval'][name]), name
  resolved = pretrained.resolve(str(tmp_path))
  assert resolved.config.backbone == backbone
  assert resolved.checkpoint_path.endswith('encoder-2')
  # The gin binding reached the model: two steps at 1e-3 move the MLM
  # output bias by far less than 0.01 from its start.
  reader = tf.train.load_checkpoint(str(tmp_path))
  [bias_key] = [
      key
      for key in reader.get_variable_to_shape_map()
      if key.startswith('masked_lm/output_bias') and 'OPTIMIZER_SLOT' not in key
  ]
  bias = reader.get_tensor(bias_key)
  start = (
      0.0
      if initial_positive_probability is None
      else (
          np.log(
              initial_positive_probability / (1 - initial_positive_probability)
          )
          - np.log(bias.shape[0])
      )
  )
  np.testing.assert_allclose(bias, start, atol=0.01)
