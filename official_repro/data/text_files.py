"""Reading UTF-8 text files line by line, through `tf.io.gfile`."""

from typing import List

import tensorflow as tf

from official_repro.common import cli


def read_lines(path: str, description: str) -> List[str]:
  """The lines of a UTF-8 text file (LF or CRLF, BOM dropped), unterminated.

  A final newline gives a last empty line; `description` names the file when
  missing. UserError names a line that is not UTF-8.
  """
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f'{description} not found: {path}')
  with tf.io.gfile.GFile(path, 'rb') as f:
    data = f.read()
  if data.startswith(b'\xef\xbb\xbf'):
    data = data[3:]
  lines = []
  for line_number, raw_line in enumerate(data.split(b'\n'), start=1):
    try:
      lines.append(raw_line.decode('utf-8').rstrip('\r'))
    except UnicodeDecodeError as e:
      raise cli.UserError(
          f'{path} line {line_number}: not valid UTF-8 '
          f'({e.reason} at byte {e.start}).'
      ) from e
  return lines
