"""The encoder from gin: `encoder.*`, `<backbone>.*`, mistakes by binding."""

import pytest

from official_repro.common import cli
from official_repro.tasks import encoder_gin
from official_repro.training import gin_utils

_TINY = [
    'encoder.hidden_size = 32',
    'encoder.num_layers = 1',
    'encoder.num_attention_heads = 2',
    'encoder.intermediate_size = 64',
]


pytestmark = pytest.mark.usefixtures('clean_gin')


def _encoder(*bindings):
  gin_utils.parse_config([], [*_TINY, *bindings])
  return encoder_gin.encoder_config()


def test_bindings_and_backbone_options_build_the_config():
  config = _encoder("encoder.backbone = 'convbert'", 'convbert.kernel_size = 3')
  assert (config.backbone, config.hidden_size) == ('convbert', 32)
  assert config.options_dict()['kernel_size'] == 3
  assert config.options_dict()['head_ratio'] == 2  # ConvBertOptions' default
  assert config.hidden_activation == 'gelu_erf'  # The backbone's reference.


@pytest.mark.parametrize(
    'bindings, message',
    [
        (
            ['encoder.num_attention_heads = 3'],
            'encoder.hidden_size=32 is not divisible by '
            'encoder.num_attention_heads=3.',
        ),
        (
            ['encoder.num_layers = 0'],
            'encoder.num_layers must be a positive int, got 0.',
        ),
        (
            ["encoder.hidden_activation = 'gelu'"],
            "encoder.hidden_activation='gelu' is ambiguous",
        ),
        (["encoder.backbone = 'bret'"], 'encoder.backbone must be one of'),
        (
            ["encoder.backbone = 'convbert'", 'convbert.kernel_size = 4'],
            'convbert.kernel_size=4 must be odd.',
        ),
        (
            ["encoder.backbone = 'convbert'", 'convbert.num_groups = 3'],
            'encoder.hidden_size=32 is not divisible by convbert.num_groups=3.',
        ),
        (
            [
                "encoder.backbone = 'convbert'",
                'convbert.conv_only = True',
                'convbert.attention_only = True',
            ],
            'convbert.conv_only and convbert.attention_only exclude each other',
        ),
    ],
)
def test_mistakes_name_the_binding(bindings, message):
  """The config's own errors name its fields; gin's name the bindings."""
  with pytest.raises(cli.UserError) as raised:
    _encoder(*bindings)
  assert str(raised.value).startswith(message), str(raised.value)
  assert 'EncoderConfig' not in str(raised.value)


def test_a_missing_required_binding_is_named():
  gin_utils.parse_config([], _TINY[:-1])
  with pytest.raises(RuntimeError) as raised:
    encoder_gin.encoder_config()
  assert cli.missing_gin_bindings(raised.value) == (
      'gin: encoder.intermediate_size not set; bind it in a --gin_file or '
      'with --gin_param=encoder.intermediate_size=<value>.'
  )


def test_a_backbone_imported_by_gin_has_its_options_at_once():
  """The lines after the `import` line may bind the new backbone's options."""
  config = _encoder(
      'import tests.plugins.rezero_backbone',
      "encoder.backbone = 'rezero'",
      'rezero.use_layer_norm = True',
  )
  assert config.options_dict() == {'use_layer_norm': True}


def test_bindings_name_fields_and_options():
  binding = encoder_gin.bindings('convbert')
  assert binding('hidden_size') == 'encoder.hidden_size'
  assert binding('options.kernel_size') == 'convbert.kernel_size'
