"""cli.run: one line for a user's mistake, a traceback for a bug, signals."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from official_repro.common import cli

_SCRIPT = textwrap.dedent("""
    import sys, time
    from absl import flags
    from official_repro.common import cli
    flags.DEFINE_integer('count', 1, 'A count.', lower_bound=1)
    flags.DEFINE_string('action', 'ok', 'What main does.')

    def main(_):
      action = flags.FLAGS.action
      if action == 'user':
        raise cli.UserError('--input a.txt: no such file; give an existing '
                            'file.')
      if action == 'missing':
        raise FileNotFoundError('--vocab_file v.txt does not exist.')
      if action == 'bug':
        raise ValueError('an internal invariant broke')
      if action == 'sleep':
        print('ready', flush=True)
        time.sleep(60)
      if action == 'swallow':
        try:
          print('ready', flush=True)
          time.sleep(60)
        except BaseException:
          pass
        print('finished anyway', flush=True)
      if action == 'stuck':
        try:
          print('ready', flush=True)
          time.sleep(60)
        except BaseException:
          print('swallowed', flush=True)
        time.sleep(60)

    cli.run(main)
""")


def _start(*args):
  return subprocess.Popen(
      [sys.executable, '-c', _SCRIPT, *args],
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
  )


def _run(*args):
  process = _start(*args)
  out, err = process.communicate(timeout=60)
  return process.returncode, out, err


@pytest.mark.parametrize(
    'args, named',
    [
        (['--action=user'], '--input a.txt: no such file'),
        (['--action=missing'], '--vocab_file v.txt does not exist'),
        (['--count=0'], '--count'),
        (['--cuont=2'], 'cuont'),
        (['--count=two'], 'two'),
        (['b.gin'], 'unexpected argument(s) b.gin'),
    ],
)
def test_user_mistakes_are_one_line_with_status_2(args, named):
  status, _, err = _run(*args)
  assert status == cli.EXIT_USAGE
  lines = err.strip().splitlines()
  assert len(lines) == 1, lines
  assert ': error: ' in lines[0] and named in lines[0]


def test_a_bug_keeps_its_traceback():
  status, _, err = _run('--action=bug')
  assert status == 1
  assert 'Traceback' in err and 'an internal invariant broke' in err


@pytest.mark.parametrize('signal_number', [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_with_128_plus_its_number(signal_number):
  process = _start('--action=sleep')
  assert process.stdout.readline().strip() == 'ready'
  process.send_signal(signal_number)
  _, err = process.communicate(timeout=30)
  assert process.returncode == 128 + signal_number
  assert 'rerun the same command to resume' in err
  assert 'Traceback' not in err


def test_a_swallowed_signal_still_ends_nonzero():
  process = _start('--action=swallow')
  assert process.stdout.readline().strip() == 'ready'
  process.send_signal(signal.SIGINT)
  out, _ = process.communicate(timeout=30)
  assert 'finished anyway' in out
  assert process.returncode == 128 + signal.SIGINT


def test_a_second_signal_ends_the_process_at_once():
  process = _start('--action=stuck')
  assert process.stdout.readline().strip() == 'ready'
  process.send_signal(signal.SIGINT)
  assert process.stdout.readline().strip() == 'swallowed'
  process.send_signal(signal.SIGINT)
  _, err = process.communicate(timeout=30)
  assert process.returncode == 128 + signal.SIGINT
  assert 'second signal' in err


def test_missing_gin_bindings_names_each_binding():
  error = RuntimeError(
      'Required bindings for `pretrain_data` not provided in config: '
      "['train_batch_size', 'max_seq_length']\n  In call to configurable "
      "'experiment'"
  )
  message = cli.missing_gin_bindings(error)
  assert 'pretrain_data.train_batch_size' in message
  assert 'pretrain_data.max_seq_length' in message
  assert '\n' not in message


def test_missing_gin_bindings_leaves_other_runtime_errors():
  assert cli.missing_gin_bindings(RuntimeError('out of memory')) is None


def test_a_storage_that_refuses_is_one_line_other_errors_are_bugs():
  import errno  # pylint: disable=g-import-not-at-top

  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  full = OSError(errno.ENOSPC, 'No space left on device', '/data/out')
  assert cli.storage_failure(full).startswith(
      '/data/out: No space left on device'
  )
  read_only = OSError(errno.EROFS, 'Read-only file system', '/mnt/ro/x')
  assert 'Read-only file system' in cli.storage_failure(read_only)
  tf_full = tf.errors.ResourceExhaustedError(
      None, None, '/data/out/f; No space left on device'
  )
  assert cli.storage_failure(tf_full).startswith('/data/out/f; No space left')
  gcs = tf.errors.PermissionDeniedError(None, None, 'gs://b/x: 403 Forbidden')
  assert 'gs://b/x' in cli.storage_failure(gcs)
  memory = tf.errors.ResourceExhaustedError(None, None, 'OOM when allocating')
  assert cli.storage_failure(memory) is None
  assert cli.storage_failure(OSError(errno.ENOENT, 'gone', '/x')) is None
  assert cli.storage_failure(ZeroDivisionError()) is None
  unreachable = tf.errors.FailedPreconditionError(
      None,
      None,
      'Error executing an HTTP request: libcurl code 6\n\t when reading '
      'metadata of gs://b/run.index',
  )
  assert cli.storage_failure(unreachable).startswith(
      'gs://b/run.index: the storage cannot be reached (Error executing'
  )
  # The same error types without a remote path, or naming one without a
  # transport failure, are bugs, with a traceback.
  local = tf.errors.FailedPreconditionError(None, None, 'uninitialized x')
  assert cli.storage_failure(local) is None
  for error in (
      tf.errors.FailedPreconditionError(
          None, None, 'Cannot delete a non-empty directory gs://b/run'
      ),
      tf.errors.UnknownError(
          None, None, 'ValueError in py_function reading gs://b/x'
      ),
  ):
    assert cli.storage_failure(error) is None


# A line of `python -X importtime`, written when a module's import ends: one
# of a module inside TensorFlow's package comes while `import tensorflow`
# still runs (the package's own line comes last).
_TENSORFLOW_IMPORTING = re.compile(r'^import time: .*\| +tensorflow\.')


@pytest.mark.parametrize('signal_number', [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_tensorflow_imports_ends_the_command_at_once(
    signal_number, tmp_path
):
  """Not lost in an import that catches it (the command ran on before).

  The signal goes when the child's own stderr says TensorFlow is importing
  (`-X importtime`), not after a guessed delay; the timeouts only turn a
  hang into a failure. A command that ran on would print its counts.
  """
  from official_repro.training import gin_utils  # pylint: disable=g-import-not-at-top

  env = dict(os.environ)
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)
  with open(tmp_path / 'stdout.txt', 'w+') as stdout:
    process = subprocess.Popen(
        [
            sys.executable,
            '-X',
            'importtime',
            '-m',
            'official_repro.count_flops',
            '--gin_file=gin/papers/001_ale/electra_small.gin',
        ],
        cwd=gin_utils.REPO_ROOT,
        env=env,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    importing = threading.Event()

    def read_stderr():
      for line in process.stderr:
        lines.append(line)
        if _TENSORFLOW_IMPORTING.match(line):
          importing.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
      assert importing.wait(timeout=300), ''.join(lines)[-3000:]
      process.send_signal(signal_number)
      process.wait(timeout=300)
    finally:
      process.kill()
      process.wait()
      reader.join(timeout=60)
    stdout.seek(0)
    printed = stdout.read()
  stderr = ''.join(lines)
  assert process.returncode == 128 + signal_number, stderr[-3000:]
  assert 'while starting; nothing was written' in stderr
  assert 'Traceback' not in stderr
  assert not printed, printed


def test_a_path_of_the_wrong_kind_is_one_line_naming_it(tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  a_file = tmp_path / 'taken'
  a_file.write_text('x')
  failures = []
  for write in (
      lambda: tf.io.gfile.makedirs(str(a_file / 'run')),
      lambda: tf.io.gfile.GFile(str(a_file / 'run'), 'w').write('y'),
      lambda: open(a_file / 'run', 'w'),
  ):
    with pytest.raises(Exception) as caught:
      write()
    failures.append(cli.storage_failure(caught.value))
  assert all(
      f is not None and 'is a file where a folder is expected' in f
      for f in failures
  ), failures
  for read in (
      lambda: tf.io.gfile.GFile(str(tmp_path)).read(),
      lambda: open(tmp_path),
  ):
    with pytest.raises(Exception) as caught:
      read()
    assert cli.storage_failure(caught.value) == (
        f'{tmp_path} is a folder where a file is expected; give a file path.'
    )
  other = tf.errors.FailedPreconditionError(None, None, 'not initialized')
  assert cli.storage_failure(other) is None
