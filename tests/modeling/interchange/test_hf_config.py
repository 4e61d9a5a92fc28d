"""`config.json` to our encoder config and back, against `transformers`."""

import dataclasses

import pytest
import transformers

from official_repro.common import cli
from official_repro.modeling.interchange import hf_config

_CONFIG_CLASSES = dict(
    bert=transformers.BertConfig,
    electra=transformers.ElectraConfig,
    albert=transformers.AlbertConfig,
    convbert=transformers.ConvBertConfig,
)

# What decides the architecture of a model: a round trip must keep these.
_FIELDS = (
    'vocab_size hidden_size num_hidden_layers num_attention_heads '
    'intermediate_size hidden_act max_position_embeddings type_vocab_size '
    'layer_norm_eps initializer_range hidden_dropout_prob '
    'attention_probs_dropout_prob embedding_size head_ratio '
    'conv_kernel_size num_groups num_hidden_groups inner_group_num'
).split()


def _architecture(config):
  return {f: getattr(config, f) for f in _FIELDS if hasattr(config, f)}


@pytest.mark.parametrize('model_type', hf_config.MODEL_TYPES)
def test_hugging_face_defaults_round_trip(model_type):
  original = _CONFIG_CLASSES[model_type](vocab_size=100, num_hidden_layers=2)
  if model_type == 'bert':  # 'gelu' is exact; 'gelu_new' maps back to it
    original.hidden_act = 'gelu'
  ours = hf_config.encoder_config(original.to_dict(), 'config.json')
  assert ours.model_type == model_type
  written = hf_config.hf_config(ours.encoder, model_type, 'Model')
  rebuilt = _CONFIG_CLASSES[model_type](**written)
  assert _architecture(rebuilt) == _architecture(original)


def test_gelu_variants_map_to_the_two_forms():
  for name, ours in (('gelu', 'gelu_erf'), ('gelu_new', 'gelu_tanh')):
    config = transformers.BertConfig(hidden_act=name).to_dict()
    encoder = hf_config.encoder_config(config, 'c').encoder
    assert encoder.hidden_activation == ours


def test_labels_are_read_with_integer_keys():
  config = transformers.BertConfig(id2label={0: 'no', 1: 'yes'}).to_dict()
  architecture = hf_config.encoder_config(config, 'c')
  assert architecture.num_labels == 2
  assert architecture.id2label == {0: 'no', 1: 'yes'}


@pytest.mark.parametrize(
    'model_type,change,named',
    [
        ('bert', dict(model_type='roberta'), 'model_type'),
        ('bert', dict(position_embedding_type='relative_key'), 'position_'),
        ('bert', dict(layer_norm_eps=1e-5), 'layer_norm_eps'),
        ('bert', dict(hidden_act='silu'), 'hidden_act'),
        ('albert', dict(num_hidden_groups=2), 'num_hidden_groups'),
        ('albert', dict(inner_group_num=2), 'inner_group_num'),
    ],
)
def test_settings_our_encoders_cannot_have_are_named(model_type, change, named):
  config = _CONFIG_CLASSES[model_type]().to_dict()
  config.update(change)
  with pytest.raises(cli.UserError, match=f'^model/config.json: {named}'):
    hf_config.encoder_config(config, 'model/config.json')


def test_model_type_for_picks_the_class_that_holds_the_encoder():
  bert = hf_config.encoder_config(transformers.BertConfig().to_dict(), 'c')
  assert hf_config.model_type_for(bert.encoder, electra=False) == 'bert'
  assert hf_config.model_type_for(bert.encoder, electra=True) == 'electra'
  narrow = dataclasses.replace(bert.encoder, embedding_width=128)
  assert hf_config.model_type_for(narrow, electra=False) == 'electra'
  convbert = hf_config.encoder_config(
      transformers.ConvBertConfig().to_dict(), 'c'
  ).encoder
  ablation = dataclasses.replace(
      convbert, options=dict(convbert.options_dict(), conv_only=True)
  )
  with pytest.raises(cli.UserError, match='conv_only'):
    hf_config.model_type_for(ablation, electra=False)
