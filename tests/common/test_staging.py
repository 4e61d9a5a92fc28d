"""Folders written whole: renamed into place, or absent after a failure."""

import os
import subprocess

import pytest

from official_repro.common import json_files
from official_repro.common import staging


def _siblings(folder):
  return sorted(os.listdir(os.path.dirname(folder)))


def test_a_completed_block_renames_its_folder_into_place(tmp_path):
  folder = str(tmp_path / 'out')
  with staging.whole_folder(folder) as temporary:
    assert temporary != folder
    with open(os.path.join(temporary, 'weights'), 'w') as f:
      f.write('w')
    assert not os.path.exists(folder)  # nothing under the final name yet
  assert os.listdir(folder) == ['weights']
  assert _siblings(folder) == ['out']


@pytest.mark.parametrize('error', [OSError, KeyboardInterrupt])
def test_a_failed_block_leaves_neither_folder_nor_temporary(tmp_path, error):
  folder = str(tmp_path / 'out')
  with pytest.raises(error):
    with staging.whole_folder(folder) as temporary:
      with open(os.path.join(temporary, 'weights'), 'w') as f:
        f.write('half')
      raise error('No space left on device')
  assert _siblings(folder) == []


def _dead_pid():
  process = subprocess.Popen(['true'])
  process.wait()
  return process.pid


def test_a_killed_writers_temporary_is_removed_and_others_are_kept(tmp_path):
  folder = str(tmp_path / 'out')
  host = json_files.host_name()
  killed = f'{folder}.tmp-{host}-{_dead_pid()}-0123456789ab'
  running = f'{folder}.tmp-{host}-{os.getpid()}-0123456789ab'
  elsewhere = f'{folder}.tmp-otherhost-{_dead_pid()}-0123456789ab'
  for path in (killed, running, elsewhere):
    os.makedirs(path)
  with staging.whole_folder(folder):
    pass
  assert not os.path.exists(killed)
  assert os.path.isdir(running) and os.path.isdir(elsewhere)
  assert os.path.isdir(folder)
