"""Objectives and backbones are plug-ins: a module and a gin string each.

`tests/plugins/` holds a test-only objective and a test-only backbone that
no file of the package names. Each is selected by gin alone (an `import`
statement and its name) and trains on every backbone / under an existing
objective, which is what "adding TEAMS or SCRIPT is one module, one gin file
and one test" needs.
"""

import numpy as np
import pytest

from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import pretrained
from official_repro.tasks import objectives

_FROZEN_GENERATOR = ['import tests.plugins.frozen_generator_mlm',
                     "experiment.objective = 'frozen_generator_mlm'"]
_REZERO = ['import tests.plugins.rezero_backbone',
           "encoder.backbone = 'rezero'"]
_TINY_CONVBERT = ['convbert.kernel_size = 3']


@pytest.mark.parametrize('backbone', ['bert', 'albert', 'convbert', 'rezero'])
def test_test_only_objective_trains_on_every_backbone(run_tiny_pretraining,
                                                      tmp_path, backbone):
  backbone_bindings = (_REZERO if backbone == 'rezero' else
                       [f'encoder.backbone = {backbone!r}'])
  if backbone == 'convbert':
    backbone_bindings += _TINY_CONVBERT
  result = run_tiny_pretraining(
      tmp_path, [], [*_FROZEN_GENERATOR, *backbone_bindings], mode='train')
  assert result['global_step'] == 2
  assert np.isfinite(result['train']['training_loss'])
  assert 0.0 <= result['train']['masked_lm_accuracy'] <= 1.0
  # The objective's encoder was exported like any other's.
  resolved = pretrained.resolve(str(tmp_path))
  assert resolved.config.backbone == backbone
  assert objectives.get('frozen_generator_mlm').encoder_field == 'encoder'


def test_test_only_objective_trains_the_encoder_not_the_generator():
  from tests.plugins import frozen_generator_mlm  # pylint: disable=g-import-not-at-top
  config = encoders.EncoderConfig(
      hidden_size=16, num_layers=2, num_attention_heads=2,
      intermediate_size=32, vocab_size=30, max_position_embeddings=16)
  task = frozen_generator_mlm.FrozenGeneratorTask(
      frozen_generator_mlm.FrozenGeneratorPretrainConfig(
          model=frozen_generator_mlm.FrozenGeneratorModelConfig(
              encoder=config)))
  model = task.build_model()
  ids = np.arange(16, dtype=np.int32).reshape(2, 8) % 25 + 5
  model(dict(input_word_ids=ids, input_mask=np.ones_like(ids),
             input_type_ids=np.zeros_like(ids),
             masked_lm_positions=np.array([[1, 2], [3, 0]], np.int32),
             masked_lm_ids=np.array([[7, 8], [9, 0]], np.int32),
             masked_lm_weights=np.array([[1, 1], [1, 0]], np.float32)))
  trainable = {v.ref() for v in model.trainable_variables}
  assert not trainable & {v.ref() for v in model.generator.weights}
  assert {v.ref() for v in model.discriminator.trainable_variables} <= (
      trainable)


@pytest.mark.parametrize('gin_files, bindings', [
    (['gin/pretrain/electra.gin'], ['electra.generator_size = 0.5']),
    (['gin/pretrain/masked_lm.gin'], []),
])
def test_test_only_backbone_trains_under_existing_objectives(
    run_tiny_pretraining, tmp_path, gin_files, bindings):
  result = run_tiny_pretraining(tmp_path, gin_files, [*_REZERO, *bindings],
                                mode='train')
  assert result['global_step'] == 2
  assert np.isfinite(result['train']['training_loss'])
  assert 'rezero' in encoders.backbone_names()
  resolved = pretrained.resolve(str(tmp_path))
  assert resolved.config.backbone == 'rezero'
  assert resolved.config.options_dict() == {'use_layer_norm': False}
