"""The regeneration report: ours beside the paper, figures and claims."""

import dataclasses
import json
import os

import pytest

from experiments import paper_tables
from experiments.regeneration import registry
from experiments.regeneration import report


def _result(steps, **scores):
  return dict(
      train_steps=steps,
      glue={
          task: dict(score=score, summary=dict(n=3, std=0.01))
          for task, score in scores.items()
      },
  )


def test_report_puts_ours_beside_the_paper_on_its_scale():
  # 004 Table 2 prints scores x100; ours are fractions.
  target = registry.get('004.2')
  entries = report.rows(
      target,
      {
          'bert_small': _result(10, sst2=0.80, cola=0.20),
          'electra_small': _result(8, sst2=0.85, cola=0.30),
      },
  )
  bert = entries[0]
  sst = next(cell for cell in bert['cells'] if cell['task'] == 'sst2')
  script = paper_tables.load('004')
  paper_sst = script.cell('2', 'BERT-small', 'SST').value
  paper_cola = script.cell('2', 'BERT-small', 'CoLA').value
  assert sst['ours'] == pytest.approx(80.0)
  assert sst['difference'] == pytest.approx(80.0 - paper_sst)
  assert (sst['seeds'], sst['std']) == (3, pytest.approx(1.0))
  # The average beside the paper's mean over the same two tasks.
  assert bert['average']['ours'] == pytest.approx(50.0)
  assert bert['average']['paper'] == pytest.approx((paper_sst + paper_cola) / 2)
  text = report.markdown(target, entries, 'header')
  assert '| BERT-small | 10 | SST | 80.000 | 3 (1.000) |' in text
  assert 'Our order: ELECTRA-small > BERT-small' in text


def test_report_keeps_001s_fractions():
  target = registry.get('001.IV')
  entries = report.rows(target, {'ale_small': _result(3, mrpc=0.7)})
  [cell] = entries[0]['cells']
  assert (cell['column'], cell['ours'], cell['paper']) == ('MRPC', 0.7, 0.738)


def test_report_without_task_columns_compares_with_the_printed_average():
  target = registry.get('003.2')
  entries = report.rows(target, {'teams': _result(5, sst2=0.8)})
  average = entries[0]['average']
  assert (average['ours'], average['paper']) == (pytest.approx(80.0), 81.99)
  assert average['paper_quantity'] == 'paper GLUE (all its tasks)'


def test_report_prints_our_parameters_beside_the_papers_count():
  target = registry.get('002.4')
  results = {
      'bnk_gl': dict(_result(5, sst2=0.8), parameters=2385792),
      'bnk_gl_larger': _result(5, sst2=0.7),
  }
  entries = report.rows(target, results)
  assert entries[0]['parameters'] == dict(
      column='Params', ours=2385792, paper=14e6
  )
  assert entries[1]['parameters'] is None
  text = report.markdown(target, entries, 'header')
  assert (
      '| ConvBERTmedium-small / +BNK,+GL | 5 | Params (at this scale) | '
      '2.386M | - | 14M | - |'
  ) in text
  # The count is not a GLUE score: the average is over SST-2 alone.
  assert entries[0]['average']['ours'] == pytest.approx(80.0)


@pytest.mark.parametrize(
    'unit, scale',
    [
        ('accuracy (fraction)', 1.0),
        ('GLUE average score x100', 100.0),
        ('accuracy (%)', 100.0),
    ],
)
def test_score_scale_comes_from_the_unit(unit, scale):
  assert report.score_scale(unit) == scale


def test_unknown_score_unit_is_refused():
  with pytest.raises(ValueError, match='neither'):
    report.score_scale('GLUE average score')


def _fig5_results():
  """Sampled/Hardest at K = 3 and 5 and the ELECTRA reference."""
  scores = {
      'sampled_k5': 0.7,
      'sampled_k3': 0.6,
      'hardest_k3': 0.55,
      'hardest_k5': 0.65,
      'electra': 0.5,
  }
  return {
      name: dict(
          train_steps=4,
          glue={'sst2': dict(score=score)},
          curve={
              '2': {'sst2': dict(score=0.1)},
              '4': {'sst2': dict(score=score)},
          },
      )
      for name, score in scores.items()
  }


def test_figure_is_written_as_png(tmp_path):
  target = registry.get('003.fig5')
  entries = report.rows(target, _fig5_results())
  report.write(target, entries, 'header', str(tmp_path))
  with open(os.path.join(tmp_path, '003.fig5.png'), 'rb') as f:
    assert f.read(8) == b'\x89PNG\r\n\x1a\n'
  with open(os.path.join(tmp_path, '003.fig5.json')) as f:
    assert len(json.load(f)['rows']) == 5


def test_figure_points_are_the_final_checkpoints_by_series_and_x():
  target = registry.get('003.fig5')
  entries = report.rows(target, _fig5_results())
  series, references = report.figure_lines(target, entries)
  assert series == {
      'Sampled': [(3.0, 0.6), (5.0, 0.7)],
      'Hardest': [(3.0, 0.55), (5.0, 0.65)],
  }
  assert references == {'ELECTRA-Small++': 0.5}
  text = report.markdown(target, entries, 'header')
  assert '| Hardest | 3 | 0.550 |' in text
  assert '| ELECTRA-Small++ (reference) | - | 0.500 |' in text


def test_learning_curve_points_are_every_checkpoint_of_each_run():
  target = registry.get('004.fig2')
  curve = {'200': {'sst2': dict(score=0.6)}, '100': {'sst2': dict(score=0.5)}}
  results = {
      'electra_small': dict(train_steps=200, glue=curve['200'], curve=curve)
  }
  series, references = report.figure_lines(target, report.rows(target, results))
  assert series == {'ELECTRA-small': [(100.0, 0.5), (200.0, 0.6)]}
  assert not references
  assert '| ELECTRA-small | 100 | 0.500 |' in report.markdown(
      target, report.rows(target, results), 'header'
  )


def _entry(run, row, paper, seeds):
  return dict(
      run=run,
      row=row,
      seed_averages=seeds,
      average=None if paper is None else dict(paper=paper),
  )


def test_claims_compare_the_gap_with_twice_its_standard_error():
  target = registry.get('004.1')
  entries = [
      _entry('electra_small', 'ELECTRA-small', 80.0, [70.0, 72.0]),
      _entry('script_small', 'SCRIPT-small', 81.0, [73.0, 75.0]),
  ]
  [claim] = report.claims(target, entries)
  # Gap 3; standard error sqrt(2 / 2 + 2 / 2) = sqrt(2).
  assert (claim['better'], claim['worse']) == ('SCRIPT-small', 'ELECTRA-small')
  assert claim['ours_gap'] == pytest.approx(3.0)
  assert claim['noise'] == pytest.approx(2.0 * 2.0**0.5)
  assert claim['paper_gap'] == pytest.approx(1.0)
  assert claim['verdict'] == 'ahead'
  entries[1]['seed_averages'] = [70.0, 72.5]
  assert report.claims(target, entries)[0]['verdict'] == 'within noise'
  entries[1]['seed_averages'] = [60.0, 61.0]
  assert report.claims(target, entries)[0]['verdict'] == 'behind'
  # A single seed has no spread to judge by.
  entries[1]['seed_averages'] = [90.0]
  assert report.claims(target, entries) == []


def test_stated_claims_need_no_paper_average():
  target = registry.get('002.6')
  entries = [
      _entry('convbert_small', 'ConvBERT-small', 81.4, [61.0, 63.0]),
      _entry(
          'electra_small', 'ELECTRA-small (BERT backbone)', None, [60.0, 60.5]
      ),
  ]
  [claim] = report.claims(target, entries)
  assert claim['source'].startswith('002 Response 3')
  assert claim['paper_gap'] is None
  assert claim['ours_gap'] == pytest.approx(1.75)


def _seed_result(score, last):
  # Steps out of order, and not in string order: the last is 1000.
  return dict(
      glue={'sst2': dict(score=score)},
      held_out={'1000': last, '500': dict(masked_lm_accuracy=0.1)},
  )


def test_claims_are_checked_on_each_held_out_metric_over_seeds():
  target = registry.get('002.mlm')
  results = {
      name: dict(
          train_steps=1000,
          glue={'sst2': dict(score=0.5)},
          held_out={
              '1000': dict(
                  masked_lm_accuracy=mean,
                  lm_example_loss=3.0,
                  discriminator_auc=0.6,
              ),
              '500': dict(masked_lm_accuracy=0.1),
          },
          seeds=[
              _seed_result(
                  score,
                  dict(
                      masked_lm_accuracy=accuracy,
                      lm_example_loss=3.0,
                      # Only the first seed has it: no claim is made on it.
                      **(dict(discriminator_auc=0.6) if i == 0 else {}),
                  ),
              )
              for i, (score, accuracy) in enumerate(seeds)
          ],
      )
      for name, mean, seeds in (
          ('bert_small', 0.31, ((0.70, 0.30), (0.72, 0.31), (0.71, 0.32))),
          ('convbert_small', 0.35, ((0.70, 0.33), (0.71, 0.35), (0.72, 0.37))),
      )
  }
  entries = report.rows(target, results)
  # Each seed's value at the last step, not at the first or the
  # last in string order.
  # (discriminator_auc: not every seed has it).
  assert entries[0]['held_out_seeds'] == dict(
      masked_lm_accuracy=[0.30, 0.31, 0.32], lm_example_loss=[3.0, 3.0, 3.0]
  )
  every_metric = dataclasses.replace(
      target, held_out_claims=report.HIGHER_IS_BETTER
  )
  by_measure = {
      claim['measure']: claim for claim in report.claims(every_metric, entries)
  }
  assert set(by_measure) == {
      'GLUE mean over the tasks run',
      'held-out masked_lm_accuracy',
  }
  unnamed = dataclasses.replace(target, held_out_claims=())
  assert [claim['measure'] for claim in report.claims(unnamed, entries)] == [
      'GLUE mean over the tasks run'
  ]
  accuracy = by_measure['held-out masked_lm_accuracy']
  assert accuracy['better'].startswith('ConvBERT')
  # Gap 0.35 - 0.31; variances 1e-4 and 4e-4, each over 3 seeds.
  assert accuracy['ours_gap'] == pytest.approx(0.04)
  assert accuracy['noise'] == pytest.approx(2.0 * (5e-4 / 3) ** 0.5)
  assert accuracy['verdict'] == 'ahead'
  assert by_measure['GLUE mean over the tasks run']['verdict'] == (
      'within noise'
  )
  text = report.markdown(target, entries, 'h')
  # The held-out table gives each mean with its own seeds' std.
  assert (
      '| ConvBERT backbone, masked LM (001 BERT_small recipe) | 0.600 | '
      '3.000 (0.000) | 0.350 (0.020) |'
  ) in text
  assert (
      '| BERT backbone, masked LM (001 BERT_small) | 0.600 | 3.000 (0.000) | '
      '0.310 (0.010) |' in text
  )
  assert '| held-out masked_lm_accuracy | - | 0.040 |' in text
  # The curve of the named metric, step by step in order.
  assert (
      '| BERT backbone, masked LM (001 BERT_small) | 500 | 0.500 | 0.100 |\n'
      '| BERT backbone, masked LM (001 BERT_small) | 1,000 | 1.000 | 0.310 |'
  ) in text


def test_held_out_claims_carry_no_paper_gap():
  target = dataclasses.replace(
      registry.get('004.1'), held_out_claims=('masked_lm_accuracy',)
  )
  entries = [
      dict(
          _entry('electra_small', 'ELECTRA-small', 80.0, [70.0, 72.0]),
          held_out_seeds=dict(masked_lm_accuracy=[0.20, 0.22]),
      ),
      dict(
          _entry('script_small', 'SCRIPT-small', 81.0, [73.0, 75.0]),
          held_out_seeds=dict(masked_lm_accuracy=[0.30, 0.31]),
      ),
  ]
  glue, held = report.claims(target, entries)
  assert (glue['measure'], glue['paper_gap']) == (
      'GLUE mean over the tasks run',
      pytest.approx(1.0),
  )
  assert (held['measure'], held['paper_gap']) == (
      'held-out masked_lm_accuracy',
      None,
  )
  assert held['ours_gap'] == pytest.approx(0.095)


@pytest.mark.parametrize('key', sorted(registry.TARGETS))
def test_held_out_claims_are_metrics_that_rank(key):
  assert set(registry.get(key).held_out_claims) <= set(report.HIGHER_IS_BETTER)


def test_a_loss_is_refused_as_a_held_out_claim():
  target = dataclasses.replace(
      registry.get('002.mlm'), held_out_claims=('lm_example_loss',)
  )
  with pytest.raises(ValueError, match='lm_example_loss'):
    report.claims(target, [])
