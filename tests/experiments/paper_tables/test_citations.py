"""Gin citations: parsing, resolution against the papers, value equality."""

import os

import pytest

from experiments import paper_tables
from experiments.paper_tables import citations


@pytest.mark.parametrize(
    'text, kind, paper, target, row, column',
    [
        (
            '001 Table V: Learning Rate | ELECTRA_small',
            'cell',
            '001',
            'V',
            'Learning Rate',
            'ELECTRA_small',
        ),
        (
            '003 Table 5: Batch Size | Small++',
            'cell',
            '003',
            '5',
            'Batch Size',
            'Small++',
        ),
        ('003 Table 1', 'table', '003', '1', None, None),
        ('003 Fig. 4', 'figure', '003', '4', None, None),
        ('001 Sec. IV-B', 'section', '001', 'Sec. IV-B', None, None),
        ('003 App. B', 'section', '003', 'App. B', None, None),
        (
            'code: google-research/electra configure_pretraining.py',
            'code',
            None,
            'google-research/electra configure_pretraining.py',
            None,
            None,
        ),
        (
            'ours: a CPU-sized batch',
            'ours',
            None,
            'a CPU-sized batch',
            None,
            None,
        ),
    ],
)
def test_parse_citation(text, kind, paper, target, row, column):
  assert citations.parse_citation(text) == citations.Citation(
      text=text, kind=kind, paper=paper, target=target, row=row, column=column
  )


@pytest.mark.parametrize('text', ['CLS', '005 Sec. 1', 'Table V', ''])
def test_text_that_is_no_citation_is_refused(text):
  with pytest.raises(ValueError, match='is not a citation'):
    citations.parse_citation(text)


def _cell(printed, unit=None):
  value, plus_minus = paper_tables.parse_cell(printed)
  return paper_tables.Cell(
      printed=printed,
      value=value,
      plus_minus=plus_minus,
      unit=unit,
      paper='001',
      table='V',
      row='r',
      column='c',
  )


@pytest.mark.parametrize(
    'binding, value, printed, unit, expected',
    [
        ('optimization.learning_rate', 5e-4, '5e-4', None, True),
        ('optimization.learning_rate', 3e-4, '5e-4', None, False),
        ('experiment.train_steps', 125000, '125k', None, True),
        ('experiment.train_steps', 12500, '125k', None, False),
        ('pretrain_data.mask_rate', 0.15, '15', '%', True),
        ('pretrain_data.mask_rate', 0.15, '15', None, False),
        ('pretrain_data.mask_rate', 15, '15', '%', True),
        ('optimization.optimizer', 'lamb', 'LAMB', None, True),
        ('optimization.optimizer', 'adamw', 'LAMB', None, False),
        ('optimization.decay_power', 1.0, 'Linear', None, True),
        ('optimization.decay_power', 0.5, 'Linear', None, False),
        ('teams.generator_layer_fraction', 0.5, '1/2', None, True),
        ('encoder.num_layers', True, '1', None, False),
        ('encoder.num_layers', '12', '12', None, False),
    ],
)
def test_value_matches(binding, value, printed, unit, expected):
  assert citations.value_matches(binding, value, _cell(printed, unit)) is (
      expected
  )


def _write(tmp_path, text):
  path = os.path.join(tmp_path, 'cited.gin')
  with open(path, 'w') as f:
    f.write(text)
  return path


def _problems(tmp_path, text):
  bindings = citations.gin_bindings(_write(tmp_path, text))
  return [
      problem
      for binding in bindings
      for problem in citations.check_binding(binding)
  ]


def test_correct_citations_pass(tmp_path):
  assert (
      _problems(
          tmp_path,
          (
              '# A header comment: not a binding.\n'
              "include 'gin/sizes/small.gin'\n"
              'optimization.learning_rate = 5e-4  '
              '# [001 Table V: Learning Rate | ELECTRA_small] prose after it\n'
              'experiment.train_steps = 125000  '
              '# [001 Table V: Train Steps | ELECTRA_small]\n'
              'run_protocol.aggregation = "max"  '
              '# [001 Sec. IV-B] "max of 10 runs"\n'
              'electra.rtd_loss_weight = 50.0  '
              '# [code: google-research/electra configure_pretraining.py]\n'
              'finetuning.task = "rte"  # [code: official_repro/data/glue.py]\n'
              'pretrain_data.train_batch_size = 32  # [ours: fits 2 cores]\n'
          ),
      )
      == []
  )


@pytest.mark.parametrize(
    'line, message',
    [
        (
            'optimization.learning_rate = 3e-4  '
            '# [001 Table V: Learning Rate | ELECTRA_small]',
            "prints '5e-4'",
        ),
        (
            'optimization.learning_rate = 5e-4  '
            '# [001 Table V: Learning Rates | ELECTRA_small]',
            'no row',
        ),
        (
            'optimization.learning_rate = 5e-4  '
            '# [001 Table V: Learning Rate | ELECTRA_tiny]',
            'no column',
        ),
        (
            'optimization.learning_rate = 5e-4  '
            '# [001 Table IX: Learning Rate | ELECTRA_small]',
            'no Table IX',
        ),
        ('run_protocol.aggregation = "max"  # [001 Sec. IV-Z]', 'no section'),
        ('run_protocol.aggregation = "max"  # [003 Fig. 9]', 'no Figure 9'),
        (
            'electra.rtd_loss_weight = 50.0  '
            '# [code: google-research/electra no_such_file.py]',
            'is not listed',
        ),
        (
            'electra.rtd_loss_weight = 50.0  '
            '# [code: someone/else configure_pretraining.py]',
            'is not in',
        ),
        (
            'finetuning.task = "rte"  # [code: official_repro/no_such_file.py]',
            'no file',
        ),
        ('optimization.learning_rate = 5e-4  # 001 Table V', 'cites nothing'),
        ('optimization.learning_rate = 5e-4', 'cites nothing'),
        ('optimization.learning_rate = 5e-4  # see [CLS]', 'not a citation'),
    ],
)
def test_wrong_citations_are_named(tmp_path, line, message):
  problems = _problems(tmp_path, line + '\n')
  assert len(problems) == 1 and message in problems[0], problems
  assert 'cited.gin:1' in problems[0]


def test_every_cell_citation_on_a_line_is_checked(tmp_path):
  problems = _problems(
      tmp_path,
      (
          'optimization.warmup_steps = 10000  '
          '# [004 Table 4: Warmup steps | Small] '
          '[004 Table 4: Warmup steps | Small] [001 Table V: Learning Rate | '
          'ELECTRA_small]\n'
      ),
  )
  assert len(problems) == 1 and 'Learning Rate' in problems[0]


def test_hash_inside_a_string_value_is_not_a_comment(tmp_path):
  [binding] = citations.gin_bindings(
      _write(tmp_path, "a.b = 'x # y'  # [ours: z] prose\n")
  )
  assert (binding.value, binding.comment) == ('x # y', '[ours: z] prose')
  [binding] = citations.gin_bindings(_write(tmp_path, 'a/b.c = 3\n'))
  assert (binding.name, binding.value, binding.comment) == ('a/b.c', 3, '')


def test_unreadable_binding_is_named(tmp_path):
  with pytest.raises(ValueError, match='cited.gin:1: cannot read'):
    citations.gin_bindings(_write(tmp_path, '= 3\n'))


def test_a_bracket_of_several_columns_is_one_citation_per_column():
  assert citations.parse_bracket(
      '003 Table 5: Warmup Steps | Small, Small++,Large'
  ) == [
      citations.parse_citation(f'003 Table 5: Warmup Steps | {column}')
      for column in ('Small', 'Small++', 'Large')
  ]
  assert citations.parse_bracket('003 Table 1') == [
      citations.parse_citation('003 Table 1')
  ]


@pytest.mark.parametrize(
    'text, message',
    [
        ('003 Table 5: Warmup Steps | Small, , Base', 'empty column'),
        ('003 Table 5: Warmup Steps | Small,', 'empty column'),
    ],
)
def test_a_bracket_with_an_empty_column_is_refused(text, message):
  with pytest.raises(ValueError, match=message):
    citations.parse_bracket(text)


def test_parse_citation_refuses_several_columns():
  with pytest.raises(ValueError, match='several columns'):
    citations.parse_citation('003 Table 5: Warmup Steps | Small, Base')


def test_no_column_name_holds_the_column_separator():
  """The compact form's separator cannot clash with a column's name."""
  for paper_id in paper_tables.PAPERS:
    for table in paper_tables.load(paper_id).tables.values():
      for column in table.columns:
        assert citations.COLUMN_SEPARATOR not in column, (paper_id, column)


def test_every_column_of_a_compact_citation_is_checked(tmp_path):
  assert not _problems(
      tmp_path,
      'encoder.hidden_size = 256  # [003 Table 5: Hidden Dim. | Small, '
      'Small++]\n',
  )
  problems = _problems(
      tmp_path,
      'encoder.hidden_size = 256  '
      '# [003 Table 5: Hidden Dim. | Small, Base, Small++]\n',
  )
  assert len(problems) == 1, problems
  assert "[003 Table 5: Hidden Dim. | Base] prints '768'" in problems[0]


def test_an_unknown_column_of_a_compact_citation_is_named(tmp_path):
  problems = _problems(
      tmp_path,
      'encoder.hidden_size = 256  '
      '# [003 Table 5: Hidden Dim. | Small, Huge]\n',
  )
  assert len(problems) == 1, problems
  assert "no column 'Huge'" in problems[0]


def test_the_comment_lines_directly_above_a_binding_are_its_comment(
    tmp_path,
):
  bindings = citations.gin_bindings(
      _write(
          tmp_path,
          (
              '# A header: a blank line ends it.\n'
              '\n'
              '# [003 Table 5: Hidden Dim. | Small,\n'
              '#   Small++] the quoted\n'
              '# text\n'
              'encoder.hidden_size = 256  # [ours: z]\n'
              'encoder.num_layers = 12\n'
              '# Before an include: no binding follows it.\n'
              "include 'gin/sizes/small.gin'\n"
              'a.b = 1\n'
          ),
      )
  )
  assert [(b.line_number, b.comment, b.comment_lines) for b in bindings] == [
      (
          6,
          '[003 Table 5: Hidden Dim. | Small, Small++] the quoted text '
          '[ours: z]',
          3,
      ),
      (7, '', 0),
      (10, '', 0),
  ]
  assert [c.column for c in citations.citations_in(bindings[0].comment)] == [
      'Small',
      'Small++',
      None,
  ]


def test_a_wrong_cell_above_the_binding_is_named(tmp_path):
  problems = _problems(
      tmp_path,
      '# [003 Table 5: Hidden Dim. | Base]\nencoder.hidden_size = 256\n',
  )
  assert len(problems) == 1 and 'cited.gin:2' in problems[0], problems
