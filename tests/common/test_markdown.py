"""Tests of the Markdown table renderer."""

import pytest

from official_repro.common import markdown


def test_header_rule_and_rows():
  assert markdown.table(['a', 'b'], [[1, 'x'], [2.5, '']]) == [
      '| a | b |',
      '|---|---|',
      '| 1 | x |',
      '| 2.5 |  |',
  ]


def test_no_rows_is_a_header_and_rule():
  assert markdown.table(['only'], []) == ['| only |', '|---|']


def test_a_short_row_is_refused():
  with pytest.raises(ValueError, match='row 2 has 1 cells; the header has 2'):
    markdown.table(['a', 'b'], [[1, 2], [3]])
