"""Tests of experiments.regeneration.target_runners."""

import pytest

from absl import app
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
      target_runners.paper_scale,
      'run',
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
