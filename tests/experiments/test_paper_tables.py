"""The loader of the papers' transcribed tables, on hand-made tables."""

import pytest

from experiments import paper_tables


@pytest.mark.parametrize(
    'printed, value, plus_minus',
    [
        ('0.838', 0.838, None),
        ('2.3e17', 2.3e17, None),
        ('5e-4', 0.0005, None),
        ('163k', 163000.0, None),
        ('500K', 500000.0, None),
        ('13.5M', 13500000.0, None),
        ('1.76M', 1760000.0, None),
        ('26.5G', 26500000000.0, None),
        ('1,000,000', 1000000.0, None),
        ('1/2', 0.5, None),
        ('88.0\u00b10.5', 88.0, 0.5),
        ('88.0 \u00b1 0.5', 88.0, 0.5),
        ('Linear', 'Linear', None),
        ('12h', 12.0, None),
        ('-', None, None),
        ('/', None, None),
        ('', None, None),
    ],
)
def test_parse_cell(printed, value, plus_minus):
  assert paper_tables.parse_cell(printed) == (value, plus_minus)


def _table(**overrides):
  spec = dict(
      id='5',
      caption='Pre-training hyper-parameters.',
      kind='hyperparameters',
      row_header='Hyper-parameter',
      columns=['Small/Small++', 'Large'],
      row_units={'Mask Percentage': '%'},
      rows=[
          dict(name='Batch Size', cells=['256/1024', '2048']),
          dict(name='Number of Layers', cells=['12', '24']),
          dict(name='Generator Size', cells=['1/2', '1/2'], split=False),
          dict(name='Mask Percentage', cells=['15', '15']),
          dict(name='Dropout', cells=['0.1', '-']),
      ],
  )
  spec.update(overrides)
  return paper_tables.Table('003', spec)


def test_slashed_column_parts_select_their_value():
  table = _table()
  assert table.cell('Batch Size', 'Small').value == 256
  assert table.cell('Batch Size', 'Small++').value == 1024
  assert table.cell('Batch Size', 'Large').value == 2048


def test_whole_slashed_column_of_a_split_cell_is_refused():
  # "256/1024" read whole would be the fraction 0.25.
  with pytest.raises(ValueError, match=r"name one of \['Small', 'Small\+\+'\]"):
    _table().cell('Batch Size', 'Small/Small++')
  assert _table().cell('Number of Layers', 'Small/Small++').value == 12
  assert _table().cell('Generator Size', 'Small/Small++').value == 0.5


def test_single_value_applies_to_every_part():
  table = _table()
  assert table.cell('Number of Layers', 'Small').value == 12
  assert table.cell('Number of Layers', 'Small++').value == 12


def test_unsplit_row_keeps_its_fraction():
  assert _table().cell('Generator Size', 'Small++').value == 0.5


def test_cell_knows_its_place_unit_and_citation():
  cell = _table().cell('Mask Percentage', 'Small')
  assert (cell.paper, cell.table, cell.row, cell.column, cell.unit) == (
      '003',
      '5',
      'Mask Percentage',
      'Small',
      '%',
  )
  assert cell.cite() == '[003 Table 5: Mask Percentage | Small]'


@pytest.mark.parametrize(
    'row, column, message',
    [
        ('Batch', 'Small', "no row 'Batch'"),
        ('Batch Size', 'Medium', "no column 'Medium'"),
        ('Dropout', 'Large', 'is empty'),
    ],
)
def test_missing_cells_are_named(row, column, message):
  with pytest.raises(KeyError, match=message):
    _table().cell(row, column)


def test_cell_that_does_not_split_into_the_parts_is_refused():
  table = _table(
      rows=[dict(name='Train Steps', cells=['1/2/3', '1M'])], row_units={}
  )
  with pytest.raises(ValueError, match='does not split'):
    table.cell('Train Steps', 'Small')


@pytest.mark.parametrize(
    'rows, message',
    [
        (
            [
                dict(name='A', cells=['1', '2']),
                dict(name='A', cells=['1', '2']),
            ],
            "row 'A' repeats",
        ),
        ([dict(name='A', cells=['1'])], '1 cells for 2 columns'),
    ],
)
def test_malformed_tables_are_refused(rows, message):
  with pytest.raises(ValueError, match=message):
    _table(rows=rows, row_units={})


def test_repeated_names_are_told_apart_by_key():
  table = _table(
      row_units={},
      rows=[
          dict(
              name='No Tie',
              key='Small++ / No Tie',
              group='Small++',
              cells=['81.65', '-'],
          ),
          dict(
              name='No Tie',
              key='Base++ / No Tie',
              group='Base++',
              cells=['86.63', '-'],
          ),
      ],
  )
  assert table.cell('Base++ / No Tie', 'Small').value == 86.63


def test_every_paper_loads():
  papers = {paper: paper_tables.load(paper) for paper in paper_tables.PAPERS}
  assert {key: paper.paper for key, paper in papers.items()} == {
      key: key for key in paper_tables.PAPERS
  }
  for paper in papers.values():
    assert paper.tables and paper.sections


# The transcriptions against the papers' own arithmetic: an average column
# is the mean of its task columns, and rows that several tables repeat
# carry the same numbers. A mistyped cell breaks one of these.
_TASKS = ('MNLI', 'QNLI', 'QQP', 'RTE', 'SST-2', 'MRPC', 'CoLA', 'STS-B')
_004_TASKS = ('CoLA', 'SST', 'MRPC', 'STS', 'QQP', 'MNLI', 'QNLI', 'RTE')


@pytest.mark.parametrize(
    'paper, table, tasks, average, tolerance',
    [
        ('001', 'IV', _TASKS, 'Avg.', 0.0005),
        ('002', '6', _TASKS, 'Avg.', 0.05),
        # 004 prints two means (80.38, 80.19) 0.006 below the rounded mean.
        ('004', '2', _004_TASKS, 'Mean', 0.01),
    ],
)
def test_average_columns_are_the_mean_of_their_tasks(
    paper, table, tasks, average, tolerance
):
  transcription = paper_tables.load(paper).table(table)
  for row in transcription.row_keys:
    mean = sum(transcription.cell(row, task).value for task in tasks) / 8
    assert abs(mean - transcription.cell(row, average).value) <= tolerance, (
        paper,
        table,
        row,
        mean,
    )


_RESULT_COLUMNS = (
    'GLUE',
    'SQuAD 1.1 EM',
    'SQuAD 1.1 F1',
    'SQuAD 2.0 EM',
    'SQuAD 2.0 F1',
)


@pytest.mark.parametrize(
    'table, row, table_1_row',
    [
        ('2', 'Only MLM (i.e., BERT)', 'BERT-Small++'),
        (
            '2',
            'Only RTD (i.e., ELECTRA)',
            'ELECTRA-Small++ (Our reimplementation)',
        ),
        ('2', 'RTD + MWS (i.e., TEAMS)', 'TEAMS-Small++'),
        ('3', 'ELECTRA-Small++', 'ELECTRA-Small++ (Our reimplementation)'),
        ('3', 'TEAMS-Small++', 'TEAMS-Small++'),
        ('4', 'ELECTRA-Small++', 'ELECTRA-Small++ (Our reimplementation)'),
        ('4', 'TEAMS-Small++', 'TEAMS-Small++'),
        ('4', 'ELECTRA-Base++', 'ELECTRA-Base++ (Our reimplementation)'),
        ('4', 'TEAMS-Base++', 'TEAMS-Base++'),
    ],
)
def test_003_ablation_baselines_repeat_table_1(table, row, table_1_row):
  teams = paper_tables.load('003')
  for column in _RESULT_COLUMNS:
    assert (
        teams.cell(table, row, column).printed
        == teams.cell('1', table_1_row, column).printed
    ), (table, row, column)


@pytest.mark.parametrize(
    'row, table_2_row',
    [
        ('ELECTRA-small', 'ELECTRA-small'),
        ('SCRIPT-small', 'SCRIPT-small (ours)'),
        ('ELECTRA-base', 'ELECTRA-base'),
        ('SCRIPT-base', 'SCRIPT-base (ours)'),
    ],
)
def test_004_table_1_glue_mean_repeats_table_2(row, table_2_row):
  script = paper_tables.load('004')
  assert (
      script.cell('1', row, 'GLUE Mean').printed
      == script.cell('2', table_2_row, 'Mean').printed
  )


def test_001_doubled_run_has_twice_the_flops_and_the_same_parameters():
  table = paper_tables.load('001').table('IV')
  assert (
      table.cell('2x time', 'Train FLOPs').value
      == 2 * table.cell('ELECTRA_small', 'Train FLOPs').value
  )
  assert table.cell('2x time', 'Params').value == 13.5e6


def test_numbers_stated_in_prose_are_checked_against_their_quote():
  spec = dict(
      paper='004',
      short_name='S',
      title='t',
      text_file='f',
      sections={'Sec. 3.3': 'Computational Efficiency'},
      tables=[],
      stated=[
          dict(
              key='speed',
              where='Sec. 3.3',
              printed='31.3',
              unit='it/s',
              quote='reach 31.3 iterations',
          )
      ],
  )
  assert paper_tables.Paper(spec, 'x.json').stated['speed'].value == 31.3
  spec['stated'][0]['printed'] = '31.4'
  with pytest.raises(ValueError, match='is not in its quote'):
    paper_tables.Paper(spec, 'x.json')
  spec['stated'][0].update(printed='31.3', where='Sec. 9')
  with pytest.raises(ValueError, match='which is no section'):
    paper_tables.Paper(spec, 'x.json')
  assert (
      paper_tables.load('004').stated['SCRIPT-small iterations/s'].value == 22.7
  )
