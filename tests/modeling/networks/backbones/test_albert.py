"""The ALBERT backbone: one block applied at every layer."""

from official_repro.modeling.networks import encoders
from tests.modeling.networks.test_encoders import _config
from tests.modeling.networks.test_encoders import _inputs
from tests.modeling.networks.test_encoders import _num_params


def test_albert_applies_one_block_to_every_layer():
  one = encoders.build_encoder(_config(backbone='albert', num_layers=1))
  six = encoders.build_encoder(_config(backbone='albert', num_layers=6))
  one(_inputs())
  six(_inputs())
  assert _num_params(one) == _num_params(six)
  blocks = {id(layer) for layer in six.layers if 'transformer' in layer.name}
  assert len(blocks) == 1
  bert = encoders.build_encoder(_config(backbone='bert', num_layers=6))
  assert _num_params(bert) > _num_params(six)
