"""The one registry of fine-tuning tasks: names, Task classes, config builders.

A task module decorates its Task class with `register(names, config_cls,
gin_name)`, which registers it with Model Garden's `task_factory` and maps
each name (gin `finetuning.task`) to a `FinetuningTaskEntry`. The built-in
tasks (modules of `official_repro.tasks`) are imported on the first look-up;
adding a task is one new module.
"""

import dataclasses
from typing import Callable, Optional, Sequence, Tuple, Type

from official.core import base_task
from official.core import config_definitions as cfg
from official.core import task_factory
from official_repro.common import gin_dataclass
from official_repro.common import registry
from official_repro.tasks import finetuning_base


@dataclasses.dataclass(frozen=True)
class FinetuningTaskEntry:
  """What the fine-tuning driver needs to know about one task name.

  Attributes:
    build_config: builds the config from `FinetuneTaskConfig`'s fields as
      keyword arguments; gin `<gin_name>.*` binds the task-specific ones.
    protocol_fields: `RunProtocol` attributes copied into the config.
    group: the benchmark the task belongs to ('glue'), or ''.
    segments: 2 for pairs (question and passage), 1 for one sentence.
  """

  name: str
  task_cls: Type[base_task.Task]
  config_cls: Type[cfg.TaskConfig]
  build_config: Callable[..., cfg.TaskConfig]
  protocol_fields: Tuple[str, ...] = ()
  group: str = ''
  segments: int = 2


_TASKS = registry.Registry[FinetuningTaskEntry](
    'fine-tuning task', 'finetuning.task', ['official_repro.tasks']
)


def register(
    names: Sequence[str],
    config_cls: Type[cfg.TaskConfig],
    gin_name: str = '',
    protocol_fields: Sequence[str] = (),
    group: str = '',
    single_segment: Sequence[str] = (),
) -> Callable[[Type[base_task.Task]], Type[base_task.Task]]:
  """A class decorator registering a Task class under `names` (see the entry).

  `gin_name`: the gin configurable of the fields `config_cls` adds (but
  `protocol_fields`); `single_segment`: the names whose inputs hold one
  segment.
  """
  unknown = set(single_segment) - set(names)
  if unknown:
    raise ValueError(
        f'single_segment names {sorted(unknown)} that are not among the '
        f'names registered, {list(names)}.'
    )

  build_config = config_cls
  if gin_name:
    build_config = _gin_builder(config_cls, gin_name, protocol_fields)

  def decorator(task_cls: Type[base_task.Task]) -> Type[base_task.Task]:
    for name in names:
      _TASKS.register(
          name,
          FinetuningTaskEntry(
              name=name,
              task_cls=task_cls,
              config_cls=config_cls,
              build_config=build_config,
              protocol_fields=tuple(protocol_fields),
              group=group,
              segments=1 if name in single_segment else 2,
          ),
      )
    task_factory.register_task_cls(config_cls)(task_cls)
    return task_cls

  return decorator


def _gin_builder(
    config_cls: Type[cfg.TaskConfig],
    gin_name: str,
    protocol_fields: Sequence[str],
) -> Callable[..., cfg.TaskConfig]:
  """`config_cls` from the shared fields and the bindings of `gin_name`."""
  shared = dataclasses.fields(finetuning_base.FinetuneTaskConfig)
  configurable = gin_dataclass.external_configurable(
      config_cls,
      gin_name,
      exclude=[field.name for field in shared] + list(protocol_fields),
  )

  def build_config(**fields) -> cfg.TaskConfig:
    # Gin's configurable is a subclass; Model Garden's task factory looks
    # tasks up by the exact config class.
    bound = configurable(**fields)
    return config_cls(
        **{
            field.name: getattr(bound, field.name)
            for field in dataclasses.fields(config_cls)
        }
    )

  return build_config


def task_names(group: Optional[str] = None) -> Tuple[str, ...]:
  """Registered names in registration order; only `group`'s if given."""
  return tuple(
      entry.name
      for entry in _TASKS.entries()
      if group is None or entry.group == group
  )


def get(name: str) -> FinetuningTaskEntry:
  """The entry of `name`; ValueError listing the registered names if none."""
  return _TASKS.get(name)
