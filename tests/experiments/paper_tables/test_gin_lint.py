"""The gin lint: lines within the width, each citation written once."""

import os

import pytest

from experiments.paper_tables import gin_lint
from official_repro.training import gin_utils

WIDTH_HINT = " (a binding's comment may go in the # lines directly above it)"
CLEAN = (
    "# A header, then a blank line: not a binding's comment.\n"
    '\n'
    'encoder.hidden_size = 256  # [003 Table 5: Hidden Dim. | Small, '
    'Small++]\n'
    '# [003 Table 5: Warmup Steps | Small, Small++, Base, Base++, Large]\n'
    '# [003 App. B] "the quoted text, wrapped at the width"\n'
    'optimization.warmup_steps = 10000  # [ours: z]\n'
)


def _write(tmp_path, text, name='lint.gin'):
  path = os.path.join(tmp_path, name)
  with open(path, 'w') as f:
    f.write(text)
  return path


def test_a_clean_file_passes(tmp_path):
  assert not gin_lint.lint_file(_write(tmp_path, CLEAN))


@pytest.mark.parametrize(
    'text, line, reason',
    [
        (
            'a.b = 1  # [ours: ' + 'x' * 100 + ']\n',
            1,
            '119 columns, over 100' + WIDTH_HINT,
        ),
        (
            '# ' + 'x' * 99 + '\n\na.b = 1  # [ours: y]\n',
            1,
            '101 columns, over 100' + WIDTH_HINT,
        ),
        (
            'a.b = 1  # [ours: y] [003 Table 1] [ours: y]\n',
            1,
            'a.b: [ours: y] is cited twice',
        ),
        (
            'a.b = 1\n# [003 Table 5: Dropout | Small, Small]\na.c = 2\n',
            3,
            'a.c: [003 Table 5: Dropout | Small] is cited twice',
        ),
        (
            'a.a = 1  # [ours: y]\n'
            '# [003 Table 5: Warmup Steps | Base, Large]\n'
            'a.b = 1  # [003 Table 5: Warmup Steps | Small]\n',
            3,
            'a.b: one row in 2 brackets; write it once, '
            '[003 Table 5: Warmup Steps | Base, Large, Small]',
        ),
        (
            '# A header citing [003 Sec. 4.1] and [003 Sec. 4.1] again.\n'
            '\n'
            'a.b = 1  # [ours: y]\n',
            1,
            '[003 Sec. 4.1] is cited twice',
        ),
    ],
)
def test_each_problem_is_one_line_naming_file_and_line(
    tmp_path, text, line, reason
):
  path = _write(tmp_path, text)
  assert gin_lint.lint_file(path) == [f'{path}:{line}: {reason}']


def test_a_cell_cited_above_and_again_at_the_line_end_is_named(tmp_path):
  path = _write(
      tmp_path,
      '# [003 Table 5: Warmup Steps | Small, Base]\n'
      'optimization.warmup_steps = 10000  '
      '# [003 Table 5: Warmup Steps | Base]\n',
  )
  assert gin_lint.lint_file(path) == [
      f'{path}:2: optimization.warmup_steps: [003 Table 5: Warmup Steps | '
      'Base] is cited twice',
      f'{path}:2: optimization.warmup_steps: one row in 2 brackets; write it '
      'once, [003 Table 5: Warmup Steps | Small, Base]',
  ]


def test_a_long_line_and_a_repeat_are_two_problems(tmp_path):
  path = _write(tmp_path, 'a.b = 1  # [ours: y] [ours: y]' + ' ' * 80 + '\n')
  assert len(gin_lint.lint_file(path)) == 2


def test_main_prints_the_problems_and_exits_with_1(tmp_path, capsys):
  _write(tmp_path, CLEAN, name='clean.gin')
  dirty = _write(tmp_path, 'a.b = 1  # [ours: y] [ours: y]\n', name='x.gin')
  _write(tmp_path, 'a.b = 1  # [ours: y] [ours: y]\n', name='not_gin.txt')
  with pytest.raises(SystemExit) as stopped:
    gin_lint.main(['gin_lint', str(tmp_path)])
  assert stopped.value.code == 1
  assert capsys.readouterr().out == (
      f'{dirty}:1: a.b: [ours: y] is cited twice\n'
  )


def test_main_passes_clean_files(tmp_path, capsys):
  path = _write(tmp_path, CLEAN)
  gin_lint.main(['gin_lint', path])
  assert capsys.readouterr().out == ''


def test_a_missing_path_is_named(tmp_path):
  with pytest.raises(FileNotFoundError, match='nothing.gin'):
    gin_lint.main(['gin_lint', os.path.join(tmp_path, 'nothing.gin')])


def test_the_repository_gin_files_pass():
  directory = os.path.join(gin_utils.REPO_ROOT, 'gin')
  problems = [
      problem
      for path in gin_lint.gin_files([directory])
      for problem in gin_lint.lint_file(path)
  ]
  assert not problems, '\n'.join(problems)
