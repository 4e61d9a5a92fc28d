"""The objective registry: every built-in is found by name and by config."""

import pytest

from official_repro.common import cli
from official_repro.data import pretrain_dataloader
from official_repro.modeling.networks import encoders
from official_repro.tasks import objectives

_BUILTINS = ('electra', 'masked_lm', 'script', 'teams')


def test_every_builtin_is_found_by_name_and_by_its_task_config():
  objectives.load_builtin_objectives()
  assert set(_BUILTINS) <= set(objectives.names())
  for name in _BUILTINS:
    objective = objectives.get(name)
    assert objective.name == name
    config = objective.task_config_cls()
    assert objectives.for_task_config(config) is objective


def test_unknown_names_and_configs_list_the_registered_ones():
  objectives.load_builtin_objectives()
  with pytest.raises(cli.UserError, match='electra'):
    objectives.get('elektra')
  with pytest.raises(cli.UserError, match=r'EncoderConfig; registered: \['):
    objectives.for_task_config(encoders.EncoderConfig())


def test_the_flops_shape_is_the_configs():
  config = encoders.EncoderConfig(
      hidden_size=64,
      num_layers=3,
      num_attention_heads=4,
      intermediate_size=256,
      embedding_width=32,
      vocab_size=100,
  )
  shape = objectives.network_shape(config, seq_length=16)
  assert (shape.hidden, shape.layers, shape.embedding) == (64, 3, 32)
  assert (shape.intermediate, shape.heads) == (256, 4)
  assert (shape.seq_length, shape.vocab_size) == (16, 100)


def test_records_or_a_vocabulary_size_are_needed():
  data = pretrain_dataloader.PretrainDataConfig(input_path='')
  with pytest.raises(cli.UserError, match='encoder.vocab_size'):
    objectives.resolve_vocab_size(encoders.EncoderConfig(), data)
