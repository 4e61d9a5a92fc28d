"""Atomic JSON writes."""

import json

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
