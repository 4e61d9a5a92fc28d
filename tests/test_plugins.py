"""Objectives and backbones are plug-ins: a module and a gin string each.

`tests/plugins/` holds a test-only objective and a test-only backbone that
no file of the package names. Each is selected by gin alone (an `import`
statement and its name) and trains on every backbone / under an existing
objective, which is what "adding TEAMS or SCRIPT is one module, one gin file
and one test" needs.
"""

import dataclasses

import numpy as np
import pytest

from official_repro.metrics import flops
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import pretrained
from official_repro.tasks import objectives
from tests.plugins import rezero_backbone

_FROZEN_GENERATOR = [
    'import tests.plugins.frozen_generator_mlm',
    "experiment.objective = 'frozen_generator_mlm'",
]
_REZERO = [
    'import tests.plugins.rezero_backbone',
    "encoder.backbone = 'rezero'",
]
_TINY_CONVBERT = ['convbert.kernel_size = 3']


# Every registered backbone: the built-in ones and the test-only one.
@pytest.mark.slow
@pytest.mark.parametrize('backbone', encoders.backbone_names())
def test_test_only_objective_trains_on_every_backbone(
    run_tiny_pretraining, tmp_path, backbone
):
  backbone_bindings = (
      _REZERO if backbone == 'rezero' else [f'encoder.backbone = {backbone!r}']
  )
  if backbone == 'convbert':
    backbone_bindings += _TINY_CONVBERT
  result = run_tiny_pretraining(
      tmp_path, [], [*_FROZEN_GENERATOR, *backbone_bindings], mode='train'
  )
  assert result['global_step'] == 2
  assert np.isfinite(result['train']['training_loss'])
  assert 0.0 <= result['train']['masked_lm_accuracy'] <= 1.0
  # The objective's encoder was exported like any other's.
  resolved = pretrained.resolve(str(tmp_path))
  assert resolved.config.backbone == backbone


def test_test_only_objective_trains_the_encoder_not_the_generator():
  from tests.plugins import frozen_generator_mlm  # pylint: disable=g-import-not-at-top

  config = encoders.EncoderConfig(
      hidden_size=16,
      num_layers=2,
      num_attention_heads=2,
      intermediate_size=32,
      vocab_size=30,
      max_position_embeddings=16,
  )
  task = frozen_generator_mlm.FrozenGeneratorTask(
      frozen_generator_mlm.FrozenGeneratorPretrainConfig(
          model=frozen_generator_mlm.FrozenGeneratorModelConfig(encoder=config)
      )
  )
  model = task.build_model()
  ids = np.arange(16, dtype=np.int32).reshape(2, 8) % 25 + 5
  model(
      dict(
          input_word_ids=ids,
          input_mask=np.ones_like(ids),
          input_type_ids=np.zeros_like(ids),
          masked_lm_positions=np.array([[1, 2], [3, 0]], np.int32),
          masked_lm_ids=np.array([[7, 8], [9, 0]], np.int32),
          masked_lm_weights=np.array([[1, 1], [1, 0]], np.float32),
      )
  )
  trainable = {v.ref() for v in model.trainable_variables}
  assert not trainable & {v.ref() for v in model.generator.weights}
  clone = type(model).from_config(model.get_config())
  assert clone.get_config() == model.get_config()
  assert {v.ref() for v in model.discriminator.trainable_variables} <= (
      trainable
  )


@pytest.mark.parametrize(
    'gin_files, bindings',
    [
        # The test-only backbone also trains under every objective in the
        # slow tier (tests/training/test_mixed_precision.py).
        pytest.param(
            ['gin/pretrain/electra.gin'],
            ['electra.generator_size = 0.5'],
            marks=pytest.mark.slow,
        ),
        (['gin/pretrain/masked_lm.gin'], []),
    ],
)
def test_test_only_backbone_trains_under_existing_objectives(
    run_tiny_pretraining, tmp_path, gin_files, bindings
):
  result = run_tiny_pretraining(
      tmp_path, gin_files, [*_REZERO, *bindings], mode='train'
  )
  assert result['global_step'] == 2
  assert np.isfinite(result['train']['training_loss'])
  resolved = pretrained.resolve(str(tmp_path))
  assert resolved.config.backbone == 'rezero'
  assert resolved.config.options_dict() == {'use_layer_norm': False}


@pytest.mark.parametrize(
    'objective, bindings, message',
    [
        (
            'masked_lm',
            ["encoder.backbone = 'bert'", 'convbert.kernel_size = 3'],
            r"convbert.kernel_size would be ignored: encoder.backbone='bert'",
        ),
        (
            'masked_lm',
            ['electra.temperature = 0.5'],
            r'electra.temperature would be ignored: '
            r"experiment.objective='masked_lm'",
        ),
    ],
)
def test_settings_of_an_unselected_plug_in_are_refused(
    tiny_records, objective, bindings, message
):
  import gin  # pylint: disable=g-import-not-at-top
  from official_repro.training import gin_utils  # pylint: disable=g-import-not-at-top

  gin.clear_config()
  try:
    gin_utils.parse_config(
        [],
        [
            'encoder.hidden_size = 16',
            'encoder.num_layers = 1',
            'encoder.num_attention_heads = 2',
            'encoder.intermediate_size = 32',
            f'pretrain_data.input_path = {tiny_records!r}',
            'pretrain_data.max_seq_length = 32',
            'pretrain_data.train_batch_size = 8',
            *bindings,
        ],
    )
    with pytest.raises(ValueError, match=message):
      objectives.task_config_from_gin(objective)
  finally:
    gin.clear_config()


@pytest.mark.parametrize('use_layer_norm', [False, True])
def test_test_only_backbone_declares_its_own_flops_terms(use_layer_norm):
  config = encoders.EncoderConfig(
      backbone='rezero',
      hidden_size=16,
      num_layers=2,
      num_attention_heads=2,
      intermediate_size=32,
      vocab_size=100,
      options=dict(use_layer_norm=use_layer_norm),
  )
  shape = objectives.network_shape(config, seq_length=8)
  assert shape.block == rezero_backbone.ReZeroFlops(use_layer_norm)
  terms = flops.block_terms(shape)
  assert terms['attention_rezero_scale'] == terms['ffn_rezero_scale'] == 16
  assert ('ffn_layer_norm' in terms) == use_layer_norm
  bert = dataclasses.replace(shape, block=flops.BlockFlops())
  layer_norms = 0 if use_layer_norm else flops.LAYER_NORM_FLOPS * (1 + 16)
  assert flops.block_flops(shape) == (
      flops.block_flops(bert) + 2 * 16 - layer_norms
  )
