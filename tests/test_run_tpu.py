"""Tests for run_tpu.sh: its --dry_run output, input checks and quoting.

No TensorFlow and no Cloud: the script runs with a PATH that holds no gcloud
(an empty folder, so only bash builtins work), and one test drives the real,
non-dry-run path against a fake gcloud that runs the remote commands in a
scratch home folder.
"""

import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = REPO / 'run_tpu.sh'
BASH = shutil.which('bash')
GIN_FILE = 'gin/quickstart.gin'
BINDING = "pretrain_data.input_path='gs://my-bucket/pre training/records'"
BINDING_2 = 'experiment.train_steps = 10'

REQUIRED = (
    '--tpu_name=my-tpu',
    '--zone=europe-west4-a',
    f'--gin_file={GIN_FILE}',
    '--model_dir=gs://my-bucket/runs/q1',
)


def _run(args, tmp_path, path=None, cwd=REPO, extra_env=None):
  """Runs run_tpu.sh with an empty PATH (no gcloud, no python3).

  The local gin check needs python3, so it is skipped here; its behaviour is
  tested through the real command line in tests/test_cli_errors.py.
  """
  args = [*args, '--skip_local_check']
  empty_bin = tmp_path / 'empty_bin'
  empty_bin.mkdir(exist_ok=True)
  home = tmp_path / 'home'
  home.mkdir(exist_ok=True)
  env = {
      'PATH': path if path is not None else str(empty_bin),
      'HOME': str(home),
      'TMPDIR': str(tmp_path),
  }
  env.update(extra_env or {})
  return subprocess.run(
      [BASH, str(SCRIPT), *args],
      cwd=cwd,
      env=env,
      capture_output=True,
      text=True,
      timeout=120,
      check=False,
  )


def _commands(stdout):
  """The printed commands ('+ ' lines), each split into its words."""
  return [
      shlex.split(line[2:])
      for line in stdout.splitlines()
      if line.startswith('+ ')
  ]


def _gcloud(commands, verb, group=('compute', 'tpus', 'tpu-vm')):
  prefix = ['gcloud', *group, verb]
  return [c for c in commands if c[: len(prefix)] == prefix]


def _flag(command, name):
  values = [w.split('=', 1)[1] for w in command if w.startswith(name + '=')]
  assert len(values) == 1, (name, command)
  return values[0]


def _runner_words(launch_command):
  """The words of the `setsid nohup sh -c SCRIPT` script in the launch."""
  remote = shlex.split(_flag(launch_command, '--command'))
  start = remote.index('setsid')
  assert remote[start : start + 3] == ['setsid', 'nohup', 'sh']
  assert remote[start + 3] == '-c'
  return shlex.split(remote[start + 4])


def _train_words(launch_command):
  """The words of `python3 -m official_repro.train ...` in the launch."""
  runner = _runner_words(launch_command)
  start = runner.index('official_repro.train')
  end = runner.index('&', start)
  assert runner[start - 2 : start] == ['python3', '-m']
  return runner[start + 1 : end]


@pytest.fixture(name='dry_run')
def fixture_dry_run(tmp_path):
  result = _run(
      [
          '--dry_run',
          *REQUIRED,
          '--accelerator_type=v2-8',
          '--project=my-project',
          f'--gin_param={BINDING}',
          f'--gin_param={BINDING_2}',
          '--mode=train',
      ],
      tmp_path,
  )
  assert result.returncode == 0, result.stderr
  return result


def test_bash_syntax():
  subprocess.run([BASH, '-n', str(SCRIPT)], check=True)


def test_dry_run_prints_create_copy_install_launch(dry_run):
  commands = _commands(dry_run.stdout)
  location = ['--zone=europe-west4-a', '--project=my-project']

  (describe,) = _gcloud(commands, 'describe')
  (create,) = _gcloud(commands, 'create')
  assert create[5] == 'my-tpu'
  assert set(location) <= set(create)
  assert '--accelerator-type=v2-8' in create
  assert '--version=tpu-ubuntu2204-base' in create
  assert describe[5] == 'my-tpu' and set(location) <= set(describe)

  (scp,) = _gcloud(commands, 'scp')
  assert scp[5].endswith('.tar.gz')
  assert scp[6].startswith('my-tpu:')
  assert set(location + ['--worker=all']) <= set(scp)

  sync, install, launch = _gcloud(commands, 'ssh')
  for ssh in (sync, install, launch):
    assert ssh[5] == 'my-tpu' and set(location) <= set(ssh)
  assert '--worker=all' in sync and '--worker=all' in install
  assert 'tar -xzf' in _flag(sync, '--command')
  install_command = _flag(install, '--command')
  assert 'python3 -m pip install -r requirements.txt' in install_command
  assert 'tensorflow-tpu==2.20.*' in install_command
  assert 'libtpu-tf-releases/index.html' in install_command
  assert '--worker=0' in launch
  assert 'nohup' in _flag(launch, '--command')

  # Order: look up / create, copy, install, launch.
  order = [
      commands.index(c) for c in (describe, create, scp, sync, install, launch)
  ]
  assert order == sorted(order)
  assert 'tail -n 200 -f' in dry_run.stdout  # how to follow the log


def test_dry_run_launch_command_keeps_quoted_bindings(dry_run):
  launch = _gcloud(_commands(dry_run.stdout), 'ssh')[-1]
  words = _train_words(launch)
  assert words == [
      f'--gin_file={GIN_FILE}',
      f'--gin_param={BINDING}',
      f'--gin_param={BINDING_2}',
      '--model_dir=gs://my-bucket/runs/q1',
      '--mode=train',
      '--mixed_precision=bfloat16',
      '--strategy=tpu',
      '--tpu=local',
  ]


def test_dry_run_defaults_and_relative_gin_path(tmp_path):
  result = _run(
      [
          '--dry_run',
          '--tpu_name=t1',
          '--zone=us-central1-a',
          '--gin_file=quickstart.gin',
          '--model_dir=gs://b/m',
          '--spot',
          '--env=TPU_STDERR_LOG_LEVEL=0',
      ],
      tmp_path,
      cwd=REPO / 'gin',
  )
  assert result.returncode == 0, result.stderr
  commands = _commands(result.stdout)
  create = _gcloud(commands, 'create')[0]  # the supervisor's recreation too
  assert '--accelerator-type=v3-8' in create and '--spot' in create
  assert not any(w.startswith('--project') for c in commands for w in c)
  launch = _gcloud(commands, 'ssh')[-1]
  runner = _runner_words(launch)
  assert 'env' in runner and 'TPU_STDERR_LOG_LEVEL=0' in runner
  words = _train_words(launch)
  assert f'--gin_file={GIN_FILE}' in words
  assert '--mode=train_and_eval' in words
  # Model Garden's TPU configs train in bfloat16.
  assert '--mixed_precision=bfloat16' in words


def test_help(tmp_path):
  result = _run(['--help'], tmp_path)
  assert result.returncode == 0
  assert 'Usage' in result.stdout
  for flag in (
      '--tpu_name',
      '--zone',
      '--gin_file',
      '--gin_param',
      '--model_dir',
      '--dry_run',
      '--delete',
      '--runtime_version',
  ):
    assert flag in result.stdout


@pytest.mark.parametrize('missing', REQUIRED)
def test_missing_required_flag_is_named(tmp_path, missing):
  args = [a for a in REQUIRED if a != missing]
  result = _run(['--dry_run', *args], tmp_path)
  flag = missing.split('=')[0]
  assert result.returncode != 0
  assert flag in result.stderr
  assert not _commands(result.stdout)


def test_unknown_flag_is_named(tmp_path):
  result = _run(['--dry_run', *REQUIRED, '--bogus_flag=1'], tmp_path)
  assert result.returncode != 0
  assert '--bogus_flag' in result.stderr


def test_flag_without_value_is_named(tmp_path):
  result = _run(['--dry_run', *REQUIRED, '--zone'], tmp_path)
  assert result.returncode != 0
  assert '--zone' in result.stderr


@pytest.mark.parametrize('model_dir', ['/tmp/run', 'runs/q1', 'gs://'])
def test_model_dir_must_be_gcs(tmp_path, model_dir):
  args = [a for a in REQUIRED if not a.startswith('--model_dir')]
  result = _run(['--dry_run', *args, f'--model_dir={model_dir}'], tmp_path)
  assert result.returncode != 0
  assert '--model_dir' in result.stderr


def test_missing_gin_file_is_named(tmp_path):
  result = _run(
      ['--dry_run', *REQUIRED, '--gin_file=gin/does_not_exist.gin'], tmp_path
  )
  assert result.returncode != 0
  assert '--gin_file' in result.stderr
  assert 'gin/does_not_exist.gin' in result.stderr


def test_gin_file_outside_repository_is_refused(tmp_path):
  outside = tmp_path / 'outside.gin'
  outside.write_text('experiment.train_steps = 1\n')
  result = _run(['--dry_run', *REQUIRED, f'--gin_file={outside}'], tmp_path)
  assert result.returncode != 0
  assert '--gin_file' in result.stderr and 'outside' in result.stderr


@pytest.mark.parametrize(
    'bad',
    [
        '--mode=predict',
        '--tpu_name=My_TPU',
        '--env=not-a-name',
        '--mixed_precision=int8',
    ],
)
def test_bad_values_are_named(tmp_path, bad):
  result = _run(['--dry_run', *REQUIRED, bad], tmp_path)
  assert result.returncode != 0
  assert bad.split('=')[0] in result.stderr


def test_preemptible_and_spot_exclude_each_other(tmp_path):
  result = _run(['--dry_run', *REQUIRED, '--preemptible', '--spot'], tmp_path)
  assert result.returncode != 0
  assert '--preemptible' in result.stderr


def test_delete_dry_run(tmp_path):
  result = _run(
      ['--dry_run', '--delete', '--tpu_name=my-tpu', '--zone=europe-west4-a'],
      tmp_path,
  )
  assert result.returncode == 0, result.stderr
  commands = _commands(result.stdout)
  assert commands == [
      [
          'gcloud',
          'compute',
          'tpus',
          'tpu-vm',
          'delete',
          'my-tpu',
          '--zone=europe-west4-a',
          '--quiet',
      ]
  ]


def test_without_gcloud_stops_with_clear_message(tmp_path):
  result = _run(list(REQUIRED), tmp_path)
  assert result.returncode != 0
  assert 'gcloud is not on PATH' in result.stderr
  assert '--dry_run' in result.stderr


_FAKE_GCLOUD = textwrap.dedent('''\
    #!{python}
    """Fake gcloud: logs calls; scp copies and ssh runs in a fake VM home."""
    import json, os, shutil, subprocess, sys
    args = sys.argv[1:]
    home = os.environ['FAKE_VM_HOME']
    with open(os.environ['FAKE_GCLOUD_LOG'], 'a') as log:
      log.write(json.dumps(args) + '\\n')
    if args[:3] == ['config', 'get-value', 'project']:
      print('fake-project')
    elif args[3:4] == ['describe']:
      sys.stderr.write("ERROR: NOT_FOUND: Resource 'nodes/x' was not found\\n")
      sys.exit(1)
    elif args[3:4] == ['scp']:
      source, dest = args[4], args[5].split(':', 1)[1]
      shutil.copy(source, os.path.join(home, dest))
    elif args[3:4] == ['ssh']:
      (command,) = [a[len('--command='):] for a in args
                    if a.startswith('--command=')]
      env = dict(os.environ, HOME=home)
      sys.exit(subprocess.call(['bash', '-c', command], cwd=home, env=env))
    ''')

_FAKE_PYTHON3 = textwrap.dedent("""\
    #!{python}
    import json, os, sys
    calls = os.path.join(os.environ['HOME'], 'python3_calls.jsonl')
    with open(calls, 'a') as f:
      f.write(json.dumps({{'argv': sys.argv[1:], 'cwd': os.getcwd()}}) + '\\n')
    """)


def _fake_bin(tmp_path):
  """A folder holding the fake `gcloud` and `python3`, for PATH."""
  fake_bin = tmp_path / 'fake_bin'
  fake_bin.mkdir()
  for name, source in (('gcloud', _FAKE_GCLOUD), ('python3', _FAKE_PYTHON3)):
    (fake_bin / name).write_text(source.format(python=sys.executable))
    (fake_bin / name).chmod(0o755)
  return fake_bin


@pytest.mark.skipif(
    not all(
        shutil.which(t) for t in ('git', 'tar', 'setsid', 'nohup', 'mktemp')
    ),
    reason='needs git, tar, setsid, nohup and mktemp',
)
def test_real_run_against_fake_gcloud(tmp_path):
  fake_bin = _fake_bin(tmp_path)
  vm_home = tmp_path / 'vm_home'
  vm_home.mkdir()
  gcloud_log = tmp_path / 'gcloud.jsonl'
  result = _run(
      [*REQUIRED, f'--gin_param={BINDING}'],
      tmp_path,
      path=f'{fake_bin}{os.pathsep}{os.environ["PATH"]}',
      extra_env={
          'FAKE_VM_HOME': str(vm_home),
          'FAKE_GCLOUD_LOG': str(gcloud_log),
      },
  )
  assert result.returncode == 0, result.stdout + result.stderr

  calls = [json.loads(line) for line in gcloud_log.read_text().splitlines()]
  verbs = [c[3] if c[0] == 'compute' else ' '.join(c[:2]) for c in calls]
  assert verbs == [
      'config get-value',
      'describe',
      'create',
      'ssh',
      'scp',
      'ssh',
      'ssh',
      'ssh',
  ]
  assert '--project=fake-project' in calls[2]

  repo_on_vm = vm_home / 'official_repro'
  assert (repo_on_vm / 'run_tpu.sh').is_file()
  assert (repo_on_vm / GIN_FILE).is_file()
  assert (repo_on_vm / 'official_repro' / 'train.py').is_file()
  assert not (repo_on_vm / '.git').exists()
  assert not (vm_home / 'official_repro_sync.tar.gz').exists()

  calls_file = vm_home / 'python3_calls.jsonl'
  deadline = time.time() + 30
  while time.time() < deadline:
    python_calls = (
        [json.loads(line) for line in calls_file.read_text().splitlines()]
        if calls_file.exists()
        else []
    )
    if any('official_repro.train' in c['argv'] for c in python_calls):
      break
    time.sleep(0.1)
  (train,) = [c for c in python_calls if 'official_repro.train' in c['argv']]
  assert train['cwd'] == str(repo_on_vm)
  assert train['argv'] == [
      '-m',
      'official_repro.train',
      f'--gin_file={GIN_FILE}',
      f'--gin_param={BINDING}',
      '--model_dir=gs://my-bucket/runs/q1',
      '--mode=train_and_eval',
      '--mixed_precision=bfloat16',
      '--strategy=tpu',
      '--tpu=local',
  ]
  assert any(
      c['argv'][:4] == ['-m', 'pip', 'install', '-r'] for c in python_calls
  )
  log = vm_home / 'official_repro_logs' / 'my-bucket_runs_q1.log'
  assert log.is_file()
  assert (vm_home / 'official_repro_logs' / 'my-bucket_runs_q1.pid').is_file()
  assert 'tail -n 200 -f ~/official_repro_logs/my-bucket_runs_q1.log' in (
      result.stdout
  )


POD = (
    '--accelerator_type=v3-32',
    '--runtime_version=tpu-vm-tf-2.20.0-pod-pjrt',
)


def test_pod_slice_copies_and_installs_everywhere_and_trains_once(tmp_path):
  result = _run(
      ['--dry_run', *REQUIRED, *POD, '--project=my-project'], tmp_path
  )
  assert result.returncode == 0, result.stderr
  commands = _commands(result.stdout)
  (create,) = _gcloud(commands, 'create')
  assert '--accelerator-type=v3-32' in create
  assert '--version=tpu-vm-tf-2.20.0-pod-pjrt' in create
  (scp,) = _gcloud(commands, 'scp')
  sync, install, launch = _gcloud(commands, 'ssh')
  for command in (scp, sync, install):
    assert '--worker=all' in command
  # TensorFlow drives the slice from one client: started once, on worker 0,
  # resolving every host from the TPU's name.
  assert '--worker=0' in launch
  words = _train_words(launch)
  assert words[-2:] == ['--strategy=tpu', '--tpu=my-tpu']
  runner = _runner_words(launch)
  assert runner[:2] == ['env', 'TPU_LOAD_LIBRARY=0']
  assert '4 hosts' in result.stdout


@pytest.mark.parametrize(
    'accelerator, hosts',
    [
        ('v3-8', 1),
        ('v2-8', 1),
        ('v4-8', 1),
        ('v5litepod-8', 1),
        ('v3-32', 4),
        ('v4-64', 8),
        ('v5p-128', 16),
        ('v5litepod-16', 4),
        ('v6e-256', 64),
    ],
)
def test_hosts_follow_the_accelerator_type(tmp_path, accelerator, hosts):
  result = _run(
      [
          '--dry_run',
          *REQUIRED,
          f'--accelerator_type={accelerator}',
          '--runtime_version=tpu-vm-tf-2.20.0-pod-pjrt',
      ],
      tmp_path,
  )
  assert result.returncode == 0, result.stderr
  launch = _gcloud(_commands(result.stdout), 'ssh')[-1]
  tpu_flag = _train_words(launch)[-1]
  if hosts == 1:
    assert tpu_flag == '--tpu=local'
    assert 'multi-host' not in result.stdout
  else:
    assert tpu_flag == '--tpu=my-tpu'
    assert f'({hosts} hosts)' in result.stdout


@pytest.mark.parametrize(
    'args, flag',
    [
        (('--accelerator_type=v3-32',), '--runtime_version'),
        (('--accelerator_type=v9-8',), '--accelerator_type'),
        (('--accelerator_type=v3',), '--accelerator_type'),
        (('--spot', '--supervise_interval=soon'), '--supervise_interval'),
        (('--spot', '--max_restarts=-1'), '--max_restarts'),
    ],
)
def test_bad_pod_and_supervisor_flags_are_named(tmp_path, args, flag):
  result = _run(['--dry_run', *REQUIRED, *args], tmp_path)
  assert result.returncode == 2
  assert flag in result.stderr
  assert not _commands(result.stdout)


def test_spot_dry_run_prints_the_supervisor(tmp_path):
  result = _run(
      ['--dry_run', *REQUIRED, *POD, '--spot', '--supervise_interval=60'],
      tmp_path,
  )
  assert result.returncode == 0, result.stderr
  commands = _commands(result.stdout)
  first_create, recreate = _gcloud(commands, 'create')
  assert '--spot' in first_create and first_create == recreate
  describes = _gcloud(commands, 'describe')
  assert len(describes) == 2 and describes[0] == describes[1]
  (delete,) = _gcloud(commands, 'delete')
  recreate_at = [i for i, c in enumerate(commands) if c == recreate][1]
  assert commands.index(delete) == recreate_at - 1
  ssh = _gcloud(commands, 'ssh')
  launches = [c for c in ssh if 'official_repro.train' in _flag(c, '--command')]
  # The first launch, the relaunch after a stop and the one after recreation
  # are the same command on worker 0.
  assert len(launches) == 3
  assert launches[0] == launches[1] == launches[2]
  (status,) = [c for c in ssh if 'run_tpu_status' in _flag(c, '--command')]
  assert '--worker=0' in status
  # After recreation: copy, sync and install on every worker, then launch.
  after = commands[recreate_at:]
  assert [
      '--worker=all' in c
      for c in after
      if c[:4] == ['gcloud', 'compute', 'tpus', 'tpu-vm']
      and c[4] in ('scp', 'ssh')
  ] == [True, True, True, False]
  assert 'every 60 s' in result.stdout
  assert '143' in result.stdout


def test_help_explains_pods_batch_and_preemption(tmp_path):
  result = _run(['--help'], tmp_path)
  for text in (
      'v3-32',
      '4 hosts x 512',
      '32\nreplicas x 64',
      'PREEMPTED',
      '--supervise_interval',
      '--max_restarts',
      'input_pipeline_id',
  ):
    assert text in result.stdout, text


_FAKE_SUPERVISED_GCLOUD = textwrap.dedent('''\
    #!{python}
    """Fake gcloud with a VM state file; delete wipes the fake VM's home."""
    import json, os, shutil, subprocess, sys
    args = sys.argv[1:]
    home = os.environ['FAKE_VM_HOME']
    state_file = os.path.join(os.environ['FAKE_STATE_DIR'], 'vm_state')
    with open(os.environ['FAKE_GCLOUD_LOG'], 'a') as log:
      log.write(json.dumps(args) + '\\n')
    state = open(state_file).read() if os.path.exists(state_file) else ''
    verb = args[3] if len(args) > 3 else ''
    if verb == 'describe':
      if not state:
        sys.stderr.write('ERROR: NOT_FOUND\\n')
        sys.exit(1)
      print(state + '\\tv3-8')
    elif verb == 'create':
      open(state_file, 'w').write('READY')
    elif verb == 'delete':
      os.remove(state_file)
      shutil.rmtree(home)
      os.mkdir(home)
    elif verb == 'scp':
      shutil.copy(args[4], os.path.join(home, args[5].split(':', 1)[1]))
    elif verb == 'ssh':
      (command,) = [a[len('--command='):] for a in args
                    if a.startswith('--command=')]
      env = dict(os.environ, HOME=home)
      sys.exit(subprocess.call(['bash', '-c', command], cwd=home, env=env))
    ''')

# Training runs in turn: stopped by SIGTERM (143), then preempted with the VM
# (the fake marks the VM PREEMPTED and dies), then finishing; or failing.
_FAKE_TRAINING_PYTHON3 = textwrap.dedent("""\
    #!{python}
    import json, os, sys
    state_dir = os.environ['FAKE_STATE_DIR']
    if 'official_repro.train' not in sys.argv:
      sys.exit(0)
    with open(os.path.join(state_dir, 'train_calls.jsonl'), 'a') as f:
      f.write(json.dumps(sys.argv[1:]) + '\\n')
    plan = os.environ['FAKE_TRAINING_PLAN'].split(',')
    count = sum(1 for _ in open(os.path.join(state_dir, 'train_calls.jsonl')))
    outcome = plan[min(count, len(plan)) - 1]
    if outcome == 'preempted':
      open(os.path.join(state_dir, 'vm_state'), 'w').write('PREEMPTED')
      os.kill(os.getpid(), 9)
    sys.exit(int(outcome))
    """)


@pytest.mark.slow
@pytest.mark.skipif(
    not all(
        shutil.which(t) for t in ('git', 'tar', 'setsid', 'nohup', 'mktemp')
    ),
    reason='needs git, tar, setsid, nohup and mktemp',
)
@pytest.mark.parametrize(
    'plan, returncode, expected',
    [
        ('143,preempted,0', 0, 'job my-bucket_runs_q1 finished'),
        ('143,1', 1, 'failed with status 1; not relaunching'),
        ('143', 1, '--max_restarts=2 are used up'),
    ],
)
def test_supervisor_relaunches_and_recreates(
    tmp_path, plan, returncode, expected
):
  fake_bin = tmp_path / 'fake_bin'
  fake_bin.mkdir()
  for name, source in (
      ('gcloud', _FAKE_SUPERVISED_GCLOUD),
      ('python3', _FAKE_TRAINING_PYTHON3),
  ):
    (fake_bin / name).write_text(source.format(python=sys.executable))
    (fake_bin / name).chmod(0o755)
  vm_home = tmp_path / 'vm_home'
  vm_home.mkdir()
  state_dir = tmp_path / 'state'
  state_dir.mkdir()
  gcloud_log = tmp_path / 'gcloud.jsonl'
  result = _run(
      [
          *REQUIRED,
          '--project=p',
          '--spot',
          '--supervise_interval=0',
          '--max_restarts=2',
      ],
      tmp_path,
      path=f'{fake_bin}{os.pathsep}{os.environ["PATH"]}',
      extra_env={
          'FAKE_VM_HOME': str(vm_home),
          'FAKE_STATE_DIR': str(state_dir),
          'FAKE_GCLOUD_LOG': str(gcloud_log),
          'FAKE_TRAINING_PLAN': plan,
      },
  )
  assert result.returncode == returncode, result.stdout + result.stderr
  assert expected in result.stdout + result.stderr
  calls = [json.loads(line) for line in gcloud_log.read_text().splitlines()]
  verbs = [c[3] for c in calls]
  train_calls = [
      json.loads(line)
      for line in (state_dir / 'train_calls.jsonl').read_text().splitlines()
  ]
  # Every run is the same command.
  assert all(call == train_calls[0] for call in train_calls)
  if plan.startswith('143,preempted'):
    assert len(train_calls) == 3
    assert verbs.count('create') == 2 and verbs.count('delete') == 1
    assert verbs.count('scp') == 2
    assert (vm_home / 'official_repro' / 'run_tpu.sh').is_file()
  else:
    assert 'delete' not in verbs and verbs.count('create') == 1
    assert len(train_calls) == (2 if plan == '143,1' else 3)


@pytest.mark.skipif(
    not all(shutil.which(t) for t in ('git', 'tar', 'setsid', 'nohup', 'ps')),
    reason='needs git, tar, setsid, nohup and ps',
)
@pytest.mark.parametrize(
    'other_job, busy',
    [
        # Another job's process, with its --model_dir, still running (past
        # the 80 columns `ps` cuts its lines to where COLUMNS says so).
        (
            ('bash', '-c', 'sleep 60; true', '--model_dir=gs://b/' + 'x' * 80),
            True,
        ),
        # A finished job whose pid now names an unrelated process (reused).
        (('sleep', '60'), False),
    ],
)
def test_a_vm_is_busy_only_while_another_job_runs(tmp_path, other_job, busy):
  """Found by the every-table rehearsal: a reused pid blocked a free VM."""
  fake_bin = _fake_bin(tmp_path)
  vm_home = tmp_path / 'vm_home'
  logs = vm_home / 'official_repro_logs'
  logs.mkdir(parents=True)
  process = subprocess.Popen(other_job)
  try:
    (logs / 'b_other.pid').write_text(f'{process.pid}\n')
    if not busy:
      (logs / 'b_other.exit').write_text('0\n')
    result = _run(
        [*REQUIRED, f'--gin_param={BINDING}'],
        tmp_path,
        path=f'{fake_bin}{os.pathsep}{os.environ["PATH"]}',
        extra_env={
            'FAKE_VM_HOME': str(vm_home),
            'FAKE_GCLOUD_LOG': str(tmp_path / 'gcloud.jsonl'),
            'COLUMNS': '80',  # as a terminal's shell (and pytest) sets it
        },
    )
  finally:
    process.kill()
    process.wait()
  refusal = f'run_tpu: job b_other (pid {process.pid}) is still running'
  if busy:
    assert result.returncode == 1
    assert refusal in result.stderr
  else:
    assert result.returncode == 0, result.stdout + result.stderr
    assert refusal not in result.stderr
    assert (logs / 'my-bucket_runs_q1.pid').is_file()
