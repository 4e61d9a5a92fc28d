"""The encoder network every backbone builds: outputs and serialization."""

import numpy as np
import pytest

from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import transformer_encoder
from tests.modeling.networks.test_encoders import _config
from tests.modeling.networks.test_encoders import _inputs


@pytest.mark.parametrize('backbone', ['bert', 'albert'])
def test_output_shapes(backbone):
  encoder = encoders.build_encoder(_config(backbone=backbone))
  assert isinstance(encoder, transformer_encoder.TransformerEncoder)
  outputs = encoder(_inputs())
  assert outputs['sequence_output'].shape == (2, 8, 32)
  assert outputs['pooled_output'].shape == (2, 32)
  assert encoder.get_embedding_table().shape == (50, 16)


@pytest.mark.slow
@pytest.mark.parametrize('backbone', ['bert', 'albert', 'convbert'])
def test_config_round_trip(backbone):
  encoder = encoders.build_encoder(_config(backbone=backbone))
  clone = type(encoder).from_config(encoder.get_config())
  inputs = _inputs()
  encoder(inputs)
  clone(inputs)
  assert clone.get_config() == encoder.get_config()
  assert [v.shape for v in clone.trainable_variables] == [
      v.shape for v in encoder.trainable_variables
  ]
  assert len({id(b) for b in clone.transformer_layers}) == len(
      {id(b) for b in encoder.transformer_layers}
  )
  clone.set_weights(encoder.get_weights())
  np.testing.assert_allclose(
      clone(inputs, training=False)['sequence_output'],
      encoder(inputs, training=False)['sequence_output'],
      atol=1e-6,
  )
