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
# `read_json`'s default: the file must exist.
_REQUIRED = object()


def temporary_path(path: str) -> str:
  """`path + '.tmp-<host>-<pid>-<random hex>'`: beside it, unique per writer."""
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
  """Makes `path`'s folder and checks, before the work, that it is writable."""
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
  """Writes `text` to `path` atomically: a temporary file renamed over it."""
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


def read_json(path: str, default: Any = _REQUIRED) -> Any:
  """The JSON value in `path`; `default` if given and `path` does not exist.

  Raises:
    cli.UserError: `path` is missing (and no `default`) or not valid JSON.
  """
  if default is not _REQUIRED and not tf.io.gfile.exists(path):
    return default
  try:
    with tf.io.gfile.GFile(path) as f:
      return json.load(f)
  except tf.errors.NotFoundError as error:
    raise cli.UserError(f'{path} does not exist.') from error
  except (json.JSONDecodeError, UnicodeDecodeError) as error:
    raise cli.UserError(f'{path}: not valid JSON ({error}).') from error


def write_json(
    path: str,
    content: Any,
    sort_keys: bool = True,
    default: Optional[Callable[[Any], Any]] = None,
) -> None:
  """Writes `content` to `path` as JSON, atomically (`write_text`)."""
  text = json.dumps(content, indent=2, sort_keys=sort_keys, default=default)
  write_text(path, text)
