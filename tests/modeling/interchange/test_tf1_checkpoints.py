"""TF1 checkpoints of ELECTRA and ConvBERT, under their original names."""

import os

import numpy as np
import pytest
import tensorflow as tf

from official_repro.common import cli
from official_repro.modeling.interchange import hf_models
from official_repro.modeling.interchange import tf1_checkpoints
from tests.modeling.interchange import hf_reference


def _tf1_name(name: str, network: str) -> str:
  """The reference code's variable name of a Hugging Face parameter.

  Written out from the original `modeling.py` scopes, independently of the
  reader's table.
  """
  tf1 = name
  if tf1.startswith('electra.'):
    rest = tf1[len('electra.') :]
    scope = (
        'generator'
        if network == 'generator' and not rest.startswith('embeddings.')
        else 'electra'
    )
    tf1 = f'{scope}.{rest}'
  tf1 = tf1.replace(
      'generator_lm_head.bias', 'generator_predictions.output_bias'
  )
  tf1 = tf1.replace('.dense_prediction.', '.dense_1.')
  for ours, theirs in (
      ('key_conv_attn_layer', 'conv_attn_key'),
      ('conv_kernel_layer', 'conv_attn_kernel'),
      ('conv_out_layer', 'conv_attn_point'),
  ):
    tf1 = tf1.replace(ours, theirs)
  parts = tf1.split('.')
  out = []
  index = 0
  while index < len(parts):
    if parts[index] == 'layer' and parts[index + 1].isdigit():
      out.append(f'layer_{parts[index + 1]}')
      index += 2
      continue
    out.append(parts[index])
    index += 1
  if out[-1] == 'weight':
    if out[-2].endswith('_embeddings'):
      out.pop()
    elif out[-2] == 'LayerNorm':
      out[-1] = 'gamma'
    elif out[-2] in ('depthwise', 'pointwise'):
      out[-2:] = [f'{out[-2]}_kernel']
    else:
      out[-1] = 'kernel'
  elif out[-1] == 'bias' and out[-2] == 'LayerNorm':
    out[-1] = 'beta'
  return '/'.join(out)


def _tf1_layout(name: str, array: np.ndarray) -> np.ndarray:
  if name.endswith('depthwise_kernel'):
    return np.transpose(array, (2, 0, 1))  # [in, 1, k] -> [k, in, 1]
  if name.endswith('pointwise_kernel'):
    return np.transpose(array, (2, 1, 0))  # [out, in, 1] -> [1, in, out]
  if name.endswith('conv_attn_key/bias'):
    return array.reshape(-1)
  if name.endswith('/kernel') and '/g_dense/' not in name:
    return array.T
  return array


def _write_tf1(path, variables):
  names = sorted(variables)
  tf.raw_ops.SaveV2(
      prefix=path,
      tensor_names=names,
      shape_and_slices=[''] * len(names),
      tensors=[tf.constant(variables[n]) for n in names],
  )


def _add(variables, state, network, grouped=False):
  for name, array in state.items():
    if 'decoder' in name or name.endswith('generator_lm_head.weight'):
      continue
    tf1 = _tf1_name(name, network)
    if grouped and ('/intermediate/dense/' in tf1 or '/output/dense/' in tf1):
      tf1 = tf1.replace('/dense/', '/g_dense/')
    variables[tf1] = _tf1_layout(tf1, array)
    variables[f'{tf1}/adam_m'] = np.zeros_like(variables[tf1])


def _outputs(model, ids, mask, types):
  return model(
      input_ids=ids, attention_mask=mask, token_type_ids=types, training=False
  ).logits.numpy()


def _electra_pair():
  """A discriminator and a generator sharing its embeddings.

  The discriminator is 64 wide with 1 head of 64, the generator 32 wide with
  4 heads; they share the embedding tables as the reference code's do.
  """
  discriminator, disc_state = hf_reference.build(
      'electra',
      'rtd',
      hidden_size=64,
      num_attention_heads=1,
      intermediate_size=128,
      hidden_act='gelu',
  )
  generator, gen_state = hf_reference.build(
      'electra', 'mlm', seed=5, hidden_act='gelu'
  )
  for name in list(gen_state):
    if name.startswith('electra.embeddings.'):
      gen_state[name] = disc_state[name]
  hf_reference.pt_utils.load_pytorch_state_dict_in_tf2_model(
      generator, gen_state
  )
  return discriminator, disc_state, generator, gen_state


@pytest.fixture(scope='module')
def electra_checkpoint(tmp_path_factory):
  directory = tmp_path_factory.mktemp('electra_tf1')
  discriminator, disc_state, generator, gen_state = _electra_pair()
  variables = {'global_step': np.array(1000, np.int64)}
  _add(variables, disc_state, 'discriminator')
  _add(variables, gen_state, 'generator')
  _write_tf1(str(directory / 'model.ckpt-1000'), variables)
  (directory / 'vocab.txt').write_text('\n'.join(hf_reference.VOCAB) + '\n')
  return directory, discriminator, generator


def test_the_kind_is_detected_from_the_variables(electra_checkpoint):
  directory, _, _ = electra_checkpoint
  assert tf1_checkpoints.detect(str(directory)) == 'electra_tf1'
  assert tf1_checkpoints.detect(str(directory / 'model.ckpt-1000')) == (
      'electra_tf1'
  )
  assert tf1_checkpoints.detect(str(directory / 'nothing')) is None


def test_electra_discriminator_reads_with_its_architecture_from_the_shapes(
    electra_checkpoint,
):
  directory, discriminator, _ = electra_checkpoint
  folder = tf1_checkpoints.read(str(directory), 'electra_tf1')
  assert folder.config['num_attention_heads'] == 1  # 64 / head size 64
  assert folder.lower_case  # no upper-case letter in the vocabulary
  imported = hf_models.from_folder(folder)
  assert imported.heads == ('rtd',)
  # The reference code's `modeling.gelu` is the exact one (erf).
  assert imported.encoder_config.hidden_activation == 'gelu_erf'
  networks = hf_models.build(imported)
  ids, mask, types = hf_reference.inputs()
  sequence = networks.encoder(
      dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)
  )['sequence_output']
  real = mask.astype(bool)
  np.testing.assert_allclose(
      networks.rtd_head(sequence).numpy()[real],
      _outputs(discriminator, ids, mask, types)[real],
      atol=1e-5,
  )


def test_electra_generator_reads_with_a_config_beside_it(
    electra_checkpoint, tmp_path
):
  """32 wide with 4 heads of 8: the heads come from the config given."""
  directory, _, generator = electra_checkpoint
  config = tmp_path / 'config.json'
  config.write_text('{"num_attention_heads": 4}')
  folder = tf1_checkpoints.read(
      str(directory), 'electra_tf1', 'generator', config_file=str(config)
  )
  imported = hf_models.from_folder(folder)
  assert imported.heads == ('mlm',)
  networks = hf_models.build(imported)
  ids, mask, types = hf_reference.inputs()
  sequence = networks.encoder(
      dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)
  )['sequence_output']
  real = mask.astype(bool)
  theirs = generator(
      input_ids=ids,
      attention_mask=mask,
      token_type_ids=types,
      output_hidden_states=True,
  )
  np.testing.assert_allclose(
      sequence.numpy()[real], theirs.hidden_states[-1].numpy()[real], atol=1e-5
  )
  # Both heads apply the exact GELU, as the reference code's do.
  positions = tf.constant(np.tile(np.arange(10, dtype=np.int32), (2, 1)))
  ours = networks.mlm_head(sequence, masked_positions=positions).numpy()
  np.testing.assert_allclose(ours[real], theirs.logits.numpy()[real], atol=1e-5)


def test_convbert_discriminator_with_grouped_feed_forward(tmp_path):
  model, state = hf_reference.build('convbert', 'model', hidden_act='gelu')
  variables = {'global_step': np.array(5, np.int64)}
  _add(
      variables,
      {f'electra.{name}': array for name, array in state.items()},
      'discriminator',
      grouped=True,
  )
  assert any('/g_dense/' in name for name in variables)
  _write_tf1(str(tmp_path / 'model.ckpt-5'), variables)
  (tmp_path / 'vocab.txt').write_text('\n'.join(hf_reference.VOCAB) + '\n')
  (tmp_path / 'config.json').write_text('{"num_attention_heads": 4}')
  assert tf1_checkpoints.detect(str(tmp_path)) == 'convbert_tf1'
  folder = tf1_checkpoints.read(str(tmp_path), 'convbert_tf1')
  assert (folder.config['num_groups'], folder.config['conv_kernel_size']) == (
      2,
      3,
  )
  networks = hf_models.build(hf_models.from_folder(folder))
  ids, mask, types = hf_reference.inputs()
  hf_reference.assert_same_sequence_output(
      networks.encoder, model, ids, mask, types
  )


def test_another_kind_or_network_is_refused_by_name(electra_checkpoint):
  directory, _, _ = electra_checkpoint
  with pytest.raises(cli.UserError, match='--from=electra_tf1'):
    tf1_checkpoints.read(str(directory), 'convbert_tf1')
  with pytest.raises(cli.UserError, match='--network'):
    tf1_checkpoints.read(str(directory), 'electra_tf1', 'critic')
  assert not os.path.exists(os.path.join(directory, 'converted'))


def test_a_conversion_writes_the_layout_fine_tuning_reads(
    electra_checkpoint, tmp_path
):
  """What `python -m official_repro.convert --from=electra_tf1` writes."""
  from official_repro.modeling.interchange import converted  # pylint: disable=g-import-not-at-top
  from official_repro.modeling.networks import pretrained  # pylint: disable=g-import-not-at-top

  directory, _, _ = electra_checkpoint
  record = converted.convert(
      converted.Source(str(directory), kind='electra_tf1'),
      str(tmp_path / 'out'),
  )
  assert record['heads'] == ['rtd'] and record['kind'] == 'electra_tf1'
  encoder = pretrained.resolve(str(tmp_path / 'out'))
  assert (encoder.config.hidden_size, encoder.config.num_attention_heads) == (
      64,
      1,
  )
