"""Tests of experiments.regeneration.target_runners."""

import pytest

from absl import app
from experiments.regeneration import plan
from experiments.regeneration import registry
from experiments.regeneration import target_runners


@pytest.mark.parametrize('key', sorted(registry.TARGETS))
def test_every_target_names_a_registered_runner(key):
  assert callable(target_runners.RUNNERS.get(registry.get(key).runner))


@pytest.mark.parametrize(
    'name', sorted(set(target_runners.RUNNERS.names()) - {'learning'})
)
def test_every_runner_but_learning_plans_at_paper_scale(name, monkeypatch):
  planned = []
  monkeypatch.setattr(
      target_runners,
      'paper_plan',
      lambda target, request: planned.append(target.key),
  )
  target = registry.get('001.IV')
  target_runners.RUNNERS.get(name)(
      target, target_runners.Request(table=target.key, scale='paper')
  )
  assert planned == ['001.IV']


def test_plan_only_and_learning_refuse_the_other_scales():
  with pytest.raises(
      app.UsageError, match='001.III runs only at --scale=paper'
  ):
    target_runners.run(
        registry.get('001.III'), target_runners.Request(table='001.III')
    )
  with pytest.raises(app.UsageError, match='runs below paper scale only'):
    target_runners.run(
        registry.get('learning'),
        target_runners.Request(table='learning', scale='paper'),
    )


def test_launch_prints_the_runs_done_and_the_time_left(monkeypatch, capsys):
  target = registry.get('001.IV')
  planned = plan.plan(target, 'gs://bucket', 'gs://glue')
  commands = []
  monkeypatch.setattr(
      target_runners.subprocess,
      'run',
      lambda command, **kwargs: commands.append(command),
  )
  # An hour per planned run: 3600 * 3 / 1 s left after the first.
  target_runners.launch(
      target, planned, clock=iter([0, 3600, 7200, 10800, 14400]).__next__
  )
  lines = capsys.readouterr().out.splitlines()
  assert lines[:4] == [
      f'[1/4] {planned[0].name}',
      '001.IV: 1/4 jobs (25.0%), 1 h 0 min elapsed, about 3 h 0 min left',
      f'[2/4] {planned[1].name}',
      '001.IV: 2/4 jobs (50.0%), 2 h 0 min elapsed, about 2 h 0 min left',
  ]
  assert lines[-1] == '001.IV: 4/4 jobs, done in 4 h 0 min'
  assert commands[0] == planned[0].pretrain_command
