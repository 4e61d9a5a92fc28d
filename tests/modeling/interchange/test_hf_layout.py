"""The name and layout table against Hugging Face's own models.

The reference is `transformers`' PyTorch-to-TF name mapping of each model
type (`hf_reference.build`): the table must name exactly the base model's
parameters, each once, with conversions that give their shapes and invert
each other.
"""

import numpy as np
import pytest

from official_repro.modeling.interchange import hf_config
from official_repro.modeling.interchange import hf_layout
from official_repro.modeling.interchange import hf_models
from tests.modeling.interchange import hf_reference

pytestmark = pytest.mark.xdist_group('hf_layout')


def _encoder_and_state(model_type):
  model, state = hf_reference.build(model_type)
  config = hf_config.encoder_config(model.config.to_dict(), 'test')
  return hf_models.build_encoder(config.encoder), state


@pytest.fixture(scope='module', params=hf_config.MODEL_TYPES)
def built(request):
  """(model type, our encoder, Hugging Face's PyTorch state dict)."""
  return (request.param, *_encoder_and_state(request.param))


def test_the_table_names_every_base_model_parameter_once(built):
  model_type, encoder, state = built
  params = hf_layout.encoder_parameters(encoder, model_type, prefix='')
  names = [param.name for param in params]
  assert len(names) == len(set(names))
  assert set(names) == set(state)
  named = {id(param.variable) for param in params}
  unnamed = [v.name for v in encoder.weights if id(v) not in named]
  # Hugging Face's ELECTRA and ConvBERT base models have no pooler.
  has_pooler = model_type in ('bert', 'albert')
  assert unnamed == (
      []
      if has_pooler
      else ['pooler_transform/kernel:0', 'pooler_transform/bias:0']
  )


def test_the_conversions_give_the_shapes_and_invert_each_other(built):
  model_type, encoder, state = built
  for param in hf_layout.encoder_parameters(encoder, model_type, prefix=''):
    theirs = state[param.name]
    assert param.to_ours(theirs).shape == tuple(param.variable.shape), param
    ours = param.variable.numpy()
    np.testing.assert_array_equal(param.to_theirs(ours).shape, theirs.shape)
    np.testing.assert_array_equal(param.to_ours(param.to_theirs(ours)), ours)


def test_a_prefix_is_put_before_every_name():
  encoder, _ = _encoder_and_state('electra')
  params = hf_layout.encoder_parameters(encoder, 'electra', prefix='electra.')
  assert all(param.name.startswith('electra.') for param in params)
  assert 'electra.embeddings_project.weight' in {p.name for p in params}
