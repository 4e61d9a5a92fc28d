"""Tests of experiments/regeneration/fake_gcloud.py, by its command line."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from experiments.regeneration import fake_gcloud

_FAKE = fake_gcloud.__file__
_VM = ['compute', 'tpus', 'tpu-vm']
_WHERE = ['--zone=z1', '--project=p']


def _gcloud(root, *args, faults=None, check=True):
  env = dict(os.environ, FAKE_GCLOUD_ROOT=str(root))
  env.pop('FAKE_GCLOUD_FAULTS', None)
  if faults is not None:
    env['FAKE_GCLOUD_FAULTS'] = str(faults)
  result = subprocess.run(
      [sys.executable, _FAKE, *args],
      env=env,
      capture_output=True,
      text=True,
      timeout=60,
      check=False,
  )
  if check:
    assert result.returncode == 0, result.stderr
  return result


def _create(root, name='vm', accelerator='v3-8', faults=None):
  _gcloud(
      root,
      *_VM,
      'create',
      name,
      *_WHERE,
      f'--accelerator-type={accelerator}',
      '--version=tpu-ubuntu2204-base',
      faults=faults,
  )


def _state(root, name='vm'):
  return _gcloud(
      root, *_VM, 'describe', name, *_WHERE, '--format=value(state)'
  ).stdout.strip()


def _wait(condition, seconds=20):
  deadline = time.time() + seconds
  while time.time() < deadline:
    if condition():
      return True
    time.sleep(0.1)
  return False


def test_refuses_to_run_without_its_root():
  env = {k: v for k, v in os.environ.items() if k != 'FAKE_GCLOUD_ROOT'}
  result = subprocess.run(
      [sys.executable, _FAKE, *_VM, 'list', '--zone=z1'],
      env=env,
      capture_output=True,
      text=True,
      check=False,
  )
  assert result.returncode == 2
  assert 'FAKE_GCLOUD_ROOT is not set' in result.stderr


def test_create_describe_list_stop_start_delete(tmp_path):
  missing = _gcloud(tmp_path, *_VM, 'describe', 'vm', *_WHERE, check=False)
  assert missing.returncode == 1 and 'NOT_FOUND' in missing.stderr
  _create(tmp_path)
  described = _gcloud(
      tmp_path,
      *_VM,
      'describe',
      'vm',
      *_WHERE,
      '--format=value(state,acceleratorType)',
  )
  assert described.stdout == 'READY\tv3-8\n'
  again = _gcloud(
      tmp_path,
      *_VM,
      'create',
      'vm',
      *_WHERE,
      '--accelerator-type=v3-8',
      check=False,
  )
  assert again.returncode == 1 and 'ALREADY_EXISTS' in again.stderr
  listed = _gcloud(tmp_path, *_VM, 'list', *_WHERE, '--format=json')
  assert [vm['name'] for vm in json.loads(listed.stdout)] == ['vm']
  _gcloud(tmp_path, *_VM, 'stop', 'vm', *_WHERE)
  assert _state(tmp_path) == 'STOPPED'
  refused = _gcloud(
      tmp_path, *_VM, 'ssh', 'vm', *_WHERE, '--command=true', check=False
  )
  assert refused.returncode == 1 and 'not READY' in refused.stderr
  _gcloud(tmp_path, *_VM, 'start', 'vm', *_WHERE)
  assert _state(tmp_path) == 'READY'
  _gcloud(tmp_path, *_VM, 'delete', 'vm', *_WHERE, '--quiet')
  assert (
      _gcloud(tmp_path, *_VM, 'describe', 'vm', *_WHERE, check=False).returncode
      == 1
  )
  assert _gcloud(tmp_path, 'config', 'get-value', 'project').stdout == (
      'rehearsal-project\n'
  )


def test_scp_and_ssh_reach_every_worker_of_a_pod_in_its_own_home(tmp_path):
  _create(tmp_path, accelerator='v3-32')
  payload = tmp_path / 'payload.txt'
  payload.write_text('hello')
  _gcloud(
      tmp_path,
      *_VM,
      'scp',
      str(payload),
      'vm:payload.txt',
      *_WHERE,
      '--worker=all',
  )
  result = _gcloud(
      tmp_path,
      *_VM,
      'ssh',
      'vm',
      *_WHERE,
      '--worker=all',
      '--command=cat ~/payload.txt; echo " $PWD"',
  )
  homes = [line.split(' ')[1] for line in result.stdout.splitlines()]
  assert len(set(homes)) == 4
  assert all(line.startswith('hello ') for line in result.stdout.splitlines())
  assert all(home.endswith('/home') for home in homes)
  status = _gcloud(
      tmp_path,
      *_VM,
      'ssh',
      'vm',
      *_WHERE,
      '--worker=0',
      '--command=exit 7',
      check=False,
  )
  assert status.returncode == 7


def _start_sleeper(root):
  """A detached `sleep` on the VM, as run_tpu.sh starts its jobs."""
  _gcloud(
      root,
      *_VM,
      'ssh',
      'vm',
      *_WHERE,
      '--command=setsid nohup sh -c "sleep 60 & echo \\$! > ~/pid; wait \\$!; '
      'echo \\$? > ~/exit" > /dev/null 2>&1 < /dev/null &',
  )
  home = next(root.glob('p/z1/vm/worker-0/home'))
  assert _wait(lambda: (home / 'pid').is_file() and (home / 'pid').read_text())
  return home, int((home / 'pid').read_text())


def _alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  with open(f'/proc/{pid}/stat') as f:
    return f.read().split()[2] != 'Z'


def test_preempt_fault_stops_the_vms_jobs_once_its_file_appears(tmp_path):
  faults = tmp_path / 'faults.json'
  trigger = tmp_path / 'checkpoint.index'
  faults.write_text(
      json.dumps([dict(kind='preempt', vm='v*', when=str(trigger))])
  )
  root = tmp_path / 'root'
  _create(root, faults=faults)
  _, pid = _start_sleeper(root)
  time.sleep(0.5)
  assert _alive(pid) and _state(root) == 'READY'
  trigger.write_text('')
  assert _wait(lambda: not _alive(pid))
  assert _wait(lambda: _state(root) == 'PREEMPTED')
  # It fired once: a VM created again is not preempted again.
  _gcloud(root, *_VM, 'delete', 'vm', *_WHERE)
  _create(root, faults=faults)
  _, pid = _start_sleeper(root)
  time.sleep(1.0)
  assert _alive(pid) and _state(root) == 'READY'
  _gcloud(root, *_VM, 'delete', 'vm', *_WHERE)
  assert not _alive(pid)


def test_crash_fault_kills_the_job_with_sigabrt(tmp_path):
  faults = tmp_path / 'faults.json'
  trigger = tmp_path / 'go'
  faults.write_text(json.dumps([dict(kind='crash', when=str(trigger))]))
  root = tmp_path / 'root'
  _create(root, faults=faults)
  home, pid = _start_sleeper(root)
  trigger.write_text('')
  assert _wait(lambda: (home / 'exit').is_file())
  assert int((home / 'exit').read_text()) == 128 + signal.SIGABRT
  assert _state(root) == 'READY'


def test_ssh_drop_fault_fails_the_nth_call_without_running_it(tmp_path):
  faults = tmp_path / 'faults.json'
  faults.write_text(json.dumps([dict(kind='ssh_drop', vm='vm', call=2)]))
  _create(tmp_path / 'root', faults=faults)
  results = [
      _gcloud(
          tmp_path / 'root',
          *_VM,
          'ssh',
          'vm',
          *_WHERE,
          f'--command=echo {index} >> ~/ran',
          faults=faults,
          check=False,
      )
      for index in range(3)
  ]
  assert [r.returncode for r in results] == [0, 255, 0]
  assert 'Connection closed' in results[1].stderr
  ran = next((tmp_path / 'root').glob('p/z1/vm/worker-0/home/ran'))
  assert ran.read_text().split() == ['0', '2']


@pytest.mark.parametrize(
    'accelerator, hosts',
    [
        ('v3-8', 1),
        ('v3-32', 4),
        ('v4-64', 8),
        ('v5litepod-8', 1),
        ('v5litepod-16', 4),
    ],
)
def test_hosts_follow_cloud_tpus_rule(accelerator, hosts):
  assert fake_gcloud._hosts(accelerator) == hosts  # pylint: disable=protected-access


def test_a_fault_with_a_job_fires_on_the_vm_running_it_only(tmp_path):
  faults = tmp_path / 'faults.json'
  trigger = tmp_path / 'go'
  faults.write_text(
      json.dumps([dict(kind='preempt', job='sleep 60', when=str(trigger))])
  )
  root = tmp_path / 'root'
  _create(root, name='a-idle', faults=faults)
  _create(root, name='b-busy', faults=faults)
  _gcloud(
      root,
      *_VM,
      'ssh',
      'b-busy',
      *_WHERE,
      '--command=setsid nohup sleep 60 > /dev/null 2>&1 < /dev/null &',
  )
  trigger.write_text('')
  assert _wait(lambda: _state(root, 'b-busy') == 'PREEMPTED')
  assert _state(root, 'a-idle') == 'READY'
