"""Tests of experiments.regeneration.paper_scale: what --launch refuses."""

import dataclasses

from absl import app
import pytest

from experiments.regeneration import paper_scale
from experiments.regeneration import registry
from experiments.regeneration import report
from experiments.regeneration import target_runners
from tests import conftest


def _target():
  """001.IV with two of its runs (each plan builds every run's model)."""
  target = registry.get('001.IV')
  return dataclasses.replace(
      target,
      runs=tuple(
          r for r in target.runs if r.name in ('bert_small', 'ale_small')
      ),
  )


def _request(tmp_path, **fields):
  fields = dict(
      dict(
          table='001.IV',
          scale='paper',
          bucket='gs://b/runs',
          glue_dir='gs://b/glue',
          out=str(tmp_path / 'out'),
          launch=True,
          tpu_names=['vm-a'],
          zone='europe-west4-a',
      ),
      **fields,
  )
  return target_runners.Request(**fields)


@pytest.fixture(scope='module')
def records(tmp_path_factory):
  """{length: a record directory of that length}."""
  root = tmp_path_factory.mktemp('records')
  return {
      length: conftest.write_tiny_records(
          root / str(length), max_seq_length=length
      )
      for length in (128, 512)
  }


@pytest.mark.slow
def test_a_run_that_cannot_fit_is_refused_before_anything_starts(
    tmp_path, monkeypatch
):
  monkeypatch.setenv('PATH', '')  # no gcloud, no run_tpu.sh can start
  with pytest.raises(app.UsageError) as refused:
    paper_scale.run(
        _target(), _request(tmp_path, accelerator_type=['v5litepod-1'])
    )
  message = str(refused.value)
  assert message.startswith('bert_small on a v5litepod-1: 1024 per replica')
  assert 'does not fit a v5litepod-1 replica' in message
  assert 'a larger --accelerator_type, e.g. v5litepod-' in message
  assert '(1 more runs do not fit.)' in message
  plan_text = (tmp_path / 'out' / '001.IV.plan.md').read_text()
  assert '(does not fit)' in plan_text


def test_a_global_batch_that_does_not_divide_is_refused(tmp_path):
  with pytest.raises(app.UsageError, match='does not divide over the 48'):
    paper_scale.run(_target(), _request(tmp_path, accelerator_type=['v3-48']))


@pytest.mark.slow
def test_records_are_checked_before_anything_starts(tmp_path, records):
  with pytest.raises(
      app.UsageError,
      match=r'bert_small reads 128-dynamic records: give '
      r'--records=128-dynamic=<records>',
  ):
    paper_scale.run(_target(), _request(tmp_path))
  wrong = records[512]
  with pytest.raises(
      app.UsageError, match='are 512-dynamic records, but the run reads'
  ):
    paper_scale.run(_target(), _request(tmp_path, records=[wrong]))


def test_launch_without_confirm_states_the_cost_and_starts_nothing(
    tmp_path, capsys, monkeypatch, records
):
  monkeypatch.setenv('PATH', '')
  paper_scale.run(
      _target(),
      _request(
          tmp_path,
          records=[f'128-dynamic={records[128]}'],
          tpu_names=['vm-a', 'vm-b'],
      ),
  )
  out = capsys.readouterr().out
  # Runs are dealt to the VMs by model directory, one each here.
  lines = [text for text in out.splitlines() if '(created if missing)' in text]
  assert sorted(text.split()[3] for text in lines) == ['vm-a', 'vm-b']
  assert lines[0].startswith('  bert_small: v3-8 VM ')
  assert 'accelerator-hours on 2 VM(s)' in out
  assert out.rstrip().endswith(
      'Nothing started: add --confirm to create the VMs and run the plan (or '
      'rehearse it here first with --rehearse).'
  )
  assert not (tmp_path / 'out' / 'logs').exists()


def test_launch_needs_a_zone_and_vms(tmp_path, records):
  with pytest.raises(app.UsageError, match='--launch needs --zone and'):
    paper_scale.run(
        _target(),
        _request(
            tmp_path, records=[records[128]], zone='$ZONE', tpu_names=None
        ),
    )


def test_the_plan_prints_per_replica_batch_and_memory_for_every_run(tmp_path):
  paper_scale.run(_target(), _request(tmp_path, launch=False))
  plan_text = (tmp_path / 'out' / '001.IV.plan.md').read_text()
  for name in ('bert_small', 'ale_small'):
    [line] = [
        text
        for text in plan_text.splitlines()
        if text.startswith(f'| {name} |')
    ]
    assert '| v3-8 | vm-a |' in line
    assert '128 per replica, about ' in line and ' of 16 GiB |' in line


@pytest.mark.parametrize('key', ['003.fig4', '003.fig5', '004.fig2'])
def test_a_collected_run_is_its_figures_point_at_its_final_score(key):
  """Found by the every-table rehearsal: figures had no points to plot."""
  target = registry.get(key)
  scores = {run.name: 0.5 + i / 100 for i, run in enumerate(target.runs)}
  results = {
      name: paper_scale.run_results(
          dict(scores=dict(mrpc=score), summaries={}), 1000, {}
      )
      for name, score in scores.items()
  }
  entries = report.rows(target, results)
  series, references = report.figure_lines(target, entries)
  points = {
      name if target.figure == 'steps' else f'{name}@{x:g}': y
      for name, line in series.items()
      for x, y in line
  }
  points.update(references)
  assert len(points) == len(target.runs)
  # Each run's point is its final score, all on one scale.
  ratios = {
      points[run.row] / scores[run.name]
      for run in target.runs
      if run.row in points
  }
  assert ratios and max(ratios) - min(ratios) < 1e-9
