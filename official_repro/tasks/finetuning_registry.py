"""The one registry of fine-tuning tasks: names, Task classes, config builders.

A fine-tuning task module registers itself by decorating its Task class:

  @finetuning_registry.register(('race',), RaceTaskConfig, race_task_config)
  class RaceTask(finetuning_base.FinetuneTask):
    ...

This registers the Task class with Model Garden's `task_factory` under its
config class (so `task_factory.get_task(config)` builds it, as for the
pretraining tasks) and maps each task name (the gin `finetuning.task`) to a
`FinetuningTaskEntry` holding the Task class and the function that builds its
config. The fine-tuning driver (`training/finetuning.py`),
`FinetuningSchedule`'s name check and the GLUE suite look names up here.
The built-in tasks are the modules of `official_repro.tasks`, imported the
first time a name is looked up (`common.registry`), so the registry (and the
tasks' gin configurables) are complete wherever a name is used. Adding a task
is one new module in `official_repro/tasks/`; nothing else changes.
"""

import dataclasses
from typing import Callable, Optional, Sequence, Tuple, Type

from official.core import base_task
from official.core import config_definitions as cfg
from official.core import task_factory
from official_repro.common import registry


@dataclasses.dataclass(frozen=True)
class FinetuningTaskEntry:
  """What the fine-tuning driver needs to know about one task name.

  Attributes:
    name: the task name, e.g. 'mrpc', 'squad11', 'race'.
    task_cls: the Model Garden Task class.
    config_cls: its config class (the `task_factory` key).
    build_config: builds the config from the fields every fine-tuning config
      has (`finetuning_base.FinetuneTaskConfig`'s) as keyword arguments; gin
      may bind the task-specific ones.
    protocol_fields: names of `finetuning_schedule.RunProtocol` attributes
      copied into the config under the same name (GLUE: 'stsb_metric').
    group: the benchmark the task belongs to ('glue'), or '' for none.
    segments: the segments its inputs hold (segment ids 0 to `segments` -
      1): 2 for sentence pairs, question and passage; 1 for one sentence.
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
    build_config: Optional[Callable[..., cfg.TaskConfig]] = None,
    protocol_fields: Sequence[str] = (),
    group: str = '',
    single_segment: Sequence[str] = (),
) -> Callable[[Type[base_task.Task]], Type[base_task.Task]]:
  """A class decorator registering a Task class under `names`.

  Args:
    names: the task names the class serves, in display order.
    config_cls: the Task's config class; registered with `task_factory`.
    build_config: builds a config from keyword fields; default `config_cls`.
    protocol_fields: see `FinetuningTaskEntry.protocol_fields`.
    group: see `FinetuningTaskEntry.group`.
    single_segment: the names among `names` whose inputs hold one segment.

  Returns:
    The decorator; it returns the class unchanged.

  Raises:
    ValueError: a name is already registered to another task, or a
      `single_segment` name is not among `names`.
  """
  unknown = set(single_segment) - set(names)
  if unknown:
    raise ValueError(
        f'single_segment names {sorted(unknown)} that are not among the '
        f'names registered, {list(names)}.'
    )

  def decorator(task_cls: Type[base_task.Task]) -> Type[base_task.Task]:
    for name in names:
      _TASKS.register(
          name,
          FinetuningTaskEntry(
              name=name,
              task_cls=task_cls,
              config_cls=config_cls,
              build_config=build_config or config_cls,
              protocol_fields=tuple(protocol_fields),
              group=group,
              segments=1 if name in single_segment else 2,
          ),
      )
    task_factory.register_task_cls(config_cls)(task_cls)
    return task_cls

  return decorator


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
