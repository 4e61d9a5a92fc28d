"""The conversion cache: where releases are converted once, and its faults."""

import os
import subprocess

import pytest

from official_repro.common import cli
from official_repro.common import json_files
from official_repro.modeling.interchange import converted
from tests.modeling.interchange import hf_reference

pytest.importorskip('transformers')


@pytest.fixture(scope='module')
def release(tmp_path_factory):
  model, state = hf_reference.build('bert', 'mlm')
  return hf_reference.write_folder(
      str(tmp_path_factory.mktemp('hub') / 'bert'), model.config, state
  )


def test_a_cache_that_cannot_be_written_names_its_variable(
    release, tmp_path, monkeypatch
):
  blocker = tmp_path / 'a_file'
  blocker.write_text('')
  monkeypatch.setenv(converted.CACHE_ENVIRONMENT_VARIABLE, str(blocker / 'c'))
  with pytest.raises(cli.UserError) as error:
    converted.cached_export(converted.Source(release))
  message = str(error.value)
  assert str(blocker / 'c') in message
  assert f'set {converted.CACHE_ENVIRONMENT_VARIABLE} to a writable' in message
  assert release in message


def test_the_next_conversion_removes_a_killed_ones_temporary_folder(
    release, tmp_path, monkeypatch
):
  monkeypatch.setenv(converted.CACHE_ENVIRONMENT_VARIABLE, str(tmp_path))
  dead = subprocess.Popen(['true'])
  dead.wait()
  # What `cached_export` would convert into, as a SIGKILLed one leaves it.
  kind = converted.detect(release)
  directory = os.path.join(
      str(tmp_path),
      f'{kind}-{converted._digest(converted.Source(release), kind)}',
  )
  leftover = (
      f'{directory}{json_files.TEMPORARY_MARKER}{json_files.host_name()}-'
      f'{dead.pid}-0123456789ab'
  )
  os.makedirs(os.path.join(leftover, 'encoder'))
  assert converted.cached_export(converted.Source(release)) == directory
  assert sorted(os.listdir(tmp_path)) == [os.path.basename(directory)]
