"""`read_lines`: line endings, BOM, missing files and bad UTF-8."""

import pytest

from official_repro.common import cli
from official_repro.data import text_files


def _write(tmp_path, data: bytes):
  path = tmp_path / 'input.txt'
  path.write_bytes(data)
  return str(path)


def test_lf_crlf_and_bom_read_as_python_splits_them(tmp_path):
  data = 'première\r\nzweite\nthird\r\n'.encode('utf-8')
  lines = text_files.read_lines(
      _write(tmp_path, b'\xef\xbb\xbf' + data), 'corpus'
  )
  assert lines == ['première', 'zweite', 'third', '']
  assert lines == data.decode('utf-8').replace('\r\n', '\n').split('\n')


def test_a_missing_file_is_named_with_its_description(tmp_path):
  with pytest.raises(FileNotFoundError, match='corpus not found: .*nope'):
    text_files.read_lines(str(tmp_path / 'nope'), 'corpus')


def test_bad_utf8_names_the_line(tmp_path):
  path = _write(tmp_path, b'ok\nalso ok\nbad \xff byte\n')
  with pytest.raises(cli.UserError, match=r'input.txt line 3: not valid UTF-8'):
    text_files.read_lines(path, 'corpus')
