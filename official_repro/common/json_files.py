"""JSON files that a killed process never leaves half-written."""

import json
from typing import Any

import tensorflow as tf


def write_json(path: str, content: Any, sort_keys: bool = True) -> None:
  """Writes `content` to `path` (any `tf.io.gfile` path) atomically.

  The JSON goes to `path + '.tmp'`, which is then renamed over `path`, so a
  reader (or a resumed run) sees the old file or the new one, never a part.

  Args:
    path: the destination file.
    content: a JSON-serialisable value.
    sort_keys: sort dictionary keys (stable diffs between runs).
  """
  temporary = path + '.tmp'
  with tf.io.gfile.GFile(temporary, 'w') as f:
    json.dump(content, f, indent=2, sort_keys=sort_keys)
  tf.io.gfile.rename(temporary, path, overwrite=True)
