"""Output folders that appear whole or not at all.

A folder is written as `<folder>.tmp-<host>-<pid>-<random>` and renamed into
place at the end, so a failure or Ctrl-C leaves no final name. The next
writer removes what a gone process of this host left (other hosts' may
still be running).
"""

import contextlib
import os
from typing import Iterator, List

from absl import logging
import tensorflow as tf

from official_repro.common import json_files


def process_alive(pid: int) -> bool:
  """Whether process `pid` of this host exists."""
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def _leftovers(folder: str) -> List[str]:
  """Temporary folders of `folder` whose writer is a gone process here."""
  prefix = folder.rstrip('/') + json_files.TEMPORARY_MARKER
  gone = []
  for path in sorted(tf.io.gfile.glob(prefix + '*')):
    host_pid = path[len(prefix) :].rsplit('-', 1)[0]
    host, _, pid = host_pid.rpartition('-')
    if (
        host == json_files.host_name()
        and pid.isdigit()
        and not process_alive(int(pid))
    ):
      gone.append(path)
  return gone


@contextlib.contextmanager
def whole_folder(folder: str) -> Iterator[str]:
  """Yields a new temporary folder that becomes `folder` (absent or empty)."""
  for path in _leftovers(folder):
    logging.warning(
        '%s: removing the temporary folder of an earlier run that was '
        'killed before it finished.',
        path,
    )
    tf.io.gfile.rmtree(path)
  temporary = json_files.temporary_path(folder.rstrip('/'))
  tf.io.gfile.makedirs(temporary)
  try:
    yield temporary
    if tf.io.gfile.exists(folder):
      tf.io.gfile.rmtree(folder)
    tf.io.gfile.rename(temporary, folder)
  except BaseException:
    if tf.io.gfile.exists(temporary):
      tf.io.gfile.rmtree(temporary)
    raise
