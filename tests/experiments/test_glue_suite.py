"""`glue_suite` and `finetune` under ELECTRA's own recipe, from a Hub folder."""

import json
import os
import random

import pytest

from experiments import paper_tables
from official_repro.tasks import finetuning_registry
from tests.modeling.interchange import hf_reference
from tests.training import test_finetuning as finetuning_fixtures

# The recipe at a size a test can run: one seed, one epoch, short inputs.
_QUICK = [
    'run_protocol.num_runs = 1',
    'finetuning.num_epochs = 1',
    'finetuning.train_batch_size = 4',
    'finetuning.max_seq_length = 16',
]


def test_the_released_electra_rows_are_the_readme_scores_as_fractions():
  rows = paper_tables.release_rows('electra')
  assert sorted(rows) == ['ELECTRA-Base', 'ELECTRA-Large', 'ELECTRA-Small']
  small = rows['ELECTRA-Small']
  assert small == pytest.approx(
      dict(
          cola=0.570,
          sst2=0.912,
          mrpc=0.880,
          stsb=0.875,
          qqp=0.890,
          mnli=0.813,
          qnli=0.884,
          rte=0.667,
      )
  )
  assert set(small) <= set(finetuning_registry.task_names(group='glue'))


@pytest.fixture(scope='module')
def release_and_glue(tmp_path_factory):
  """A tiny random Hugging Face ELECTRA discriminator and MRPC/STS-B data."""
  root = tmp_path_factory.mktemp('electra_recipe')
  discriminator, state = hf_reference.build('electra', 'rtd')
  folder = hf_reference.write_folder(
      str(root / 'electra'), discriminator.config, state
  )
  glue_dir = finetuning_fixtures._write_glue(  # pylint: disable=protected-access
      root / 'glue', random.Random(3)
  )
  return folder, glue_dir


def _operative(path):
  with open(path) as f:
    return f.read()


@pytest.mark.slow
def test_glue_suite_runs_electras_recipe_beside_its_readme_row(
    release_and_glue, tmp_path, python_m
):
  folder, glue_dir = release_and_glue
  model_dir = tmp_path / 'suite'
  completed = python_m(
      [
          'experiments.glue_suite',
          '--paper=electra',
          f'--init_checkpoint={folder}',
          f'--glue_dir={glue_dir}',
          f'--model_dir={model_dir}',
          '--published_row=ELECTRA-Small',
          '--strategy=cpu',
      ]
      + [f'--gin_param={p}' for p in _QUICK]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  assert '| electra ELECTRA-Small | 0.880 | 0.875 | 0.877 |' in completed.stdout
  with open(model_dir / 'glue_results.json') as f:
    assert set(json.load(f)['scores']) == {'mrpc', 'stsb'}
  operative = _operative(model_dir / 'stsb' / 'operative_config.gin')
  for binding in (
      "glue.head = 'first_token'",
      'glue.scale_stsb_targets = True',
      'glue.double_unordered = True',
      'finetuning.summed_loss = True',
      "finetuning.data_order = 'original'",
      'finetuning.adam_bias_correction = False',
      "run_protocol.aggregation = 'median'",
  ):
    assert binding in operative, binding


@pytest.mark.slow
def test_finetune_runs_electras_large_recipe(
    release_and_glue, tmp_path, python_m
):
  folder, glue_dir = release_and_glue
  model_dir = tmp_path / 'mrpc'
  completed = python_m(
      [
          'official_repro.finetune',
          '--gin_file=gin/finetune/electra/mrpc.gin',
          '--gin_file=gin/finetune/electra/large.gin',
          f'--init_checkpoint={folder}',
          f'--data_dir={glue_dir}',
          f'--model_dir={model_dir}',
          '--strategy=cpu',
      ]
      + [f'--gin_param={p}' for p in _QUICK]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  configs = [
      os.path.join(root, name)
      for root, _, names in os.walk(model_dir)
      for name in names
      if name == 'operative_config.gin'
  ]
  assert configs, os.listdir(model_dir)
  operative = _operative(configs[0])
  assert 'finetuning.learning_rate = 5e-05' in operative
  assert 'finetuning.layerwise_lr_decay = 0.9' in operative
  assert "glue.head = 'first_token'" in operative
