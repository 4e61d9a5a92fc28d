"""Atomic JSON and text writes."""

import json
import os
import threading

import numpy as np
import pytest
import tensorflow as tf

from official_repro.common import cli
from official_repro.common import json_files


def test_write_replaces_the_file_and_leaves_no_temporary(tmp_path):
  path = tmp_path / 'results.json'
  path.write_text('{"old": true}')
  json_files.write_json(str(path), {'b': 1, 'a': [1, 2]})
  assert json.loads(path.read_text()) == {'b': 1, 'a': [1, 2]}
  assert [p.name for p in tmp_path.iterdir()] == ['results.json']


def test_key_order(tmp_path):
  path = tmp_path / 'x.json'
  json_files.write_json(str(path), {'b': 1, 'a': 2})
  assert list(json.loads(path.read_text())) == ['a', 'b']
  json_files.write_json(str(path), {'b': 1, 'a': 2}, sort_keys=False)
  assert list(json.loads(path.read_text())) == ['b', 'a']


def test_default_converts_what_json_cannot(tmp_path):
  path = tmp_path / 'x.json'
  old = '{"old": true}'
  path.write_text(old)
  with pytest.raises(TypeError):
    json_files.write_json(str(path), {'auc': np.float32(0.5)})
  assert path.read_text() == old
  json_files.write_json(str(path), {'auc': np.float32(0.5)}, default=float)
  assert json.loads(path.read_text()) == {'auc': 0.5}


def test_temporary_names_are_unique_and_beside_the_file(tmp_path):
  path = str(tmp_path / 'results.json')
  names = {json_files.temporary_path(path) for _ in range(100)}
  assert len(names) == 100
  for name in names:
    assert os.path.dirname(name) == str(tmp_path)
    assert name.startswith(path + json_files.TEMPORARY_MARKER)
    assert f'-{os.getpid()}-' in name


def test_failed_write_removes_its_temporary(ram_dir):
  path = os.path.join(ram_dir, 'x.json')
  with pytest.raises(TypeError):
    json_files.write_json(path, {'a': object()})
  assert tf.io.gfile.listdir(ram_dir) == []


def test_write_text_replaces_the_file_and_leaves_no_temporary(ram_dir):
  path = os.path.join(ram_dir, 'report.md')
  json_files.write_text(path, 'old\n')
  json_files.write_text(path, '# Report\n\n| a |\n')
  with tf.io.gfile.GFile(path) as f:
    assert f.read() == '# Report\n\n| a |\n'
  assert tf.io.gfile.listdir(ram_dir) == ['report.md']


def test_failed_text_write_keeps_the_old_file(ram_dir):
  path = os.path.join(ram_dir, 'report.md')
  json_files.write_text(path, 'old\n')
  with pytest.raises(TypeError):
    json_files.write_text(path, object())
  with tf.io.gfile.GFile(path) as f:
    assert f.read() == 'old\n'
  assert tf.io.gfile.listdir(ram_dir) == ['report.md']


@pytest.mark.parametrize('on_ram', [False, True])
def test_concurrent_writers_never_mix(tmp_path, ram_dir, on_ram):
  """Concurrent writes and reads of one JSON file.

  Two threads rewrite one file while a third reads it: every read is one
  writer's complete content, and no temporary file is left.
  """
  directory = ram_dir if on_ram else str(tmp_path)
  path = os.path.join(directory, 'shared.json')
  # Large enough that a shared temporary file or a non-atomic write would be
  # seen part-written or interleaved.
  contents = [{'writer': w, 'values': [w] * 20000} for w in range(2)]
  json_files.write_json(path, contents[0])
  errors, reads = [], []
  stop = threading.Event()

  def write(writer):
    try:
      for _ in range(25):
        json_files.write_json(path, contents[writer])
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  def read():
    while not stop.is_set():
      with tf.io.gfile.GFile(path) as f:
        text = f.read()
      try:
        reads.append(json.loads(text))
      except json.JSONDecodeError as e:
        errors.append(e)

  reader = threading.Thread(target=read)
  reader.start()
  writers = [threading.Thread(target=write, args=(w,)) for w in range(2)]
  for thread in writers:
    thread.start()
  for thread in writers:
    thread.join()
  stop.set()
  reader.join()
  assert not errors
  assert reads and all(content in contents for content in reads)
  with tf.io.gfile.GFile(path) as f:
    assert json.load(f) in contents
  assert tf.io.gfile.listdir(directory) == ['shared.json']


def test_check_writable_makes_the_folder_and_leaves_no_file(tmp_path):
  from official_repro.common import cli  # pylint: disable=g-import-not-at-top

  target = tmp_path / 'new' / 'deeper' / 'scores.tsv'
  json_files.check_writable(str(target), '--output')
  assert (tmp_path / 'new' / 'deeper').is_dir()
  assert list((tmp_path / 'new' / 'deeper').iterdir()) == []
  (tmp_path / 'file').write_text('x')
  with pytest.raises(cli.UserError, match='--output .*file/scores.tsv cannot'):
    json_files.check_writable(str(tmp_path / 'file' / 'scores.tsv'), '--output')


def test_read_json_returns_what_write_json_wrote(tmp_path):
  path = str(tmp_path / 'a.json')
  json_files.write_json(path, {'b': [1, 2.5, None]})
  assert json_files.read_json(path) == {'b': [1, 2.5, None]}


def test_read_json_default_only_for_a_missing_file(tmp_path):
  path = str(tmp_path / 'missing.json')
  assert json_files.read_json(path, default={}) == {}
  with pytest.raises(cli.UserError, match='missing.json does not exist'):
    json_files.read_json(path)


def test_read_json_names_the_file_that_is_not_json(tmp_path):
  path = tmp_path / 'bad.json'
  path.write_text('{"a": ')
  with pytest.raises(cli.UserError, match='bad.json: not valid JSON'):
    json_files.read_json(str(path))
  with pytest.raises(cli.UserError, match='bad.json: not valid JSON'):
    json_files.read_json(str(path), default=None)
