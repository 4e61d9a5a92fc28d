"""Gin files and bindings parsed with errors that name what the user wrote."""

import pytest

from official_repro.training import gin_utils

pytestmark = pytest.mark.usefixtures('clean_gin')


def test_an_unquoted_string_binding_is_named_with_its_quotes():
  with pytest.raises(gin_utils.GinConfigError) as caught:
    gin_utils.parse_config([], ['encoder.backbone = convbert'])
  assert str(caught.value) == (
      "--gin_param 'encoder.backbone = convbert': cannot read the value "
      "convbert; write a string in quotes: 'convbert'"
  )


def test_an_unquoted_string_in_a_gin_file_is_named_with_file_and_line(
    tmp_path,
):
  path = tmp_path / 'mine.gin'
  path.write_text('encoder.num_layers = 2\nencoder.backbone = convbert\n')
  with pytest.raises(gin_utils.GinConfigError) as caught:
    gin_utils.parse_config([str(path)], [])
  message = str(caught.value)
  assert message.startswith(f'--gin_file {path}: ')
  assert 'cannot read the value convbert; write a string in quotes' in message
  assert '<ast.' not in message


def test_a_quoted_number_is_named_as_a_string(tmp_path):
  with pytest.raises(gin_utils.GinConfigError, match='without quotes'):
    gin_utils.parse_config([], ["optimization.learning_rate = '1e-3'"])


def test_a_gin_file_that_is_not_there_is_named():
  with pytest.raises(gin_utils.GinConfigError) as caught:
    gin_utils.parse_config(['/no/such.gin'], [])
  assert str(caught.value) == '--gin_file /no/such.gin: no such file.'


def test_an_install_without_gin_files_says_to_run_from_a_checkout(
    tmp_path, monkeypatch
):
  monkeypatch.setattr(gin_utils, 'REPO_ROOT', str(tmp_path))
  missing = str(tmp_path / 'gin' / 'quickstart.gin')
  with pytest.raises(gin_utils.GinConfigError) as caught:
    gin_utils.parse_config([missing], [])
  message = str(caught.value)
  assert message.startswith(f'--gin_file {missing}: no such file; ')
  assert 'run from a checkout installed with `pip install -r' in message
