"""Tests of the one subprocess runner of the experiments."""

import re
import subprocess
import time

import pytest

from experiments import commands

_MODULE = 'tests.plugins.two_streams'


def test_output_interleaves_both_streams_and_is_logged(tmp_path):
  log = tmp_path / 'job.log'
  output = commands.run_module(_MODULE, ['0', 'a', 'b'], log_path=str(log))
  assert output == 'a\nb\nerror line\n'
  assert log.read_text() == output


def test_stdout_only_keeps_stderr_out_of_the_result(tmp_path):
  log = tmp_path / 'job.log'
  output = commands.run_module(
      _MODULE, ['0', '{"x": 1}'], log_path=str(log), stdout_only=True
  )
  assert output == '{"x": 1}\n'
  assert log.read_text() == '{"x": 1}\nerror line\n'


def test_matching_lines_are_shown_as_they_come(capsys):
  commands.run_module(
      _MODULE, ['0', 'train | step: 1', 'other'], show=re.compile('train')
  )
  shown = capsys.readouterr().out.splitlines()
  assert shown[1:] == ['    train | step: 1']
  assert shown[0].startswith(f'  $ -m {_MODULE} 0')


def test_a_failure_names_the_module_and_its_log(tmp_path):
  log = tmp_path / 'job.log'
  with pytest.raises(commands.CommandError) as raised:
    commands.run_module(_MODULE, ['3', 'partial'], log_path=str(log))
  assert str(raised.value) == f'{_MODULE} failed (exit 3); see {log}'
  assert log.read_text() == 'partial\nerror line\n'


def test_a_failure_without_a_log_carries_its_output():
  with pytest.raises(commands.CommandError, match='partial\nerror line'):
    commands.run_module(_MODULE, ['1', 'partial'])


def test_stop_terminates_a_running_job():
  process = subprocess.Popen(['sleep', '60'])
  started = time.monotonic()
  commands.stop(process)
  assert process.returncode == -15  # SIGTERM, not the kill
  assert time.monotonic() - started < commands.STOP_GRACE_SECONDS
