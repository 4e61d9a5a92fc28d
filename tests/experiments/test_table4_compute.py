"""001 Table IV's compute columns, checked against their own printed cells."""

import re

import pytest


def _number(cell):
  """The value of a printed cell: '13.55M' -> 13.55, '125,000' -> 125000."""
  return float(cell.rstrip('M').replace(',', ''))


def _rows(stdout):
  """{model: [cells]} of the printed markdown table."""
  rows = {}
  for line in stdout.splitlines():
    cells = [cell.strip() for cell in line.strip('|').split('|')]
    if line.startswith('|') and cells[0] not in ('model', '---'):
      rows[cells[0]] = cells[1:]
  return rows


@pytest.mark.slow
def test_steps_at_equal_budget_follow_from_the_printed_flops(python_m):
  completed = python_m(['experiments.table4_compute'])
  assert completed.returncode == 0, completed.stderr[-3000:]
  rows = _rows(completed.stdout)
  assert list(rows) == [
      'BERT_small',
      'ELECTRA_small',
      'ELECTRA_small 2x time',
      'ALE_small',
  ]
  budget = float(re.search(r'Table V steps, (\S+) FLOPs', completed.stdout)[1])
  electra_paper_flops = _number(rows['ELECTRA_small'][3])
  for name, cells in rows.items():
    ours, paper, formula, paper_flops, ratio, steps, paper_steps = map(
        _number, cells
    )
    # The encoder's parameters are 001's (which prints one decimal).
    assert ours == pytest.approx(paper, rel=0.02), name
    assert ratio == pytest.approx(formula / paper_flops, rel=0.01), name
    # The gin files train 001's steps, so the FLOPs per step are
    # formula / paper_steps, and the row's budget is ELECTRA_small's scaled
    # by 001's FLOPs ratio; the printed FLOPs have 3 significant digits.
    row_budget = budget * paper_flops / electra_paper_flops
    expected = row_budget / (formula / paper_steps)
    assert steps == pytest.approx(expected, rel=0.01), name
  # The budget is ELECTRA_small's own: its row and the 2x row train the
  # paper's steps exactly.
  assert rows['ELECTRA_small'][5] == rows['ELECTRA_small'][6] == '125,000'
  assert rows['ELECTRA_small 2x time'][5] == '250,000'
