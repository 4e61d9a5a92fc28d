"""The encoder's gin settings: `encoder.<field>` and `<backbone>.<option>`.

`modeling/networks/encoders.py` knows nothing of gin; this module makes its
`EncoderConfig` the gin configurable `encoder` (`encoder.hidden_size = 256`;
`options` is not bound directly) and the options dataclass of every
registered backbone the configurable of the backbone's name
(`convbert.kernel_size = 9`). A backbone registered later, by a module that a
gin `import` line loads, gets its configurable as it registers (the hook of
`encoders.add_registration_hook`), so the lines after the import may bind it.

`encoder_config()` is the encoder the gin bindings describe: the selected
backbone's options filled from its configurable, then checked by
`encoders.validate`, whose errors name the config's fields
(`EncoderConfig: hidden_size=30 is not divisible by num_attention_heads=4.`);
here they name the bindings to change (`encoder.hidden_size=30 is not
divisible by encoder.num_attention_heads=4.`, `convbert.kernel_size=4 must
be odd.`), as `bindings` names them for other callers.
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
  """The gin binding of each `EncoderConfig` argument, for `backbone`.

  `<field>` is `encoder.<field>` and `options.<option>` (`encoders.
  config_error`) is `<backbone>.<option>`.
  """

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

  Raises:
    RuntimeError: gin's, for a required binding that is missing.
    UserError: gin binds options of another backbone, or the config is
      invalid (naming the bindings).
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
