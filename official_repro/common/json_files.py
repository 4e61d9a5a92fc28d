"""JSON and text files that a killed process never leaves half-written."""

import json
import os
import socket
from typing import Any, Callable, Optional
import uuid

import tensorflow as tf

from official_repro.common import cli

# Temporary files are `<final name><TEMPORARY_MARKER><host>-<pid>-<random>`.
TEMPORARY_MARKER = '.tmp-'


def temporary_path(path: str) -> str:
  """A temporary name for writing `path`, unique to this writer.

  It lies in the same directory as `path` (so renaming it into place does not
  cross filesystems) and holds the host name, the process id and a random
  suffix, so that workers sharing a directory (a multi-worker `model_dir` on
  gs://) or threads of one process never write into the same temporary file.

  Args:
    path: the final path.

  Returns:
    `path + '.tmp-<host>-<pid>-<random hex>'`.
  """
  return (
      f'{path}{TEMPORARY_MARKER}{host_name()}-{os.getpid()}-'
      f'{uuid.uuid4().hex[:12]}'
  )


def host_name() -> str:
  """This host's name as temporary names hold it (`[A-Za-z0-9_-]`)."""
  return (
      ''.join(
          c if c.isalnum() or c in '-_' else '_' for c in socket.gethostname()
      )
      or 'host'
  )


def check_writable(path: str, flag: str) -> None:
  """Makes `path`'s folder and checks that a file can be written in it.

  For outputs written after long work (scores, reports): called first, so
  that a folder that is missing or read-only is one line before the work,
  not a lost result after it.

  Args:
    path: the output file (any `tf.io.gfile` path).
    flag: the flag that named it, for the message.

  Raises:
    UserError: naming the flag, the path and the reason.
  """
  directory = os.path.dirname(path) or '.'
  probe = temporary_path(path)
  try:
    tf.io.gfile.makedirs(directory)
    with tf.io.gfile.GFile(probe, 'w') as f:
      f.write('')
    tf.io.gfile.remove(probe)
  except (tf.errors.OpError, OSError) as error:
    reason = getattr(error, 'message', None) or str(error)
    raise cli.UserError(
        f'{flag} {path} cannot be written ({reason.splitlines()[0][:200]}); '
        'give a writable location.'
    ) from error


def write_text(path: str, text: str) -> None:
  """Writes `text` to `path` (any `tf.io.gfile` path) atomically.

  The text goes to a temporary file of its own (`temporary_path`), which is
  then renamed over `path`, so a reader (or a resumed run) sees the old file
  or a new one, never a part or a mix of two writers' output. A temporary
  file is removed if writing it fails; one left by a killed process is
  ignored by readers of `path`.

  Args:
    path: the destination file.
    text: the whole content.
  """
  _write(path, text, 'w')


def write_bytes(path: str, data: bytes) -> None:
  """Writes `data` to `path` atomically, as `write_text` writes text."""
  _write(path, data, 'wb')


def _write(path: str, content, mode: str) -> None:
  temporary = temporary_path(path)
  try:
    with tf.io.gfile.GFile(temporary, mode) as f:
      f.write(content)
    tf.io.gfile.rename(temporary, path, overwrite=True)
  except BaseException:
    if tf.io.gfile.exists(temporary):
      tf.io.gfile.remove(temporary)
    raise


def write_json(
    path: str,
    content: Any,
    sort_keys: bool = True,
    default: Optional[Callable[[Any], Any]] = None,
) -> None:
  """Writes `content` to `path` as JSON, atomically (`write_text`).

  Args:
    path: the destination file (any `tf.io.gfile` path).
    content: a JSON-serialisable value.
    sort_keys: sort dictionary keys (stable diffs between runs).
    default: converts values `json` cannot serialise (e.g. `float` for
      NumPy scalars).
  """
  write_text(
      path,
      json.dumps(content, indent=2, sort_keys=sort_keys, default=default),
  )
