"""Hugging Face folders import into our networks and export, exactly."""

import numpy as np
import pytest
import tensorflow as tf

from official_repro.common import cli
from official_repro.modeling.interchange import hf_layout
from official_repro.modeling.interchange import hf_models
from official_repro.modeling.networks import encoders
from tests.modeling.interchange import hf_reference

_ATOL = 1e-5


def _ours(networks, ids, mask, types):
  outputs = networks.encoder(
      dict(input_word_ids=ids, input_mask=mask, input_type_ids=types),
      training=False,
  )
  return outputs['sequence_output'].numpy()


def _hf_sequence(model, ids, mask, types):
  outputs = model(
      input_ids=ids,
      attention_mask=mask,
      token_type_ids=types,
      output_hidden_states=True,
      training=False,
  )
  return outputs.hidden_states[-1].numpy()


def _real(array, mask):
  return array[mask.astype(bool)]


@pytest.mark.slow
@pytest.mark.parametrize(
    'model_type', ['bert', 'electra', 'albert', 'convbert']
)
def test_a_base_model_imports_with_the_same_sequence_output(
    tmp_path, model_type
):
  model, state = hf_reference.build(model_type)
  folder = hf_reference.write_folder(
      str(tmp_path / model_type), model.config, state
  )
  imported = hf_models.read(folder)
  networks = hf_models.build(imported)
  ids, mask, types = hf_reference.inputs()
  np.testing.assert_allclose(
      _real(_ours(networks, ids, mask, types), mask),
      _real(_hf_sequence(model, ids, mask, types), mask),
      atol=_ATOL,
  )
  assert imported.lower_case is True
  assert imported.vocab_tokens == hf_reference.VOCAB


def _all_positions(ids):
  return np.tile(np.arange(ids.shape[1], dtype=np.int32), (ids.shape[0], 1))


@pytest.mark.slow
@pytest.mark.parametrize(
    'model_type', ['bert', 'electra', 'albert', 'convbert']
)
def test_a_masked_lm_imports_with_the_same_logits(tmp_path, model_type):
  """`*ForMaskedLM` (ELECTRA's and ConvBERT's: their generators)."""
  model, state = hf_reference.build(model_type, 'mlm')
  folder = hf_reference.write_folder(str(tmp_path), model.config, state)
  imported = hf_models.read(folder)
  assert imported.heads == ('mlm',)
  networks = hf_models.build(imported)
  ids, mask, types = hf_reference.inputs()
  sequence = networks.encoder(
      dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)
  )['sequence_output']
  ours = networks.mlm_head(
      sequence, masked_positions=tf.constant(_all_positions(ids))
  )
  theirs = model(
      input_ids=ids, attention_mask=mask, token_type_ids=types, training=False
  ).logits
  np.testing.assert_allclose(
      _real(ours.numpy(), mask), _real(theirs.numpy(), mask), atol=_ATOL
  )


def test_an_electra_discriminator_imports_with_its_rtd_logits(tmp_path):
  model, state = hf_reference.build('electra', 'rtd')
  folder = hf_reference.write_folder(str(tmp_path), model.config, state)
  imported = hf_models.read(folder)
  assert imported.heads == ('rtd',) and imported.prefix == 'electra.'
  networks = hf_models.build(imported)
  ids, mask, types = hf_reference.inputs()
  sequence = networks.encoder(
      dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)
  )['sequence_output']
  theirs = model(
      input_ids=ids, attention_mask=mask, token_type_ids=types, training=False
  ).logits
  np.testing.assert_allclose(
      _real(networks.rtd_head(sequence).numpy(), mask),
      _real(theirs.numpy(), mask),
      atol=_ATOL,
  )


def _random_networks(model_type, head=None, seed=3):
  """Our networks of a reference config, with distinct random weights."""
  model, state = hf_reference.build(model_type, head or 'model')
  config = hf_models.hf_config.encoder_config(model.config.to_dict(), 'test')
  encoder = hf_models.build_encoder(config.encoder)
  networks = hf_models.Networks(encoder)
  if head == 'mlm':
    networks.mlm_head = hf_models.build_mlm_head(
        encoder,
        hf_models._mlm_activation(model_type, config.encoder.hidden_activation),
    )
  if head == 'rtd':
    networks.rtd_head = hf_models.build_rtd_head(
        32, config.encoder.hidden_activation
    )
  rng = np.random.RandomState(seed)
  for network in (encoder, networks.mlm_head, networks.rtd_head):
    for variable in network.weights if network is not None else ():
      variable.assign(rng.normal(0, 0.2, variable.shape).astype(np.float32))
  return networks, config.encoder, model


@pytest.mark.slow
@pytest.mark.parametrize(
    'model_type, head',
    [
        ('bert', None),
        ('bert', 'mlm'),
        ('electra', None),
        ('electra', 'rtd'),
        ('electra', 'mlm'),
        ('albert', 'mlm'),
        ('convbert', None),
        ('convbert', 'mlm'),
    ],
)
def test_an_export_loads_into_hugging_face_with_the_same_outputs(
    tmp_path, model_type, head
):
  networks, config, model = _random_networks(model_type, head)
  written = hf_models.export(
      str(tmp_path),
      networks.encoder,
      config,
      hf_reference.VOCAB,
      lower_case=True,
      electra=model_type == 'electra',
      mlm_head=networks.mlm_head,
      rtd_head=networks.rtd_head,
  )
  assert written['class'] == type(model).__name__[2:]
  folder = hf_models.hf_folder.read_folder(str(tmp_path))
  fresh = type(model)(
      type(model.config).from_json_file(str(tmp_path / 'config.json'))
  )
  hf_reference.pt_utils.load_pytorch_state_dict_in_tf2_model(
      fresh, folder.state
  )
  ids, mask, types = hf_reference.inputs()
  sequence = networks.encoder(
      dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)
  )['sequence_output']
  np.testing.assert_allclose(
      _real(sequence.numpy(), mask),
      _real(_hf_sequence(fresh, ids, mask, types), mask),
      atol=_ATOL,
  )
  if head:
    ours = (
        networks.mlm_head(
            sequence, masked_positions=tf.constant(_all_positions(ids))
        )
        if head == 'mlm'
        else networks.rtd_head(sequence)
    )
    theirs = fresh(
        input_ids=ids, attention_mask=mask, token_type_ids=types
    ).logits
    np.testing.assert_allclose(
        _real(ours.numpy(), mask), _real(theirs.numpy(), mask), atol=_ATOL
    )
  # Round trip: read back, every variable equal to the bit.
  back = hf_models.build(hf_models.read(str(tmp_path)))
  for ours, again in zip(networks.encoder.weights, back.encoder.weights):
    if 'pooler' in ours.name and model_type in ('electra', 'convbert'):
      continue  # no pooler in Hugging Face's ELECTRA or ConvBERT
    np.testing.assert_array_equal(ours.numpy(), again.numpy(), ours.name)


def test_a_tf_model_h5_folder_imports_like_its_safetensors(tmp_path):
  """`tf_model.h5` (Keras names) reads as the same PyTorch-named weights."""
  model, state = hf_reference.build('convbert', 'mlm')
  model.save_pretrained(str(tmp_path), safe_serialization=False)
  assert (tmp_path / 'tf_model.h5').exists()
  hf_reference.write_folder(str(tmp_path / 'unused'), model.config, state)
  for name in ('vocab.txt', 'tokenizer_config.json'):
    (tmp_path / name).write_bytes((tmp_path / 'unused' / name).read_bytes())
  folder = hf_models.hf_folder.read_folder(str(tmp_path))
  assert folder.weights_file.endswith('tf_model.h5')
  assert set(folder.state) == set(state)
  for name, array in state.items():
    if name.endswith('key_conv_attn_layer.bias'):  # [out] there, [out, 1] here
      array = array.reshape(-1)
    np.testing.assert_array_equal(folder.state[name], array, name)


@pytest.mark.parametrize('model_type', ['bert', 'convbert'])
def test_a_weight_of_another_size_is_named_in_one_line(model_type):
  config = encoders.EncoderConfig(
      backbone=model_type,
      hidden_size=16,
      num_layers=1,
      num_attention_heads=2,
      intermediate_size=32,
      vocab_size=20,
      max_position_embeddings=8,
  )
  encoder = hf_models.build_encoder(config)
  params = hf_layout.encoder_parameters(encoder, model_type, '')
  state = {p.name: p.to_theirs(p.variable.numpy()) for p in params}
  hf_models.assign(params, dict(state), 'model.safetensors')  # As written.
  name = next(p.name for p in params if 'intermediate.dense.weight' in p.name)
  rows, columns = state[name].shape
  state[name] = np.zeros((rows, columns + 1), np.float32)
  with pytest.raises(cli.UserError, match=f'{name} has shape'):
    hf_models.assign(params, state, 'model.safetensors')
