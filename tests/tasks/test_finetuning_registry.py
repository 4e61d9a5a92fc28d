"""The fine-tuning task registry, Model Garden's task_factory and the driver."""

import dataclasses

import pytest

from official.core import task_factory
from official_repro.data import glue as glue_data
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import pretrained
from official_repro.tasks import finetuning_base
from official_repro.tasks import finetuning_registry
from official_repro.tasks import finetuning_schedule
from official_repro.tasks import glue
from official_repro.tasks import pos_tagging
from official_repro.tasks import race
from official_repro.tasks import squad
from official_repro.training import finetuning

EXPECTED_TASKS = {
    **{name: glue.GlueTask for name in glue_data.GLUE_TASK_NAMES},
    'squad11': squad.SquadTask,
    'squad20': squad.SquadTask,
    'race': race.RaceTask,
    'pos': pos_tagging.TaggingTask,
}


def _encoder():
  return pretrained.PretrainedEncoder(
      checkpoint_path=None,
      config=encoders.EncoderConfig(),
      vocab_file='vocab.txt',
      lower_case=True,
  )


def _schedule(task):
  return finetuning_schedule.FinetuningSchedule(
      task=task, learning_rate=1e-4, train_batch_size=8, num_epochs=1
  )


def test_every_task_is_registered_with_its_class():
  assert set(finetuning_registry.task_names()) == set(EXPECTED_TASKS)
  assert finetuning_registry.task_names(group='glue') == (
      glue_data.GLUE_TASK_NAMES
  )
  for name, task_cls in EXPECTED_TASKS.items():
    assert finetuning_registry.get(name).task_cls is task_cls


@pytest.mark.parametrize('name', sorted(EXPECTED_TASKS))
def test_task_factory_builds_the_task_of_each_config(name):
  config = finetuning.build_task_config(
      _schedule(name), finetuning_schedule.RunProtocol(), _encoder(), '/data'
  )
  assert isinstance(config, finetuning_registry.get(name).config_cls)
  assert (config.task, config.data_dir, config.learning_rate) == (
      name,
      '/data',
      1e-4,
  )
  assert type(task_factory.get_task(config)) is EXPECTED_TASKS[name]  # pylint: disable=unidiomatic-typecheck


def test_glue_config_takes_the_stsb_metric_from_the_protocol():
  config = finetuning.build_task_config(
      _schedule('stsb'),
      finetuning_schedule.RunProtocol(stsb_metric='corr'),
      _encoder(),
      '/data',
  )
  assert config.stsb_metric == 'corr'


def test_a_new_task_needs_no_change_in_the_driver(monkeypatch):
  monkeypatch.setattr(
      finetuning_registry, '_TASKS', finetuning_registry._TASKS.copy()
  )  # pylint: disable=protected-access

  @dataclasses.dataclass
  class ToyConfig(finetuning_base.FinetuneTaskConfig):
    stsb_metric: str = ''

  @finetuning_registry.register(
      ('toy',), ToyConfig, protocol_fields=('stsb_metric',)
  )
  class ToyTask(glue.GlueTask):
    pass

  schedule = _schedule('toy')
  config = finetuning.build_task_config(
      schedule,
      finetuning_schedule.RunProtocol(stsb_metric='pearson'),
      _encoder(),
      '/data',
  )
  assert isinstance(config, ToyConfig) and config.stsb_metric == 'pearson'
  assert type(task_factory.get_task(config)) is ToyTask  # pylint: disable=unidiomatic-typecheck


def test_names_are_registered_once_and_unknown_names_are_listed():
  with pytest.raises(
      ValueError, match="task named 'race' is already " 'registered'
  ):
    finetuning_registry.register(('race',), race.RaceTaskConfig)(glue.GlueTask)
  with pytest.raises(
      ValueError, match='finetuning.task must be one of .*' "'mrpc'.*got 'wnli'"
  ):
    finetuning_registry.get('wnli')


def test_a_single_segment_name_must_be_registered():
  with pytest.raises(ValueError, match=r"single_segment names \['sst3'\]"):
    finetuning_registry.register(
        ('toy',), glue.GlueTaskConfig, single_segment=('sst3',)
    )
