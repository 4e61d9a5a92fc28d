"""The encoder's gin settings: `encoder.<field>` and `<backbone>.<option>`.

`modeling/networks/encoders.py` knows nothing of gin; this module makes
`EncoderConfig` the configurable `encoder` and each registered backbone's
options the configurable of its name (`convbert.kernel_size = 9`), also for
backbones a gin `import` registers later. `encoder_config()` validates the
result with errors naming the bindings (`encoder.hidden_size=30 is not
divisible by encoder.num_attention_heads=4.`).
"""

import dataclasses
from typing import Any, Callable, Dict

import gin

from official_repro.common import gin_dataclass
from official_repro.modeling import arguments
from official_repro.modeling.networks import encoders

# The gin configurable of each backbone's options, by backbone name.
_OPTION_FACTORIES: Dict[str, Callable[..., Any]] = {}


def _register_options(backbone: encoders.Backbone) -> None:
  if backbone.options_cls is not None and backbone.name not in (
      _OPTION_FACTORIES
  ):
    _OPTION_FACTORIES[backbone.name] = gin_dataclass.external_configurable(
        backbone.options_cls, backbone.name
    )


def bindings(backbone: str) -> arguments.Namer:
  """Names `EncoderConfig` arguments `encoder.<field>`, `<backbone>.<opt>`."""

  def binding(argument: str) -> str:
    option = argument.removeprefix('options.')
    if option != argument:
      return f'{backbone}.{option}'
    return f'encoder.{argument}'

  return binding


_ENCODER = gin_dataclass.external_configurable(
    encoders.EncoderConfig, 'encoder', exclude=('options',)
)
# The fields gin must bind (their dataclass defaults are placeholders).
_REQUIRED = (
    'hidden_size',
    'num_layers',
    'num_attention_heads',
    'intermediate_size',
)


def encoder_config() -> encoders.EncoderConfig:
  """The encoder the gin bindings describe, with its backbone's options.

  Errors name the bindings (gin's RuntimeError for a missing one).
  """
  config = _ENCODER(**{field: gin.REQUIRED for field in _REQUIRED})
  backbone = encoders.get_backbone(config.backbone, 'encoder.backbone')
  gin_dataclass.check_unbound(
      [name for name in _OPTION_FACTORIES if name != backbone.name],
      f'encoder.backbone={backbone.name!r}',
  )
  if backbone.options_cls is not None:
    options = _OPTION_FACTORIES[backbone.name]()
    config = config.with_options(dataclasses.asdict(options))
  with arguments.renamed(bindings(backbone.name)):
    return encoders.validate(config)


encoders.add_registration_hook(_register_options)
