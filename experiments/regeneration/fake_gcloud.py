#!/usr/bin/env python3
"""A stand-in for `gcloud compute tpus tpu-vm` that runs VMs on this machine.

`--rehearse` puts it on PATH as `gcloud`, so `run_tpu.sh` runs unchanged:
`config get-value project` and `compute tpus tpu-vm create | describe | list
| start | stop | delete | scp | ssh`. A VM is a folder
`$FAKE_GCLOUD_ROOT/<project>/<zone>/<name>/`; `ssh --command` runs bash in
its worker's home. Faults (`$FAKE_GCLOUD_FAULTS`, a JSON list), each fired
once on the first READY VM matching "vm" (glob) running "job": "preempt"
once a file matches "when", "crash" likewise (SIGABRT), "ssh_drop" on the
"call"-th ssh (exit 255). Calls go to `calls.jsonl`. Standard library only,
so each call starts fast.
"""

import contextlib
import fcntl
import fnmatch
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

_VM_MARK = 'FAKE_GCLOUD_VM'
_WATCH_SECONDS = 0.2


class GcloudError(Exception):
  """A failed call: printed as gcloud prints errors, exit status 1."""


def _root() -> str:
  root = os.environ.get('FAKE_GCLOUD_ROOT')
  if not root:
    sys.stderr.write(
        'ERROR: (fake gcloud) FAKE_GCLOUD_ROOT is not set; this is the '
        'rehearsal stand-in for gcloud, not the Cloud SDK.\n'
    )
    sys.exit(2)
  os.makedirs(root, exist_ok=True)
  return root


def _read_json(path, default):
  try:
    with open(path) as f:
      return json.load(f)
  except FileNotFoundError:
    return default


def _write_json(path, value) -> None:
  temporary = f'{path}.{os.getpid()}.tmp'
  with open(temporary, 'w') as f:
    json.dump(value, f)
  os.replace(temporary, path)


def _options(args):
  """(positional words, {--flag: value}) of a gcloud argument list."""
  words, options = [], {}
  for arg in args:
    if arg.startswith('--'):
      name, has_value, value = arg[2:].partition('=')
      options[name] = value if has_value else True
    else:
      words.append(arg)
  return words, options


def _project(options) -> str:
  return options.get('project') or os.environ.get(
      'FAKE_GCLOUD_PROJECT', 'rehearsal-project'
  )


def _vm_dir(name: str, options) -> str:
  zone = options.get('zone')
  if not zone:
    raise GcloudError('argument --zone: Must be specified.')
  return os.path.join(_root(), _project(options), zone, name)


def _hosts(accelerator_type: str) -> int:
  """TPU VM hosts of an accelerator type (Cloud TPU's rule, as run_tpu.sh)."""
  family, _, size = accelerator_type.rpartition('-')
  size = int(size)
  if family in ('v5litepod', 'v6e'):
    return 1 if size <= 8 else size // 4
  return max(1, (size + 7) // 8)


def _vm(name: str, options, ready: bool = False):
  """(folder, vm.json) of the VM `name`, which must exist (and be READY)."""
  vm_dir = _vm_dir(name, options)
  vm = _read_json(os.path.join(vm_dir, 'vm.json'), None)
  if vm is None:
    raise GcloudError(
        f'NOT_FOUND: Resource projects/.../nodes/{name} was not found.'
    )
  if ready and vm['state'] != 'READY':
    raise GcloudError(
        f'FAILED_PRECONDITION: {name} is {vm["state"]}, not READY.'
    )
  return vm_dir, vm


def _set_state(vm_dir: str, state: str) -> None:
  path = os.path.join(vm_dir, 'vm.json')
  vm = _read_json(path, None)
  if vm is not None:
    vm['state'] = state
    _write_json(path, vm)


def _vm_processes(vm_dir: str, shells: bool = True, job: str = ''):
  """Pids of the VM's processes (by environment); `shells=False`: jobs only.

  With `job`, those whose command line (words joined by spaces) has it.
  """
  mark = f'{_VM_MARK}={vm_dir}'.encode()
  pids = []
  for entry in os.listdir('/proc'):
    if not entry.isdigit() or int(entry) == os.getpid():
      continue
    try:
      with open(f'/proc/{entry}/environ', 'rb') as f:
        if mark not in f.read().split(b'\0'):
          continue
      with open(f'/proc/{entry}/comm') as f:
        if not shells and f.read().strip() in ('sh', 'bash', 'dash'):
          continue
      with open(f'/proc/{entry}/cmdline', 'rb') as f:
        if job.encode() not in f.read().replace(b'\0', b' '):
          continue
      pids.append(int(entry))
    except OSError:
      continue
  return pids


def _signal_all(pids, signum) -> None:
  for pid in pids:
    try:
      os.kill(pid, signum)
    except ProcessLookupError:
      pass


def _halt(vm_dir: str, notice_seconds: float = 2.0) -> None:
  """Ends the VM's processes: SIGTERM, then SIGKILL after the notice."""
  _signal_all(_vm_processes(vm_dir), signal.SIGTERM)
  deadline = time.time() + notice_seconds
  while time.time() < deadline and _vm_processes(vm_dir):
    time.sleep(0.1)
  _signal_all(_vm_processes(vm_dir), signal.SIGKILL)


def create(name, options) -> None:
  """`tpu-vm create`: a READY VM with one home folder per worker."""
  vm_dir = _vm_dir(name, options)
  if os.path.exists(os.path.join(vm_dir, 'vm.json')):
    raise GcloudError(f'ALREADY_EXISTS: Resource {name} already exists.')
  accelerator_type = options.get('accelerator-type', 'v2-8')
  try:
    hosts = _hosts(accelerator_type)
  except ValueError as error:
    raise GcloudError(
        f'INVALID_ARGUMENT: accelerator type {accelerator_type}'
    ) from error
  shutil.rmtree(vm_dir, ignore_errors=True)
  for worker in range(hosts):
    os.makedirs(os.path.join(vm_dir, f'worker-{worker}', 'home'))
  _write_json(
      os.path.join(vm_dir, 'vm.json'),
      dict(
          name=name,
          state='READY',
          acceleratorType=accelerator_type,
          runtimeVersion=options.get('version', ''),
          spot=bool(options.get('spot') or options.get('preemptible')),
          hosts=hosts,
      ),
  )
  sys.stderr.write(f'Create request issued for: [{name}]\n')
  _start_watcher()


def _format(vm, fmt) -> str:
  if fmt and fmt.startswith('value(') and fmt.endswith(')'):
    fields = fmt[len('value(') : -1].split(',')
    return '\t'.join(str(vm.get(field.strip(), '')) for field in fields)
  if fmt == 'json':
    return json.dumps(vm, indent=2)
  return '\n'.join(f'{key}: {value}' for key, value in vm.items())


def describe(name, options) -> None:
  """`tpu-vm describe`, in the --format asked for."""
  _, vm = _vm(name, options)
  print(_format(vm, options.get('format')))


def list_vms(options) -> None:
  """`tpu-vm list`: the zone's VMs."""
  zone_dir = os.path.join(_root(), _project(options), options.get('zone', ''))
  vms = [
      _read_json(path, {})
      for path in sorted(glob.glob(os.path.join(zone_dir, '*', 'vm.json')))
  ]
  fmt = options.get('format')
  if fmt == 'json':
    print(json.dumps(vms, indent=2))
    return
  if not fmt:
    print('NAME\tZONE\tACCELERATOR_TYPE\tSTATUS')
  zone = options.get('zone')
  for vm in vms:
    default = f'{vm["name"]}\t{zone}\t{vm["acceleratorType"]}\t{vm["state"]}'
    print(_format(vm, fmt) if fmt else default)


def start(name, options) -> None:
  """`tpu-vm start`: a STOPPED VM READY again."""
  vm_dir, vm = _vm(name, options)
  if vm['state'] not in ('STOPPED', 'READY'):
    raise GcloudError(f'FAILED_PRECONDITION: {name} is {vm["state"]}.')
  _set_state(vm_dir, 'READY')


def stop(name, options) -> None:
  """`tpu-vm stop`: its processes ended, the VM STOPPED."""
  vm_dir, _ = _vm(name, options)
  _halt(vm_dir)
  _set_state(vm_dir, 'STOPPED')


def delete(name, options) -> None:
  """`tpu-vm delete`: its processes killed and its folders removed."""
  vm_dir, _ = _vm(name, options)
  _halt(vm_dir, notice_seconds=0.0)
  shutil.rmtree(vm_dir)
  sys.stderr.write(f'Deleted [{name}].\n')


def _workers(vm, options):
  worker = options.get('worker', '0')
  if worker == 'all':
    return list(range(vm['hosts']))
  try:
    index = int(worker)
  except ValueError as error:
    raise GcloudError(f'argument --worker: invalid value {worker!r}') from error
  if not 0 <= index < vm['hosts']:
    raise GcloudError(f'--worker={worker}: the VM has {vm["hosts"]} workers.')
  return [index]


def scp(words, options) -> None:
  """`tpu-vm scp SRC NAME:DST`: a file into the workers' homes."""
  source, destination = words
  name, _, remote = destination.partition(':')
  vm_dir, vm = _vm(name, options, ready=True)
  for worker in _workers(vm, options):
    home = os.path.join(vm_dir, f'worker-{worker}', 'home')
    target = os.path.join(home, remote.replace('~/', '', 1) or '.')
    shutil.copy(source, target)


@contextlib.contextmanager
def _fault_state():
  """The faults' counters and fired flags, locked and written back."""
  with open(os.path.join(_root(), 'faults.lock'), 'w') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    path = os.path.join(_root(), 'faults.json')
    state = _read_json(path, {})
    yield state
    _write_json(path, state)


def _ssh_dropped(name) -> bool:
  """Whether an ssh_drop fault takes this call (counting calls per fault)."""
  dropped = False
  with _fault_state() as state:
    for index, fault in enumerate(_faults()):
      if fault.get('kind') != 'ssh_drop':
        continue
      if not fnmatch.fnmatch(name, fault.get('vm', '*')):
        continue
      key = f'ssh_calls_{index}'
      state[key] = state.get(key, 0) + 1
      if state[key] == int(fault['call']):
        dropped = True
  return dropped


def ssh(name, options) -> int:
  """`tpu-vm ssh --command`: the command's status (255: dropped)."""
  vm_dir, vm = _vm(name, options, ready=True)
  command = options.get('command')
  if not isinstance(command, str):
    raise GcloudError('--command is required here (no interactive shell).')
  _check_faults()
  if _ssh_dropped(name):
    sys.stderr.write(
        'Connection closed by remote host.\n'
        'ERROR: (gcloud.compute.tpus.tpu-vm.ssh) [/usr/bin/ssh] exited '
        'with return code [255].\n'
    )
    return 255
  status = 0
  for worker in _workers(vm, options):
    home = os.path.join(vm_dir, f'worker-{worker}', 'home')
    env = dict(os.environ, HOME=home, **{_VM_MARK: vm_dir})
    env.pop('FAKE_GCLOUD_WATCHER', None)
    status = (
        subprocess.call(['bash', '-c', command], cwd=home, env=env) or status
    )
  return status


def _faults():
  path = os.environ.get('FAKE_GCLOUD_FAULTS')
  return _read_json(path, []) if path else []


def _target_vm(fault):
  """The first READY VM the fault names (and whose job it names), or None."""
  for vm_json in sorted(
      glob.glob(os.path.join(_root(), '*', '*', '*', 'vm.json'))
  ):
    vm = _read_json(vm_json, {})
    vm_dir = os.path.dirname(vm_json)
    if (
        vm.get('state') == 'READY'
        and fnmatch.fnmatch(vm.get('name', ''), fault.get('vm', '*'))
        and (not fault.get('job') or _vm_processes(vm_dir, job=fault['job']))
    ):
      return vm_dir, vm['name']
  return None


def _check_faults() -> bool:
  """Fires the file-triggered faults whose condition holds; any pending?"""
  pending = False
  with _fault_state() as state:
    for index, fault in enumerate(_faults()):
      kind = fault.get('kind')
      if kind not in ('preempt', 'crash') or state.get(f'fired_{index}'):
        continue
      pending = True
      target = _target_vm(fault) if glob.glob(fault['when']) else None
      if target is None:
        continue
      vm_dir, name = target
      state[f'fired_{index}'] = True
      _log(dict(fault=fault, vm=name))
      if kind == 'preempt':
        _set_state(vm_dir, 'PREEMPTED')
        _halt(vm_dir)
      else:
        _signal_all(_vm_processes(vm_dir, shells=False), signal.SIGABRT)
  return pending


def _start_watcher() -> None:
  """Starts the fault watcher unless one runs or no fault is pending."""
  if not _faults() or os.environ.get('FAKE_GCLOUD_WATCHER'):
    return
  pid_path = os.path.join(_root(), 'watcher.pid')
  try:
    with open(pid_path) as f:
      os.kill(int(f.read()), 0)
    return
  except (OSError, ValueError):
    pass
  watcher = subprocess.Popen(
      [sys.executable, os.path.abspath(__file__), '--watch'],
      env=dict(os.environ, FAKE_GCLOUD_WATCHER='1'),
      stdin=subprocess.DEVNULL,
      stdout=subprocess.DEVNULL,
      stderr=subprocess.DEVNULL,
      start_new_session=True,
  )
  with open(pid_path, 'w') as f:
    f.write(str(watcher.pid))


def watch() -> None:
  """Checks the faults until none is pending or no VM is left for a minute."""
  idle_since = time.time()
  while _check_faults():
    if glob.glob(os.path.join(_root(), '*', '*', '*', 'vm.json')):
      idle_since = time.time()
    elif time.time() - idle_since > 60:
      return
    time.sleep(_WATCH_SECONDS)


def _log(entry) -> None:
  with open(os.path.join(_root(), 'calls.jsonl'), 'a') as f:
    f.write(json.dumps(entry) + '\n')


def main(args) -> int:
  """Runs one gcloud call; its exit status."""
  if args == ['--watch']:
    watch()
    return 0
  _log(args)
  words, options = _options(args)
  if words[:2] == ['config', 'get-value'] and words[2:] == ['project']:
    print(_project(options))
    return 0
  if words[:3] != ['compute', 'tpus', 'tpu-vm'] or len(words) < 4:
    raise GcloudError(f'(fake gcloud) unsupported command: {" ".join(args)}')
  verb, rest = words[3], words[4:]
  verbs = dict(
      create=create, describe=describe, start=start, stop=stop, delete=delete
  )
  if verb == 'list':
    list_vms(options)
  elif verb == 'scp':
    scp(rest, options)
  elif len(rest) != 1:
    raise GcloudError(f'{verb}: expected one TPU name, got {rest}')
  elif verb == 'ssh':
    return ssh(rest[0], options)
  elif verb not in verbs:
    raise GcloudError(f'(fake gcloud) unsupported verb: {verb}')
  else:
    _check_faults()
    verbs[verb](rest[0], options)
  return 0


if __name__ == '__main__':
  try:
    sys.exit(main(sys.argv[1:]))
  except GcloudError as error:
    command = '.'.join(['gcloud', *sys.argv[1:5]])
    sys.stderr.write(f'ERROR: ({command}) {error}\n')
    sys.exit(1)
