"""Tests of official_repro.rescoring.report."""

from official_repro.metrics import wer
from official_repro.rescoring import interpolation
from official_repro.rescoring import report


def _point(weight, length_bonus, errors):
  return interpolation.GridPoint(
      weight, length_bonus, wer.ErrorCounts(errors, 0, 0, 10)
  )


_GRID = interpolation.GridSearchResult(
    dev_set='dev',
    points=(
        _point(0.0, 0.0, 3),
        _point(0.0, 1.0, 2),
        _point(0.5, 0.0, 1),
        _point(0.5, 1.0, 4),
    ),
    best=_point(0.5, 0.0, 1),
)


def test_grid_table_has_weights_down_bonuses_across_and_the_best_in_bold():
  assert report.format_grid(_GRID).splitlines() == [
      "Dev WER (%) on 'dev' of each grid point (best in bold):",
      '',
      '| weight \\ length bonus | 0 | 1 |',
      '|---|---|---|',
      '| 0 | 30.00 | 20.00 |',
      '| 0.5 | **10.00** | 40.00 |',
      '',
      'Chosen: weight 0.5, length bonus 0.',
  ]


def test_grid_as_dict_holds_every_point_and_the_best():
  as_dict = report.grid_as_dict(_GRID)
  assert as_dict['dev_set'] == 'dev'
  assert [(p['weight'], p['length_bonus']) for p in as_dict['points']] == [
      (0.0, 0.0),
      (0.0, 1.0),
      (0.5, 0.0),
      (0.5, 1.0),
  ]
  assert as_dict['best']['weight'] == 0.5
  assert as_dict['best']['substitutions'] == 1


def _set_result(rescored, num_rank1_not_best_first_pass=0):
  return interpolation.SetResult(
      name='test',
      num_utterances=3,
      num_hypotheses=7,
      weight=0.3 if rescored else None,
      length_bonus=0.0 if rescored else None,
      first_pass=wer.ErrorCounts(1, 1, 0, 7),
      rescored=wer.ErrorCounts(1, 0, 0, 7) if rescored else None,
      oracle=wer.ErrorCounts(0, 0, 0, 7),
      num_rank1_not_best_first_pass=num_rank1_not_best_first_pass,
  )


def test_set_table_rows_first_pass_rescored_oracle():
  assert report.format_set_table(_set_result(True), True).splitlines() == [
      '### test (tuning set): 3 utterances, 7 hypotheses, 7 reference words',
      '',
      '| hypotheses | WER (%) | sub | del | ins |',
      '|---|---|---|---|---|',
      '| first pass (rank 1) | 28.57 | 1 | 1 | 0 |',
      '| rescored (weight 0.3, length bonus 0) | 14.29 | 1 | 0 | 0 |',
      '| oracle | 0.00 | 0 | 0 | 0 |',
  ]


def test_set_table_without_lm_scores_has_no_rescored_row_and_notes_costs():
  lines = report.format_set_table(_set_result(False, 2)).splitlines()
  assert lines[0] == '### test: 3 utterances, 7 hypotheses, 7 reference words'
  assert [line.split(' |')[0] for line in lines[4:6]] == [
      '| first pass (rank 1)',
      '| oracle',
  ]
  assert lines[-1].startswith('Note: in 2 lists the rank-1 hypothesis')


def test_kaldi_text_is_one_utterance_a_line(tmp_path):
  path = str(tmp_path / 'test' / 'text')
  report.write_kaldi_text(path, [('u1', 'good morning'), ('u2', '')])
  with open(path) as f:
    assert f.read() == 'u1 good morning\nu2\n'
