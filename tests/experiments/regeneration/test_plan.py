"""The paper-scale plan: commands, FLOPs, TPU-hours and run fingerprints."""

import dataclasses
import os

import pytest

from experiments.regeneration import plan
from experiments.regeneration import registry
from official_repro.training import gin_utils


@pytest.mark.slow
def test_plan_fine_tunes_base_models_with_their_size_and_squad():
  run = registry.get('003.1').runs[8]  # TEAMS-Base
  target = registry.Target(
      key='003.1',
      paper='003',
      table='1',
      kind='pretrain_glue',
      description='d',
      runner='grid',
      runs=(run,),
      finetune_paper='003_teams',
      squad=('squad11', 'squad20'),
  )
  [planned] = plan.plan(
      target, plan.PaperSettings('gs://b', 'gs://glue', squad_dir='gs://sq')
  )
  glue, squad11, squad20 = planned.commands()[1:]
  assert '--gin_file=gin/finetune/003_teams/glue_base.gin' in glue
  assert (
      '-- --gin_file=gin/finetune/003_teams/squad11.gin '
      '--gin_file=gin/finetune/003_teams/squad11_base.gin' in squad11
  )
  assert planned.model_dir.startswith('gs://b/003_teams.base-')
  assert (
      '--module=experiments.glue_suite '
      f'--model_dir={planned.model_dir}/glue_003_teams_base -- ' in glue
  )
  assert glue.endswith('--gin_file=gin/finetune/003_teams/glue_base.gin')
  assert planned.glue_dir == f'{planned.model_dir}/glue_003_teams_base'
  assert (
      '--module=official_repro.finetune '
      f'--model_dir={planned.model_dir}/squad20_003_teams -- ' in squad20
  )
  assert squad20.endswith('--data_dir=gs://sq/squad20')
  assert plan.size_files('004_script', 'glue', 'base') == [
      'gin/finetune/004_script/base.gin'
  ]
  with pytest.raises(FileNotFoundError, match='large'):
    plan.size_files('004_script', 'glue', 'large')


@pytest.mark.slow
def test_002_table_5_plan_shows_the_papers_hours():
  target = registry.Target(
      key='002.5',
      paper='002',
      table='5',
      kind='plan_only',
      description='d',
      runner='plan_only',
      runs=(registry.get('002.5').runs[0],),
  )
  [run] = plan.plan(target, plan.PaperSettings('gs://b', 'gs://glue'))
  assert run.paper_hours == 12.0
  assert '| 12 |' in plan.format_plan(target, [run])


def test_plan_doubles_the_steps_and_hours_of_a_doubled_budget():
  target = registry.Target(
      key='x',
      paper='001',
      table=None,
      kind='pretrain_glue',
      description='d',
      runner='grid',
      finetune_paper='001_ale',
      runs=(
          registry.Run('once', 'r', ('gin/papers/001_ale/electra_small.gin',)),
          registry.Run(
              'twice',
              'r',
              ('gin/papers/001_ale/electra_small.gin',),
              budget_ratio=2.0,
          ),
      ),
  )
  once, twice = plan.plan(
      target, plan.PaperSettings('gs://bucket/', 'gs://glue')
  )
  assert (once.train_steps, twice.train_steps) == (125000, 250000)
  assert twice.tpu_v3_8_hours == pytest.approx(2 * once.tpu_v3_8_hours)
  assert once.model_dir.startswith('gs://bucket/001_ale.electra_small-')
  assert twice.model_dir != once.model_dir
  assert '--gin_param=experiment.train_steps=250000' in twice.commands()[0]
  assert (
      f'--init_checkpoint={twice.model_dir} --glue_dir=gs://glue'
      in '\n'.join(twice.commands()[1:])
  )
  assert once.finetune_flops == twice.finetune_flops > 0
  assert once.finetune_tpu_v3_8_hours == pytest.approx(
      once.finetune_flops / plan.tpu_v3_8_flops_per_second() / 3600
  )


def test_paper_scale_tables_share_the_model_directory_of_an_equal_model():
  """Equal models are one pretraining run; different ones are not.

  ELECTRA-small of 001 Table IV and 004 Table 2 is one pretraining run
  (fine-tuned once per paper's protocol); 001's doubled budget is another,
  and so are models whose gin bindings differ.
  """

  def planned(key, *names):
    target = dataclasses.replace(
        registry.get(key),
        runs=tuple(run for run in registry.get(key).runs if run.name in names),
    )
    return {
        run.name: run
        for run in plan.plan(target, plan.PaperSettings('gs://b', 'gs://g'))
    }

  ale = planned('001.IV', 'electra_small', 'electra_small_2x')
  script = planned('004.2', 'electra_small')
  assert ale['electra_small'].model_dir == script['electra_small'].model_dir
  assert ale['electra_small'].glue_dir == (
      ale['electra_small'].model_dir + '/glue_001_ale'
  )
  assert script['electra_small'].glue_dir == (
      ale['electra_small'].model_dir + '/glue_004_script'
  )
  assert ale['electra_small_2x'].model_dir != ale['electra_small'].model_dir

  def directory(key, name):
    [run] = [run for run in registry.get(key).runs if run.name == name]
    return plan.model_directory('gs://b', run)

  assert directory('003.3', 'electra') == directory('003.4', 'electra_small_pp')
  assert directory('003.3', 'electra') != directory('003.1', 'electra_small')
  # Rows of other gin files with equal bindings: one directory, named by
  # the first table that has the run.
  assert directory('003.2', 'only_mlm') == directory('003.1', 'bert_small_pp')
  assert directory('003.2', 'only_mlm').startswith(
      'gs://b/003_teams.table5_small_pp-'
  )
  assert directory('003.fig5', 'sampled_k5') == directory(
      '003.1', 'teams_small_pp'
  )
  assert directory('003.fig5', 'sampled_k3') != directory(
      '003.1', 'teams_small_pp'
  )
  # Fig. 5's ELECTRA reference is 003's ELECTRA-Small++ row.
  assert directory('003.fig5', 'electra') == directory(
      '003.4', 'electra_small_pp'
  )


def test_gin_fingerprint_is_of_the_bindings_not_the_text(tmp_path):
  """Reformatting a gin file's comments keeps the run store's keys.

  Runs are stored under a fingerprint of their gin bindings: a change of
  comments or layout only must keep it (finished runs stay found), a
  changed value must not.
  """
  recipe = 'gin/papers/003_teams/pretrain_recipe.gin'
  with open(os.path.join(gin_utils.REPO_ROOT, recipe)) as f:
    text = f.read()
  assert '# [003 Table 5: Warmup Steps |' in text
  bare = '\n'.join(
      line.split('#')[0].strip()
      for line in text.splitlines()
      if line.split('#')[0].strip()
  )
  variants = {
      'bare.gin': bare,
      'changed.gin': bare.replace(
          'optimization.warmup_steps = 10000',
          'optimization.warmup_steps = 9999',
      ),
  }
  for name, variant in variants.items():
    with open(os.path.join(tmp_path, name), 'w') as f:
      f.write(variant)
  assert variants['changed.gin'] != bare
  fingerprint = plan.gin_fingerprint([recipe])
  assert plan.gin_fingerprint([os.path.join(tmp_path, 'bare.gin')]) == (
      fingerprint
  )
  assert plan.gin_fingerprint([os.path.join(tmp_path, 'changed.gin')]) != (
      fingerprint
  )


def test_config_facts_read_the_bindings_after_the_files():
  files = ('gin/papers/001_ale/electra_small.gin', 'gin/regenerate/tiny.gin')
  assert (
      plan.config_facts(files).optimizer,
      plan.config_facts(files).masking,
  ) == ('lamb', 'dynamic')
  bindings = (
      "optimization.optimizer = 'adamw'",
      "pretrain_data.masking = 'static'",
  )
  facts = plan.config_facts(files, bindings)
  assert (facts.optimizer, facts.masking) == ('adamw', 'static')
