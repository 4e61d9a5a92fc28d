"""A paper-scale launch end to end: rehearsed against the fake gcloud.

`experiments.regenerate --scale=paper --rehearse --launch` through its real
command line: `run_tpu.sh`, its supervisor, the jobs on the (fake) VMs, the
bucket, the table. The slow tier rehearses one table's launch at tiny
sizes and its second launch; `-m hours` (3 to 10 minutes each
at tiny sizes, hours at the papers') rehearses preemptions, failures, SQuAD
on the VM and another fake gcloud at tiny sizes, 001 Table IV with its
faults and every other table at the papers' sizes, and 004.1 at the gpu
scale's.
"""

import glob
import json
import os
import random
import sys

import pytest

from experiments.regeneration import registry
from tests import conftest
from tests.training import test_finetuning

_WORDS = conftest._WORDS  # pylint: disable=protected-access


def _sentence(rng, length=6):
  return ' '.join(rng.choice(_WORDS) for _ in range(length))


def _write_glue(root, rng):
  """MRPC and STS-B folders with 12 train and 6 dev rows."""
  for name, header, row in (
      (
          'MRPC',
          'Quality\t#1 ID\t#2 ID\t#1 String\t#2 String',
          lambda i: f'{i % 2}\t{i}\t{i + 100}\t{_sentence(rng)}\t'
          f'{_sentence(rng)}',
      ),
      (
          'STS-B',
          'index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\t'
          'sentence1\tsentence2\tscore',
          lambda i: f'{i}\tmain\tf\t2012\t{i}\tnone\tnone\t{_sentence(rng)}\t'
          f'{_sentence(rng)}\t{rng.uniform(0, 5):.3f}',
      ),
  ):
    folder = root / name
    folder.mkdir(parents=True)
    for split, rows in (('train', 12), ('dev', 6)):
      lines = [header] + [row(i) for i in range(rows)]
      (folder / f'{split}.tsv').write_text('\n'.join(lines) + '\n')
  return root


@pytest.fixture(scope='module')
def inputs(tmp_path_factory):
  """(corpus, vocabulary, GLUE root) for rehearsals."""
  root = tmp_path_factory.mktemp('inputs')
  corpus = conftest.write_fixture_files(root / 'corpus', 3, num_documents=12)
  vocab = conftest.write_fixture_vocab(root / 'vocab.txt')
  # More tokens than 003 Fig. 5's largest K (50) draws negatives from.
  with open(vocab, 'a') as f:
    f.writelines(f'[unused{i}]\n' for i in range(64))
  glue = _write_glue(root / 'glue', random.Random(0))
  return corpus, vocab, glue


def _rehearse(python_m, inputs, out, table, *flags, timeout=3000):
  corpus, vocab, glue = inputs
  return python_m(
      [
          'experiments.regenerate',
          f'--table={table}',
          '--scale=paper',
          '--rehearse',
          '--launch',
          f'--corpus={corpus}',
          f'--vocab_file={vocab}',
          f'--glue_dir={glue}',
          f'--out={out}',
          *flags,
      ],
      timeout=timeout,
  )


def _calls(out):
  path = os.path.join(out, 'rehearsal', 'vms', 'calls.jsonl')
  with open(path) as f:
    return [json.loads(line) for line in f]


def _vm_files(out, pattern):
  """Paths of the VMs' job files (`*.log`, `*.exit`) in worker 0's home."""
  return glob.glob(
      os.path.join(
          out,
          'rehearsal',
          'vms',
          '*',
          '*',
          '*',
          'worker-0',
          'home',
          'official_repro_logs',
          pattern,
      )
  )


def _vm_job_logs(out):
  """The job logs the VMs wrote, by file name (the VM homes persist)."""
  return {os.path.basename(path) for path in _vm_files(out, '*.log')}


def _table(out, key):
  with open(os.path.join(out, f'{key}.json')) as f:
    return json.load(f)


def _cells(table):
  """{row: {column: ours}} of a regenerated table's JSON."""
  return {
      entry['row']: {cell['column']: cell['ours'] for cell in entry['cells']}
      for entry in table['rows']
  }


@pytest.fixture(scope='module')
def launched_004(python_m, inputs, tmp_path_factory):
  """The output folder of one rehearsed launch of 004.1 at tiny sizes."""
  out = str(tmp_path_factory.mktemp('launched_004') / 'out')
  first = _rehearse(
      python_m, inputs, out, '004.1', '--rehearse_sizes=tiny', '--tasks=mrpc:1'
  )
  assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
  return out


@pytest.mark.slow  # three minutes: the default tier stays within five
def test_a_rehearsed_launch_runs_every_job_on_a_vm(launched_004):
  out = launched_004
  target = registry.get('004.1')
  cells = _cells(_table(out, '004.1'))
  assert set(cells) == {run.row for run in target.runs}
  assert all('mrpc' in row for row in cells.values())
  # Every pretraining and fine-tuning ran as a job on the VM, not here.
  logs = _vm_job_logs(out) - {'latest.log'}
  assert len([log for log in logs if 'glue_004_script' in log]) == 2
  assert len([log for log in logs if 'glue_' not in log]) == 2
  launches = [
      call
      for call in _calls(out)
      if isinstance(call, list)
      and 'ssh' in call
      and 'setsid nohup' in str(call)
  ]
  assert [
      'official_repro.train' in str(c) or 'experiments.glue_suite' in str(c)
      for c in launches
  ] == [True] * 4
  # Every job ended with status 0: a fine-tuning started while its
  # pretraining ran would have been refused (the VM is busy) or failed.
  for exit_file in _vm_files(out, '*.exit'):
    with open(exit_file) as f:
      assert f.read().strip() == '0', exit_file


@pytest.mark.slow
def test_a_second_launch_starts_nothing_and_prints_the_same_table(
    python_m, inputs, launched_004
):
  out = launched_004
  cells = _cells(_table(out, '004.1'))
  calls_before = len(_calls(out))
  second = _rehearse(
      python_m, inputs, out, '004.1', '--rehearse_sizes=tiny', '--tasks=mrpc:1'
  )
  assert second.returncode == 0, second.stderr[-3000:]
  assert len(_calls(out)) == calls_before  # no VM looked up, nothing started
  assert _cells(_table(out, '004.1')) == cells
  assert 'electra_small: finished' in second.stdout


def _faults(path, *faults):
  path.write_text(json.dumps(list(faults)))
  return f'--rehearse_faults={path}'


def _fired(out):
  return [
      call['fault']['kind']
      for call in _calls(out)
      if isinstance(call, dict) and 'fault' in call
  ]


def _verbs(out):
  return [
      call[3]
      for call in _calls(out)
      if isinstance(call, list) and call[:3] == ['compute', 'tpus', 'tpu-vm']
  ]


@pytest.mark.parametrize(
    'sizes',
    [
        pytest.param('tiny', marks=[pytest.mark.slow, pytest.mark.hours]),
        pytest.param('paper', marks=[pytest.mark.slow, pytest.mark.hours]),
    ],
)
def test_001_iv_preempted_twice_gives_the_same_table(
    python_m, inputs, tmp_path, sizes
):
  flags = (
      '--tasks=mrpc:1,stsb:1',
      '--tpu_names=vm-a,vm-b',
      f'--rehearse_sizes={sizes}',
  )
  clean = str(tmp_path / 'clean')
  result = _rehearse(python_m, inputs, clean, '001.IV', *flags)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  table = _cells(_table(clean, '001.IV'))
  assert set(table) == {run.row for run in registry.get('001.IV').runs}
  assert all(set(row) >= {'MRPC', 'STS-B'} for row in table.values())

  faulty = str(tmp_path / 'faulty')
  bucket = os.path.join(faulty, 'rehearsal', 'bucket')
  faults = _faults(
      tmp_path / 'faults.json',
      # Mid-pretraining: ELECTRA-small's VM once its first checkpoint is in.
      dict(
          kind='preempt',
          job='official_repro.train --gin_file=gin/papers/001_ale/electra',
          when=f'{bucket}/001_ale.electra_small-*/ckpt-1.index',
      ),
      # Mid-fine-tuning: ALE-small's VM once MRPC is done, before STS-B.
      dict(
          kind='preempt',
          job='experiments.glue_suite --paper=001_ale --init_checkpoint='
          f'{bucket}/001_ale.ale_small',
          when=f'{bucket}/001_ale.ale_small-*/glue_001_ale/mrpc/results.json',
      ),
      # The second ssh to vm-b, the tree's sync to the new VM: retried.
      dict(kind='ssh_drop', vm='vm-b', call=2),
  )
  result = _rehearse(python_m, inputs, faulty, '001.IV', *flags, faults)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  assert sorted(_fired(faulty)) == ['preempt', 'preempt']
  assert _verbs(faulty).count('create') == 2 + 2  # each preempted VM again
  assert 'connection failed (exit status 255); retrying' in ''.join(
      open(path).read()
      for path in glob.glob(os.path.join(faulty, 'logs', '*.log'))
  )
  assert _cells(_table(faulty, '001.IV')) == table

  calls = len(_calls(faulty))
  again = _rehearse(python_m, inputs, faulty, '001.IV', *flags, faults)
  assert again.returncode == 0, again.stderr[-3000:]
  assert len(_calls(faulty)) == calls
  assert _cells(_table(faulty, '001.IV')) == table


@pytest.mark.slow
@pytest.mark.hours
def test_a_failed_run_is_named_the_others_finish_and_a_rerun_redoes_only_it(
    python_m, inputs, tmp_path
):
  out = str(tmp_path / 'out')
  bucket = os.path.join(out, 'rehearsal', 'bucket')
  flags = ('--rehearse_sizes=tiny', '--tasks=mrpc:1')
  crash = _faults(
      tmp_path / 'faults.json',
      dict(kind='crash', when=f'{bucket}/004_script.small-*/ckpt-1.index'),
  )
  failed = _rehearse(python_m, inputs, out, '004.1', *flags, crash)
  assert failed.returncode == 2  # one clean line, as every refusal
  assert (
      failed.stderr.strip()
      .splitlines()[-1]
      .endswith(
          '1 run(s) failed (script_small); see the lines above, fix the cause '
          'and run the same command again: finished jobs are kept.'
      )
  )
  [line] = [
      text for text in failed.stdout.splitlines() if text.startswith('FAILED')
  ]
  assert line.startswith('FAILED script_small: pretrain on VM rehearsal-a: ')
  assert line.endswith(f'(log {out}/logs/script_small.pretrain.log)')
  assert set(_cells(_table(out, '004.1'))) == {'ELECTRA-small'}
  electra_done = glob.glob(
      f'{bucket}/001_ale.electra_small-*/glue_*/' 'glue_results.json'
  )
  before = {path: os.path.getmtime(path) for path in electra_done}

  rerun = _rehearse(python_m, inputs, out, '004.1', *flags)
  assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
  assert set(_cells(_table(out, '004.1'))) == {
      run.row for run in registry.get('004.1').runs
  }
  assert {path: os.path.getmtime(path) for path in electra_done} == before
  assert 'electra_small: pretrain on' not in rerun.stdout


@pytest.mark.slow
@pytest.mark.hours
def test_a_preempted_fine_tuning_resumes_on_a_recreated_vm(
    python_m, inputs, tmp_path
):
  out = str(tmp_path / 'out')
  bucket = os.path.join(out, 'rehearsal', 'bucket')
  preempt = _faults(
      tmp_path / 'faults.json',
      dict(
          kind='preempt',
          when=f'{bucket}/004_script.small-*/glue_004_script/mrpc/results.json',
      ),
  )
  result = _rehearse(
      python_m,
      inputs,
      out,
      '004.1',
      '--rehearse_sizes=tiny',
      '--tasks=mrpc:1,stsb:1',
      preempt,
  )
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  assert _fired(out) == ['preempt']
  assert _verbs(out).count('create') == 2
  cells = _cells(_table(out, '004.1'))
  assert set(cells['SCRIPT-small']) == {'mrpc', 'stsb'}


# Every table with pretraining runs but 001 Table IV (above); 003 Table 1,
# with the base and large models, last: it reads the Small++ runs the
# others share with it.
_OTHER_TABLES = sorted(
    (
        key
        for key, target in registry.TARGETS.items()
        if target.runs and key not in ('001.IV', 'learning')
    ),
    key=lambda key: (key == '003.1', key),
)


def _accelerator_types(key):
  """--accelerator_type items that fit each run of `key`.

  003's base and large models: the plan refuses them on a v3-8, and
  TEAMS-Large at 8 examples per replica on a v3-256.
  """
  items = ['v3-8']
  for run in registry.get(key).runs:
    if key.startswith('003') and 'large' in run.name:
      items.append(f'{run.name}=v3-{512 if "teams" in run.name else 256}')
    elif key.startswith('003') and 'base' in run.name:
      items.append(f'{run.name}=v3-{128 if "_pp" in run.name else 32}')
  return ','.join(items)


@pytest.fixture(scope='module')
def shared_out(tmp_path_factory):
  return str(tmp_path_factory.mktemp('every_table'))


@pytest.mark.slow
@pytest.mark.hours
@pytest.mark.parametrize('key', _OTHER_TABLES)
def test_every_table_rehearses_at_the_papers_sizes(
    python_m, inputs, shared_out, key
):
  result = _rehearse(
      python_m,
      inputs,
      shared_out,
      key,
      '--tasks=mrpc:1',
      '--tpu_names=vm-a,vm-b',
      f'--accelerator_type={_accelerator_types(key)}',
      timeout=5400,
  )
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  target = registry.get(key)
  if target.finetune_paper:
    assert set(_cells(_table(shared_out, key))) == {
        run.row for run in target.runs
    }


@pytest.mark.slow
@pytest.mark.hours
def test_squad_jobs_run_on_the_vm_and_fill_the_tables_squad_columns(
    python_m, inputs, tmp_path
):
  squad = tmp_path / 'squad'
  rng = random.Random(1)
  test_finetuning._write_squad(squad / 'squad11', rng, '1.1')  # pylint: disable=protected-access
  test_finetuning._write_squad(squad / 'squad20', rng, '2.0')  # pylint: disable=protected-access
  out = str(tmp_path / 'out')
  result = _rehearse(
      python_m,
      inputs,
      out,
      '004.1',
      '--rehearse_sizes=tiny',
      '--tasks=mrpc:1',
      f'--squad_dir={squad}',
  )
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  columns = {'SQuAD 1.1 EM', 'SQuAD 1.1 F1', 'SQuAD 2.0 EM', 'SQuAD 2.0 F1'}
  for row in _cells(_table(out, '004.1')).values():
    assert columns <= set(row)
  logs = _vm_job_logs(out)
  assert len([log for log in logs if 'squad11_004_script' in log]) == 2


@pytest.mark.slow
@pytest.mark.hours  # the gpu include's sizes (hidden 256): 20 minutes here
def test_the_gpu_scale_rehearses_here_in_float16_on_one_device(
    python_m, inputs, tmp_path
):
  corpus, vocab, glue = inputs
  out = tmp_path / 'out'
  result = python_m(
      [
          'experiments.regenerate',
          '--table=004.1',
          '--scale=gpu',
          '--rehearse',
          f'--corpus={corpus}',
          f'--vocab_file={vocab}',
          f'--glue_dir={glue}',
          '--tasks=mrpc:1',
          f'--out={out}',
      ],
      timeout=3000,
  )
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  table = _table(str(out), '004.1')
  assert {row['row'] for row in table['rows']} == {
      run.row for run in registry.get('004.1').runs
  }
  assert 'A rehearsal of --scale=gpu on this machine' in table['header']
  # Every pretraining ran at the gpu include's sizes, in float16 with a
  # dynamic loss scale, on one device.
  params = glob.glob(str(out / 'rehearsal' / 'runs' / '*' / 'params.yaml'))
  assert len(params) == 2
  for path in params:
    text = open(path).read()
    assert 'mixed_precision_dtype: float16' in text
    assert 'loss_scale: dynamic' in text
  configs = glob.glob(
      str(out / 'rehearsal' / 'runs' / '*' / 'operative_config.gin')
  )
  for path in configs:
    assert 'encoder.hidden_size = 256' in open(path).read()


# Another fake of the Cloud TPU CLI, written apart from fake_gcloud.py and
# as small as the documented behaviour allows: one home per VM, no workers,
# no faults. A rehearsal must work against it too.
_OTHER_GCLOUD = """#!{python}
import json, os, shutil, subprocess, sys
args = sys.argv[1:]
root = os.path.join(os.environ['FAKE_GCLOUD_ROOT'], 'other')
os.makedirs(root, exist_ok=True)
words = [a for a in args if not a.startswith('--')]
flags = dict(a[2:].partition('=')[::2] for a in args if a.startswith('--'))
if words[:2] == ['config', 'get-value']:
  print('other-project')
  sys.exit(0)
verb, name = words[3], (words[4] if len(words) > 4 else '')
if verb == 'scp':
  name = words[5].split(':')[0]
state = os.path.join(root, name + '.json')
home = os.path.join(root, name + '.home')
if verb == 'create':
  os.makedirs(home, exist_ok=True)
  json.dump(dict(state='READY', acceleratorType=flags['accelerator-type']),
            open(state, 'w'))
elif verb == 'describe':
  if not os.path.exists(state):
    sys.stderr.write('ERROR: (gcloud) NOT_FOUND: ' + name + '\\n')
    sys.exit(1)
  vm = json.load(open(state))
  print(vm['state'] + '\\t' + vm['acceleratorType'])
elif verb == 'delete':
  os.remove(state)
  shutil.rmtree(home)
elif verb == 'scp':
  shutil.copy(words[4], os.path.join(home, words[5].split(':', 1)[1]))
elif verb == 'ssh':
  env = dict(os.environ, HOME=home)
  sys.exit(subprocess.call(['bash', '-c', flags['command']], cwd=home,
                           env=env))
else:
  sys.stderr.write('ERROR: unsupported ' + verb + '\\n')
  sys.exit(1)
"""


@pytest.mark.slow
@pytest.mark.hours
def test_a_rehearsal_runs_against_another_fake_gcloud(
    python_m, inputs, tmp_path
):
  other = tmp_path / 'gcloud'
  other.write_text(_OTHER_GCLOUD.format(python=sys.executable))
  other.chmod(0o755)
  out = str(tmp_path / 'out')
  result = _rehearse(
      python_m,
      inputs,
      out,
      '004.1',
      '--rehearse_sizes=tiny',
      '--tasks=mrpc:1',
      f'--rehearse_gcloud={other}',
  )
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  assert set(_cells(_table(out, '004.1'))) == {
      run.row for run in registry.get('004.1').runs
  }
  homes = glob.glob(os.path.join(out, 'rehearsal', 'vms', 'other', '*.home'))
  assert [os.path.basename(home) for home in homes] == ['rehearsal-a.home']
