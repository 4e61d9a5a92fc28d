"""The pretraining-objective registry.

An objective module declares, next to its Model Garden `Task`, an `Objective`
(gin name, config classes, the encoder kept for fine-tuning, FLOPs terms, its
Model Garden counterpart); the experiment builder, FLOPs tool and benchmark
look objectives up here and never name one. Its model config is
gin-configurable under its name, and mistakes read from gin name the bindings.
"""

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Type

import gin

from official.core import config_definitions as cfg
from official_repro.common import cli
from official_repro.common import gin_dataclass
from official_repro.common import registry
from official_repro.data import pretrain_dataloader
from official_repro.metrics import flops as flops_lib
from official_repro.modeling import arguments
from official_repro.modeling.networks import encoders
from official_repro.tasks import encoder_gin

# The package whose modules are searched for built-in objectives.
TASKS_PACKAGE = 'official_repro.tasks'


@dataclasses.dataclass(frozen=True)
class Objective:
  """A registered pretraining objective.

  Attributes:
    name: `experiment.objective` and the gin name of its model config.
    task_config_cls: its Model Garden task config class.
    model_config_cls: the class of `task_config_cls.model`.
    encoder_field: the model-config field of the encoder kept for
      fine-tuning (filled from gin `encoder`).
    required: model-config fields gin must bind.
    derived: model-config fields that `finalize` sets, not gin.
    finalize: `task_config -> task_config`: derived settings and checks,
      raising `arguments.ArgumentError` naming the model config's fields.
    exported_encoder: `model_config -> EncoderConfig` when the kept encoder
      is not the encoder field's config as it is (None: it is).
    flops: `(task_config, seq_length, max_predictions) -> {network:
      flops.NetworkCost}` in ELECTRA's conventions (None: not modelled).
    stock_task_config: `(task_config, stock_train_data, max_predictions) ->`
      Model Garden's task config of the same model (None: none).
  """

  name: str
  task_config_cls: Type[cfg.TaskConfig]
  model_config_cls: Type[Any]
  encoder_field: str
  required: tuple = ()
  derived: tuple = ()
  finalize: Optional[Callable[[cfg.TaskConfig], cfg.TaskConfig]] = None
  exported_encoder: Optional[Callable[[Any], encoders.EncoderConfig]] = None
  flops: Optional[
      Callable[[cfg.TaskConfig, int, int], Dict[str, flops_lib.NetworkCost]]
  ] = None
  stock_task_config: Optional[
      Callable[[cfg.TaskConfig, Any, int], cfg.TaskConfig]
  ] = None

  def bindings(self) -> arguments.Namer:
    """Names gin-bound model-config fields `<name>.<field>`, others as given."""
    bound = {
        field.name for field in dataclasses.fields(self.model_config_cls)
    } - {self.encoder_field, *self.derived}
    return lambda argument: (
        f'{self.name}.{argument}' if argument in bound else argument
    )

  def finalized(self, task_config: cfg.TaskConfig) -> cfg.TaskConfig:
    """`finalize` of a config read from gin: mistakes name the bindings."""
    if self.finalize is None:
      return task_config
    with arguments.renamed(self.bindings()):
      return self.finalize(task_config)

  def exported_encoder_config(self, model_config) -> encoders.EncoderConfig:
    """The config of the encoder kept for fine-tuning."""
    if self.exported_encoder is not None:
      return self.exported_encoder(model_config)
    return getattr(model_config, self.encoder_field)


_OBJECTIVES = registry.Registry[Objective](
    'objective', 'experiment.objective', [TASKS_PACKAGE]
)
_MODEL_CONFIG_FACTORIES: Dict[str, Callable[..., Any]] = {}


def register(objective: Objective) -> Objective:
  """Adds an objective (a new name); its model config becomes configurable."""
  _OBJECTIVES.register(objective.name, objective)
  if objective.name not in _MODEL_CONFIG_FACTORIES:
    _MODEL_CONFIG_FACTORIES[objective.name] = (
        gin_dataclass.external_configurable(
            objective.model_config_cls,
            objective.name,
            exclude=(objective.encoder_field, *objective.derived),
        )
    )
  return objective


def load_builtin_objectives() -> None:
  """Imports every module of `official_repro.tasks` (they register)."""
  _OBJECTIVES.load_builtins()


def names() -> List[str]:
  """The names of the registered objectives, sorted."""
  return sorted(_OBJECTIVES.names())


def get(name: str) -> Objective:
  """The objective `name` (UserError naming the registered ones)."""
  return _OBJECTIVES.get(name)


def for_task_config(task_config: cfg.TaskConfig) -> Objective:
  """The objective whose task config `task_config` is."""
  for objective in _OBJECTIVES.entries():
    if type(task_config) is objective.task_config_cls:  # pylint: disable=unidiomatic-typecheck
      return objective
  raise cli.UserError(
      f'No registered objective has task config '
      f'{type(task_config).__name__}; registered: {names()}.'
  )


def resolve_vocab_size(
    config: encoders.EncoderConfig, data: pretrain_dataloader.PretrainDataConfig
) -> encoders.EncoderConfig:
  """Sets the encoder's vocabulary size from the records, checking it.

  Without records (e.g. for FLOPs accounting) the config must have one.
  """
  if not data.input_path:
    if config.vocab_size is None:
      raise cli.UserError(
          'Set pretrain_data.input_path (records) or encoder.vocab_size.'
      )
    return config
  vocab_size, vocab_file = pretrain_dataloader.records_vocabulary(
      data.input_path
  )
  with arguments.renamed(encoder_gin.bindings(config.backbone)):
    return encoders.with_vocab_size(config, vocab_size, source=vocab_file)


def task_config_from_gin(name: str) -> cfg.TaskConfig:
  """The task config of objective `name` from the parsed gin bindings.

  From `<name>.*`, `encoder.*` and `pretrain_data.*`; UserError for another
  objective's bindings or a setting the model refuses.
  """
  objective = get(name)
  load_builtin_objectives()
  gin_dataclass.check_unbound(
      [other for other in _MODEL_CONFIG_FACTORIES if other != name],
      f'experiment.objective={name!r}',
  )
  train_data, validation_data = pretrain_dataloader.pretraining_data_configs()
  encoder = resolve_vocab_size(encoder_gin.encoder_config(), train_data)
  model = _MODEL_CONFIG_FACTORIES[name](
      **{field: gin.REQUIRED for field in objective.required},
      **{objective.encoder_field: encoder},
  )
  task_config = objective.task_config_cls(
      model=model, train_data=train_data, validation_data=validation_data
  )
  return objective.finalized(task_config)


def network_shape(
    config: encoders.EncoderConfig, seq_length: int
) -> flops_lib.NetworkShape:
  """The FLOPs formula's shape of an encoder config."""
  backbone = encoders.get_backbone(config.backbone)
  if backbone.flops_block is None:
    raise cli.UserError(
        f'Backbone {config.backbone!r} declares no FLOPs block '
        '(Backbone.flops_block); its FLOPs are not modelled.'
    )
  config = encoders.validate(config)
  return flops_lib.NetworkShape(
      hidden=config.hidden_size,
      layers=config.num_layers,
      embedding=config.width,
      intermediate=config.intermediate_size,
      heads=config.num_attention_heads,
      seq_length=seq_length,
      vocab_size=config.vocab_size,
      block=backbone.flops_block(config, backbone.parse_options(config)),
  )


def masked_lm_cost(
    config: encoders.EncoderConfig,
    seq_length: int,
    output_fraction: float,
    head: str = 'mlm',
) -> flops_lib.NetworkCost:
  """An encoder with its MLM-shaped `head` on `output_fraction` of tokens."""
  shape = network_shape(config, seq_length)
  return flops_lib.NetworkCost(
      shape,
      config.backbone,
      {head: flops_lib.mlm_head_flops(shape, output_fraction)},
  )
