"""The small-scale grid runner: settings, budgets, resumes and the run store."""

import dataclasses
import json
import math
import os
import shutil
import statistics

from absl import app
import orbit
import pytest
import tensorflow as tf

from experiments.regeneration import plan
from experiments.regeneration import registry
from experiments.regeneration import report
from experiments.regeneration import runner
from experiments.regeneration import target_runners
from official_repro.training import gin_utils
from tests import conftest


def _settings(**overrides):
  settings = dict(
      target='001.IV',
      scale='tiny',
      corpus='c',
      vocab_file='v',
      glue_dir='g',
      reference_steps=4,
      tasks={'sst2': 0.25},
      num_runs=2,
  )
  settings.update(overrides)
  return runner.GridSettings(**settings)


def test_settings_are_stored_then_checked(ram_dir):
  runner.check_settings(ram_dir, _settings())
  runner.check_settings(ram_dir, _settings())
  with pytest.raises(ValueError) as error:
    runner.check_settings(ram_dir, _settings(num_runs=3, tasks={'sst2': 0.5}))
  assert 'num_runs: stored 2, now 3' in str(error.value)
  assert "tasks: stored {'sst2': 0.25}, now {'sst2': 0.5}" in str(error.value)


@pytest.mark.slow
def test_runs_get_the_reference_training_flops_times_their_ratio():
  target = registry.get('001.IV')
  steps = runner.run_steps(target, _settings(reference_steps=300), 30522)
  assert steps['electra_small'] == 300
  assert steps['electra_small_2x'] == 600
  totals, per_step = {}, {}
  for run in target.runs:
    report_, _ = plan.flops_report(
        run.gin_files + ('gin/regenerate/tiny.gin',),
        (f'experiment.train_steps = {steps[run.name]}',),
    )
    totals[run.name] = report_.total_train_flops()
    per_step[run.name] = totals[run.name] / steps[run.name]
  for run in target.runs:
    assert (
        abs(totals[run.name] - totals['electra_small'] * run.budget_ratio)
        <= per_step[run.name] / 2
    ), run.name
  # BERT has no generator: more steps for the same FLOPs.
  assert steps['bert_small'] > 300


def _fake_pretrain(calls, kill=None):
  """A stand-in for `runner._pretrain`.

  A stand-in for `runner._pretrain` that records (run, steps) and writes
  the checkpoints Orbit would (every `interval` steps and the last one) and
  the encoder export;
  `kill(run name, calls)` says when to fail before writing any.
  """

  def pretrain(run, settings, records, model_dir, steps, interval, seed=None):
    del settings, records
    calls.append((run.name, steps) if seed is None else (run.name, steps, seed))
    if kill and kill(run.name, calls):
      raise RuntimeError('killed')
    os.makedirs(os.path.join(model_dir, 'encoder'), exist_ok=True)
    for step in [*range(interval, steps, interval), steps]:
      open(os.path.join(model_dir, f'ckpt-{step}.index'), 'w').close()
    for name in (f'encoder-{steps}.index', 'encoder_config.json'):
      open(os.path.join(model_dir, 'encoder', name), 'w').close()

  return pretrain


def _fake_001_iv_steps(monkeypatch):
  """Records of BERT's vocabulary and a few steps per 001.IV run, no FLOPs."""
  monkeypatch.setattr(runner, 'build_records', lambda *args: 30522)
  monkeypatch.setattr(
      runner,
      'run_steps',
      lambda *args: {
          'bert_small': 5,
          'electra_small': 4,
          'electra_small_2x': 8,
          'ale_small': 3,
      },
  )


def test_a_killed_grid_resumes_without_redoing_finished_runs(
    tmp_path, monkeypatch
):
  target = registry.get('001.IV')
  calls = []
  pretrain = _fake_pretrain(
      calls,
      kill=lambda name, calls: (name == 'electra_small_2x' and len(calls) == 3),
  )

  def finetune(target, settings, checkpoint, out, random_init=False):
    del target, settings, checkpoint, out, random_init
    return {'sst2': dict(score=0.5 + 0.01 * len(calls), summary={})}

  monkeypatch.setattr(runner, '_pretrain', pretrain)
  monkeypatch.setattr(runner, 'finetune', finetune)
  _fake_001_iv_steps(monkeypatch)
  out, runs_dir = str(tmp_path / 'table'), str(tmp_path / 'runs')
  with pytest.raises(RuntimeError, match='killed'):
    runner.run_grid(target, _settings(), out, runs_dir)
  assert [name for name, _ in calls] == [
      'bert_small',
      'electra_small',
      'electra_small_2x',
  ]
  results = runner.run_grid(target, _settings(), out, runs_dir)
  assert [name for name, _ in calls] == [
      'bert_small',
      'electra_small',
      'electra_small_2x',
      'electra_small_2x',
      'ale_small',
  ]
  assert sorted(results) == sorted(run.name for run in target.runs)
  with open(os.path.join(out, 'bert_small', runner.RESULT_FILENAME)) as f:
    assert json.load(f)['train_steps'] == 5
  with pytest.raises(ValueError, match='other settings'):
    runner.run_grid(target, _settings(num_runs=5), out, runs_dir)
  # A finished run whose gin bindings changed since is not read back.
  monkeypatch.setattr(runner, 'run_fingerprint', lambda *args: 'changed')
  with pytest.raises(ValueError, match='bert_small.*other gin bindings'):
    runner.run_grid(target, _settings(), out, runs_dir)


def _fake_jobs_killed_at_the_third(monkeypatch, capsys):
  """Fake jobs for 001.IV, whose third pretraining fails the first time.

  Returns a function that gives the progress lines printed since it was
  last called, after the start of each run's header ('[1/4] bert_small').
  """
  monkeypatch.setattr(
      runner,
      '_pretrain',
      _fake_pretrain(
          [],
          kill=lambda name, calls: (
              name == 'electra_small_2x' and len(calls) == 3
          ),
      ),
  )
  monkeypatch.setattr(
      runner,
      'finetune',
      lambda *args, **kwargs: {'sst2': dict(score=0.5, summary={})},
  )
  _fake_001_iv_steps(monkeypatch)

  def progress_lines():
    return [
        line.split(':')[0] if line.startswith('[') else line
        for line in capsys.readouterr().out.splitlines()
        if line.startswith(('001.IV: ', '['))
    ]

  return progress_lines


def test_a_released_row_is_fine_tuned_in_place_of_pretraining(
    tmp_path, monkeypatch
):
  target = registry.get('001.IV')
  release = str(tmp_path / 'electra-small-discriminator')
  calls, commands = [], []

  def call(command, log_path):
    del log_path
    commands.append(command)
    model_dir = next(a for a in command if a.startswith('--model_dir='))
    model_dir = model_dir.split('=', 1)[1]
    with open(os.path.join(model_dir, 'glue_results.json'), 'w') as f:
      json.dump(dict(scores={'sst2': 0.9}, summaries={'sst2': {}}), f)

  monkeypatch.setattr(runner, '_pretrain', _fake_pretrain(calls))
  monkeypatch.setattr(runner, '_call', call)
  _fake_001_iv_steps(monkeypatch)
  settings = _settings(released=(('electra_small', release),))
  out = str(tmp_path / 'table')
  results = runner.run_grid(target, settings, out, str(tmp_path / 'runs'))
  assert 'electra_small' not in [name for name, _ in calls]
  assert results['electra_small']['released'] == release
  assert results['electra_small']['train_steps'] == 0
  (released_command,) = [
      c for c in commands if f'--init_checkpoint={release}' in c
  ]
  # The release brings its vocabulary: the grid's is not passed.
  assert not [a for a in released_command if a.startswith('--vocab_file')]
  others = [c for c in commands if c is not released_command]
  assert others and all('--vocab_file=v' in c for c in others)
  rows = [entry['row'] for entry in report.rows(target, results)]
  assert f'ELECTRA_small (released: {release})' in rows
  # Read back on a rerun, not fine-tuned again.
  commands.clear()
  runner.run_grid(target, settings, out, str(tmp_path / 'runs'))
  assert not commands
  with pytest.raises(ValueError, match='released: stored'):
    runner.run_grid(target, _settings(), out, str(tmp_path / 'runs'))


def test_released_rows_are_checked_against_the_table(tmp_path, monkeypatch):
  # Any path stands for a release here; the next test reads real ones.
  monkeypatch.setattr(target_runners.pretrained, 'resolve', lambda path: None)
  target = registry.get('001.IV')
  release = tmp_path / 'model'
  release.mkdir()
  request = target_runners.Request(
      table='001.IV', scale='cpu', released=[f'ELECTRA_small={release}']
  )
  assert request.released_encoders(target) == {'electra_small': str(release)}
  # A checkpoint prefix (a TF1 or TEAMS checkpoint, a run's ckpt-N).
  (tmp_path / 'ckpt-5.index').write_text('')
  prefix = dataclasses.replace(
      request, released=[f'ELECTRA_small={tmp_path}/ckpt-5']
  )
  assert prefix.released_encoders(target) == {
      'electra_small': f'{tmp_path}/ckpt-5'
  }
  figure = dataclasses.replace(request, table='003.fig5')
  with pytest.raises(app.UsageError, match='figure'):
    figure.released_encoders(registry.get('003.fig5'))
  for item, named in (
      (f'GPT={release}', 'ROW one of'),
      ('ELECTRA_small', 'ROW one of'),
      (f'ELECTRA_small={tmp_path}/missing', 'no such folder'),
  ):
    with pytest.raises(app.UsageError, match=named):
      dataclasses.replace(request, released=[item]).released_encoders(target)


def test_a_released_path_that_holds_no_model_is_refused_before_pretraining(
    tmp_path,
):
  records = conftest.write_tiny_records(tmp_path)
  request = target_runners.Request(
      table='001.IV', scale='cpu', released=[f'ELECTRA_small={records}']
  )
  with pytest.raises(
      app.UsageError, match=f'ELECTRA_small={records}.*no checkpoint'
  ):
    request.released_encoders(registry.get('001.IV'))


@pytest.mark.parametrize('flag', ['num_runs', 'pretrain_seeds'])
def test_a_count_below_one_is_refused_before_anything_runs(flag):
  request = target_runners.Request(table='001.IV', scale='cpu', **{flag: 0})
  with pytest.raises(app.UsageError, match=f'--{flag} must be at least 1'):
    target_runners.run(registry.get('001.IV'), request)


@pytest.mark.parametrize(
    'table, scale', [('001.IV', 'paper'), ('learning', 'cpu')]
)
def test_released_is_refused_where_no_grid_pretrains(table, scale, tmp_path):
  request = target_runners.Request(
      table=table, scale=scale, released=[f'ELECTRA_small={tmp_path}']
  )
  with pytest.raises(app.UsageError, match='--released: .*glue_suite'):
    target_runners.run(registry.get(table), request)


def test_settings_written_before_releases_existed_still_match(ram_dir):
  runner.check_settings(ram_dir, _settings())
  path = os.path.join(ram_dir, runner.SETTINGS_FILENAME)
  with tf.io.gfile.GFile(path) as f:
    stored = json.load(f)
  del stored['released']
  tf.io.gfile.remove(path)
  with tf.io.gfile.GFile(path, 'w') as f:
    json.dump(stored, f)
  runner.check_settings(ram_dir, _settings())


def test_grid_prints_the_jobs_done_and_the_time_left(
    tmp_path, monkeypatch, capsys
):
  progress_lines = _fake_jobs_killed_at_the_third(monkeypatch, capsys)
  target = registry.get('001.IV')
  out, runs_dir = str(tmp_path / 'table'), str(tmp_path / 'runs')
  # Ten minutes per job until the third is killed: 600 * 3 / 1 s left after
  # the first, 1200 * 2 / 2 s after the second.
  with pytest.raises(RuntimeError, match='killed'):
    runner.run_grid(
        target, _settings(), out, runs_dir, clock=iter([0, 600, 1200]).__next__
    )
  assert progress_lines() == [
      '[1/4] bert_small (BERT_small)',
      '001.IV: 1/4 jobs (25.0%), 10 min 0 s elapsed, about 30 min left',
      '[2/4] electra_small (ELECTRA_small)',
      '001.IV: 2/4 jobs (50.0%), 20 min 0 s elapsed, about 20 min left',
      '[3/4] electra_small_2x (2x time)',
  ]
  # The rerun reads the two finished runs back: two jobs left.
  runner.run_grid(
      target,
      _settings(),
      out,
      runs_dir,
      clock=iter([5000, 5900, 6500]).__next__,
  )
  assert progress_lines() == [
      '[1/4] bert_small',
      '[2/4] electra_small',
      '[3/4] electra_small_2x (2x time)',
      '001.IV: 1/2 jobs (50.0%), 15 min 0 s elapsed, about 15 min left',
      '[4/4] ale_small (ALE_small)',
      '001.IV: 2/2 jobs, done in 25 min 0 s',
  ]
  # Each pretraining seed is a job.
  runner.run_grid(
      target,
      _settings(pretrain_seeds=2),
      str(tmp_path / 'seeds'),
      runs_dir,
      clock=iter(range(0, 600, 60)).__next__,
  )
  lines = [line for line in progress_lines() if line.startswith('001.IV')]
  assert len(lines) == 8
  assert lines[0].startswith('001.IV: 1/8 jobs (12.5%), 1 min 0 s elapsed')
  assert lines[-1] == '001.IV: 8/8 jobs, done in 8 min 0 s'


def test_pretrain_only_counts_the_runs_left_to_pretrain(
    tmp_path, monkeypatch, capsys
):
  progress_lines = _fake_jobs_killed_at_the_third(monkeypatch, capsys)
  target = registry.get('001.IV')
  out, runs_dir = str(tmp_path / 'table'), str(tmp_path / 'runs')
  with pytest.raises(RuntimeError, match='killed'):
    runner.pretrain_only(
        target, _settings(), out, runs_dir, clock=iter([0, 60, 120]).__next__
    )
  assert progress_lines() == [
      '[1/4] bert_small (BERT_small)',
      '001.IV: 1/4 jobs (25.0%), 1 min 0 s elapsed, about 3 min left',
      '[2/4] electra_small (ELECTRA_small)',
      '001.IV: 2/4 jobs (50.0%), 2 min 0 s elapsed, about 2 min left',
      '[3/4] electra_small_2x (2x time)',
  ]
  # The rerun finds the first two pretrained: two jobs left.
  runner.pretrain_only(
      target, _settings(), out, runs_dir, clock=iter([0, 60, 120]).__next__
  )
  assert progress_lines() == [
      '[1/4] bert_small (BERT_small)',
      '[2/4] electra_small (ELECTRA_small)',
      '[3/4] electra_small_2x (2x time)',
      '001.IV: 1/2 jobs (50.0%), 1 min 0 s elapsed, about 1 min left',
      '[4/4] ale_small (ALE_small)',
      '001.IV: 2/2 jobs, done in 2 min 0 s',
  ]


def test_runs_sharing_a_store_directory_are_one_job(
    tmp_path, monkeypatch, capsys
):
  calls = []
  monkeypatch.setattr(runner, '_pretrain', _fake_pretrain(calls))
  monkeypatch.setattr(runner, 'build_records', lambda *args: 30522)
  monkeypatch.setattr(runner, 'run_steps', lambda *args: dict(a=4, b=4))
  gin_files = ('gin/papers/001_ale/electra_small.gin',)
  target = dataclasses.replace(
      registry.get('002.1'),
      key='x',
      runs=(
          registry.Run('a', 'A', gin_files),
          registry.Run('b', 'B', gin_files),
      ),
  )
  encoders = runner.pretrain_only(
      target,
      _settings(target='x'),
      str(tmp_path / 'x'),
      str(tmp_path / 'runs'),
      clock=iter([0, 60]).__next__,
  )
  assert encoders['a'] == encoders['b'] and calls == [('a', 4)]
  assert [
      line
      for line in capsys.readouterr().out.splitlines()
      if line.startswith('x: ')
  ] == ['x: 1/1 jobs, done in 1 min 0 s']


def test_seeds_finished_before_a_kill_are_not_jobs_left(
    tmp_path, monkeypatch, capsys
):
  pretrained, finetuned = [], []
  grid = _grid_with_fake_jobs(monkeypatch, pretrained, finetuned)
  # Killed at ELECTRA-small's second seed: its first is pretrained and
  # fine-tuned in the store, its result not written.
  monkeypatch.setattr(
      runner,
      '_pretrain',
      _fake_pretrain(pretrained, kill=lambda name, calls: len(calls) == 2),
  )
  runs_dir = str(tmp_path / 'runs')
  with pytest.raises(RuntimeError, match='killed'):
    grid('004.1', runs_dir, pretrain_seeds=2)
  capsys.readouterr()
  monkeypatch.setattr(runner, '_pretrain', _fake_pretrain(pretrained))
  grid('004.1', runs_dir, pretrain_seeds=2)
  counts = [
      line.split(' jobs')[0]
      for line in capsys.readouterr().out.splitlines()
      if line.startswith('004.1: ')
  ]
  # Left: ELECTRA's second seed and SCRIPT's two.
  assert counts == ['004.1: 1/3', '004.1: 2/3', '004.1: 3/3']


def _grid_with_fake_jobs(monkeypatch, pretrained, finetuned):
  """Runs `runner.run_grid` with jobs that record what they do.

  Runs `runner.run_grid` with jobs that record what they do: pretraining
  as `_fake_pretrain`, fine-tuning by writing glue_suite's results file of
  the model directory it is given; every run trains 4 steps, or 6 for
  BERT (001's equal FLOPs give it more) and 8 for 001's doubled run.
  """

  def call(command, log_path):
    del log_path
    flags = dict(
        arg[2:].split('=', 1) for arg in command if arg.startswith('--')
    )
    finetuned.append((flags['paper'], flags['init_checkpoint']))
    with open(os.path.join(flags['model_dir'], 'glue_results.json'), 'w') as f:
      json.dump(dict(scores={'sst2': 0.5}, summaries={'sst2': {}}), f)

  monkeypatch.setattr(runner, '_pretrain', _fake_pretrain(pretrained))
  monkeypatch.setattr(runner, '_call', call)
  monkeypatch.setattr(runner, 'build_records', lambda *args: 30522)
  steps_001 = dict(bert_small=6, electra_small_2x=8)
  monkeypatch.setattr(
      runner,
      'run_steps',
      lambda target, *args: {
          run.name: steps_001.get(run.name, 4) if target.key == '001.IV' else 4
          for run in target.runs
      },
  )

  def grid(key, runs_dir, **overrides):
    out = os.path.join(
        os.path.dirname(runs_dir),
        key
        + ''.join(
            '-' + ''.join(c if c.isalnum() else '_' for c in f'{name}{value}')
            for name, value in sorted(overrides.items())
        ),
    )
    return runner.run_grid(
        registry.get(key), _settings(target=key, **overrides), out, runs_dir
    )

  return grid


def test_tables_that_compare_the_same_model_share_its_run(
    tmp_path, monkeypatch
):
  pretrained, finetuned = [], []
  grid = _grid_with_fake_jobs(monkeypatch, pretrained, finetuned)
  runs_dir = str(tmp_path / 'runs')
  table_2 = grid('004.2', runs_dir)
  assert [name for name, _ in pretrained] == [
      'bert_small',
      'electra_small',
      'script_small',
  ]
  assert len(finetuned) == 3
  # 004 Table 1: both runs and their fine-tuning are 004.2's.
  table_1 = grid('004.1', runs_dir)
  assert len(pretrained) == 3 and len(finetuned) == 3
  for name in ('electra_small', 'script_small'):
    assert table_1[name]['run_dir'] == table_2[name]['run_dir']
    assert table_1[name]['glue'] == table_2[name]['glue']
  # 004 Fig. 2 fine-tunes the same runs' earlier checkpoints (steps 1-3);
  # the last one's scores are read back.
  grid('004.fig2', runs_dir)
  assert len(pretrained) == 3
  assert sorted(checkpoint for _, checkpoint in finetuned[3:]) == sorted(
      os.path.join(table_2[name]['run_dir'], f'ckpt-{step}')
      for name in ('electra_small', 'script_small')
      for step in (1, 2, 3)
  )
  # 001 Table IV: ELECTRA-small's pretraining is shared, its fine-tuning
  # (001's protocol) is not; BERT trains other steps there, so it is
  # another run.
  del finetuned[:]
  grid('001.IV', runs_dir)
  assert [name for name, _ in pretrained[3:]] == [
      'bert_small',
      'electra_small_2x',
      'ale_small',
  ]
  assert [paper for paper, _ in finetuned] == ['001_ale'] * 4
  assert os.path.join(table_2['electra_small']['run_dir']) in [
      checkpoint for _, checkpoint in finetuned
  ]
  # What decides a pretraining's numbers is in its directory's name (a
  # path the same whether given relative or absolute)...
  for override, new_runs in (
      (dict(corpus='other'), 2),
      (dict(vocab_file='other'), 2),
      (dict(strategy='one_device'), 2),
      (dict(corpus=os.path.abspath('c')), 0),
  ):
    before = len(pretrained)
    grid('004.1', runs_dir, **override)
    assert len(pretrained) == before + new_runs, override
  # ... and what decides a fine-tuning's scores in its own.
  for override in (
      dict(glue_dir='other'),
      dict(tasks={'sst2': 0.5}),
      dict(num_runs=5),
  ):
    before_pretrained, before_finetuned = len(pretrained), len(finetuned)
    grid('004.1', runs_dir, **override)
    assert len(pretrained) == before_pretrained, override
    assert len(finetuned) == before_finetuned + 2, override


def test_runs_of_other_gin_files_with_equal_bindings_share_one_directory(
    tmp_path, monkeypatch
):
  """At tiny scale, 003's Small++ rows are its Small runs.

  At tiny scale the include replaces all that tells 003's Small++ rows
  from its Small ones: Table 2's "Only MLM" and TEAMS rows are Table 1's
  BERT- and TEAMS-Small runs, read back with their fine-tuning.
  """
  pretrained, finetuned = [], []
  grid = _grid_with_fake_jobs(monkeypatch, pretrained, finetuned)
  runs_dir = str(tmp_path / 'runs')
  table_1 = grid('003.1', runs_dir)
  del pretrained[:], finetuned[:]
  table_2 = grid('003.2', runs_dir)
  assert [name for name, _ in pretrained] == ['only_rtd', 'only_mws']
  assert len(finetuned) == 2
  assert table_2['only_mlm']['run_dir'] == table_1['bert_small']['run_dir']
  assert table_2['teams']['run_dir'] == table_1['teams_small']['run_dir']
  assert table_2['only_rtd']['run_dir'] != table_1['electra_small']['run_dir']


def test_a_stored_run_without_a_curves_checkpoints_is_refused(
    tmp_path, monkeypatch
):
  runs_dir = str(tmp_path / 'runs')
  grid = _grid_with_fake_jobs(monkeypatch, [], [])
  table_1 = grid('004.1', runs_dir, curve_points=1)
  # A run whose export is missing (killed after its last checkpoint) is
  # resumed, which exports it.
  shutil.rmtree(os.path.join(table_1['script_small']['run_dir'], 'encoder'))
  pretrained = []
  grid = _grid_with_fake_jobs(monkeypatch, pretrained, [])
  grid('004.2', runs_dir)  # Tables need the last checkpoint only.
  assert [name for name, _ in pretrained] == ['bert_small', 'script_small']
  with pytest.raises(
      ValueError,
      match=r'without the checkpoints of steps ' r'\[1, 2, 3\].*curve_points=4',
  ):
    grid('004.fig2', runs_dir)


def test_tiny_fine_tuning_include_is_passed_and_fingerprinted(
    tmp_path, monkeypatch
):
  assert runner.finetune_gin('tiny') == 'gin/regenerate/tiny_finetune.gin'
  assert runner.finetune_gin('gpu') == ''
  assert runner.finetune_fingerprint('gpu') == ''
  # The fingerprint follows the include's values, not its comments.
  with open(
      os.path.join(gin_utils.REPO_ROOT, runner.finetune_gin('tiny'))
  ) as f:
    text = f.read()
  fingerprint = runner.finetune_fingerprint('tiny')
  assert len(fingerprint) == 64
  variants = {}
  for name, variant in (
      ('commented', '# a comment\n' + text),
      (
          'other_rate',
          text.replace(
              'finetuning.learning_rate = 1e-3',
              'finetuning.learning_rate = 2e-3',
          ),
      ),
  ):
    assert variant != text
    variants[name] = tmp_path / f'{name}.gin'
    variants[name].write_text(variant)
  monkeypatch.setattr(
      runner, 'finetune_gin', lambda scale: str(variants['commented'])
  )
  assert runner.finetune_fingerprint('tiny') == fingerprint
  monkeypatch.setattr(
      runner, 'finetune_gin', lambda scale: str(variants['other_rate'])
  )
  assert runner.finetune_fingerprint('tiny') != fingerprint
  monkeypatch.undo()
  commands = []

  def call(command, log_path):
    commands.append(command)
    model_dir = next(
        arg.split('=', 1)[1]
        for arg in command
        if arg.startswith('--model_dir=')
    )
    with open(os.path.join(model_dir, 'glue_results.json'), 'w') as f:
      json.dump(dict(scores={'sst2': 0.7}, summaries={'sst2': {}}), f)
    del log_path

  monkeypatch.setattr(runner, '_call', call)
  for scale in ('tiny', 'gpu'):
    runner.finetune(
        registry.get('001.IV'),
        _settings(scale=scale),
        'ckpt',
        str(tmp_path / scale),
    )
  # Each task's directory is named by what decides its scores.
  tiny_dir, gpu_dir = (
      next(
          arg.split('=', 1)[1]
          for arg in command
          if arg.startswith('--model_dir=')
      )
      for command in commands
  )
  assert os.path.basename(tiny_dir).startswith('sst2-')
  assert os.path.basename(tiny_dir) != os.path.basename(gpu_dir)
  tiny_command, gpu_command = commands
  assert '--gin_file=gin/regenerate/tiny_finetune.gin' in tiny_command
  assert not any(arg.startswith('--gin_file') for arg in gpu_command)
  # Fine-tuning results of another include are refused on resume.
  out = str(tmp_path / 'grid')
  runner.check_settings(out, _settings(finetune_fingerprint='a'))
  with pytest.raises(ValueError, match='finetune_fingerprint'):
    runner.check_settings(out, _settings(finetune_fingerprint='b'))
  # A grid stored before the setting existed had no include: '' resumes,
  # a tiny grid (which has one now) is refused.
  older = str(tmp_path / 'older')
  runner.check_settings(older, _settings())
  path = os.path.join(older, runner.SETTINGS_FILENAME)
  with open(path) as f:
    stored = json.load(f)
  del stored['finetune_fingerprint']
  with open(path, 'w') as f:
    json.dump(stored, f)
  runner.check_settings(older, _settings())
  with pytest.raises(ValueError, match='finetune_fingerprint'):
    runner.check_settings(older, _settings(finetune_fingerprint='a'))


def test_fingerprint_follows_the_bindings_a_run_trains_with():
  run = registry.get('003.fig4').runs_at('tiny')[0]
  fingerprint = runner.run_fingerprint(run, 'tiny', 100)
  assert fingerprint == runner.run_fingerprint(run, 'tiny', 100)
  assert fingerprint != runner.run_fingerprint(run, 'tiny', 101)
  assert fingerprint != runner.run_fingerprint(run, 'gpu', 100)
  other = registry.Run(run.name, run.row, run.gin_files)
  assert fingerprint != runner.run_fingerprint(other, 'tiny', 100)


class _StepCounter(orbit.AbstractTrainer):
  """An Orbit trainer whose training only counts steps."""

  def __init__(self, step):
    super().__init__()
    self._step = step

  def train(self, num_steps):
    self._step.assign_add(tf.cast(num_steps, tf.int64))


def _orbit_checkpoints(
    directory, steps, steps_per_loop, interval, killed_at=None
):
  """Steps of the checkpoints Orbit's `Controller.train` writes.

  Steps of the checkpoints Orbit's `Controller.train` writes with
  `steps_per_loop` and `checkpoint_interval`; `killed_at`: the job dies during
  the loop after that step (what its finished loops saved stays), and a new one
  resumes from its last checkpoint.
  """
  for stop in ([killed_at] if killed_at else []) + [steps]:
    step = tf.Variable(0, dtype=tf.int64)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(step=step),
        str(directory),
        max_to_keep=100,
        step_counter=step,
        checkpoint_interval=interval,
    )
    controller = orbit.Controller(
        trainer=_StepCounter(step),
        global_step=step,
        steps_per_loop=steps_per_loop,
        checkpoint_manager=manager,
    )
    controller.train(steps=stop, checkpoint_at_completion=stop == steps)
  return sorted(int(path.rsplit('-', 1)[1]) for path in manager.checkpoints)


@pytest.mark.parametrize(
    'steps, points, checkpoints',
    [
        (400, 4, [100, 200, 300, 400]),
        (450, 4, [112, 224, 336, 448, 450]),
        (10, 1, [10]),
        (97, 1, [97]),
    ],
)
def test_learning_curve_checkpoints_are_ones_orbit_saves(
    tmp_path, monkeypatch, steps, points, checkpoints
):
  """The checkpoints a curve fine-tunes are among those Orbit writes.

  The checkpoints a curve fine-tunes are among those Orbit writes with
  the loop and interval `runner._pretrain` gives the training job.
  """
  wanted = runner._checkpoint_steps(steps, points)  # pylint: disable=protected-access
  assert wanted == [step for step in checkpoints if step != 448]
  commands = []
  monkeypatch.setattr(
      runner, '_call', lambda command, log: commands.append(command)
  )
  runner._pretrain(
      registry.get('004.2').runs[0],
      _settings(),  # pylint: disable=protected-access
      'records',
      str(tmp_path / 'run'),
      steps,
      wanted[0],
  )
  bindings = dict(
      arg.split('=', 2)[1:]
      for arg in commands[0]
      if arg.startswith('--gin_param=experiment.')
  )
  loop, interval = (
      int(bindings[f'experiment.{name}'])
      for name in ('steps_per_loop', 'checkpoint_interval')
  )
  assert _orbit_checkpoints(tmp_path / 'whole', steps, loop, interval) == (
      checkpoints
  )
  if len(checkpoints) > 1:  # Killed between two checkpoints, resumed.
    assert (
        _orbit_checkpoints(
            tmp_path / 'resumed',
            steps,
            loop,
            interval,
            killed_at=checkpoints[1],
        )
        == checkpoints
    )


def test_attention_concentration_pretrains_each_backbone_alike(
    tmp_path, monkeypatch
):
  target = registry.get('002.1')
  calls = []
  monkeypatch.setattr(runner, 'build_records', lambda *args: 30522)
  monkeypatch.setattr(runner, '_pretrain', _fake_pretrain(calls))
  encoders = runner.pretrain_only(
      target,
      _settings(target='002.1'),
      str(tmp_path / '002.1'),
      str(tmp_path / 'runs'),
  )
  assert calls == [('bert_small', 4), ('convbert_small', 4)]
  assert os.path.dirname(encoders['convbert_small']).startswith(
      str(tmp_path / 'runs' / '002_convbert.small-')
  )


def test_pretraining_seeds_are_runs_of_their_own_and_rows_their_mean(
    tmp_path, monkeypatch
):
  pretrained, finetuned = [], []
  scores = iter([0.5, 0.7, 0.6, 0.4, 0.45, 0.47])

  def call(command, log_path):
    del log_path
    flags = dict(
        arg[2:].split('=', 1) for arg in command if arg.startswith('--')
    )
    finetuned.append(flags['init_checkpoint'])
    with open(os.path.join(flags['model_dir'], 'glue_results.json'), 'w') as f:
      json.dump(
          dict(scores={'sst2': next(scores)}, summaries={'sst2': {'n': 2}}), f
      )

  monkeypatch.setattr(runner, '_pretrain', _fake_pretrain(pretrained))
  monkeypatch.setattr(runner, '_call', call)
  monkeypatch.setattr(runner, 'build_records', lambda *args: 30522)
  monkeypatch.setattr(
      runner,
      'run_steps',
      lambda target, *args: {run.name: 4 for run in target.runs},
  )
  target = registry.get('004.1')
  results = runner.run_grid(
      target,
      _settings(target='004.1', pretrain_seeds=3),
      str(tmp_path / 'out'),
      str(tmp_path / 'runs'),
  )
  assert pretrained == [
      (name, 4, seed)
      for name in ('electra_small', 'script_small')
      for seed in (1, 2, 3)
  ]
  electra = results['electra_small']
  assert len(set(electra['run_dir'])) == 3
  assert [seed['glue']['sst2']['score'] for seed in electra['seeds']] == [
      0.5,
      0.7,
      0.6,
  ]
  summary = electra['glue']['sst2']['summary']
  assert electra['glue']['sst2']['score'] == pytest.approx(0.6)
  assert (summary['n'], summary['std']) == (3, pytest.approx(0.1))
  # The seeds are gin bindings, so each seed's directory is named by them,
  # and one seed is the unbound run of a grid without seeds.
  assert runner.run_fingerprint(target.runs[0], 'tiny', 4, seed=1) != (
      runner.run_fingerprint(target.runs[0], 'tiny', 4, seed=2)
  )
  assert runner.run_fingerprint(target.runs[0], 'tiny', 4) != (
      runner.run_fingerprint(target.runs[0], 'tiny', 4, seed=1)
  )
  entries = report.rows(target, results)
  assert entries[0]['seed_averages'] == pytest.approx([50.0, 70.0, 60.0])
  text = report.markdown(target, entries, 'h')
  assert '3 (10.000)' in text


@pytest.mark.parametrize(
    'scores', [[0.5], [0.5, 0.7], [0.5, 0.7, 0.6, 0.4, 0.9]]
)
def test_seed_merges_are_sample_means_and_stds(scores):
  merged = runner.mean_over_seeds([{'sst2': dict(score=s)} for s in scores])
  std = statistics.stdev(scores) if len(scores) > 1 else 0.0
  assert merged == {
      'sst2': dict(
          score=pytest.approx(statistics.fmean(scores), abs=1e-15),
          summary=dict(
              n=len(scores),
              mean=pytest.approx(statistics.fmean(scores), abs=1e-15),
              scores=scores,
              std=pytest.approx(std, abs=1e-15),
              over='pretraining seeds',
          ),
      )
  }
  keys = ('n', 'mean', 'scores', 'std', 'over')
  assert tuple(merged['sst2']['summary']) == keys


def test_held_out_curves_are_averaged_at_the_steps_every_seed_has():
  curves = [
      {1: dict(loss=4.0), 2: dict(loss=3.0)},
      {1: dict(loss=5.0), 2: dict(loss=2.0), 3: dict(loss=1.0)},
  ]
  assert runner._mean_curve(curves) == {1: dict(loss=4.5), 2: dict(loss=2.5)}
  assert runner._mean_curve(curves[1:]) == curves[1]


def test_a_non_finite_held_out_point_averages_to_nan_not_an_error():
  curves = [{1: dict(loss=float('nan'))}, {1: dict(loss=2.0)}]
  assert math.isnan(runner._mean_curve(curves)[1]['loss'])
