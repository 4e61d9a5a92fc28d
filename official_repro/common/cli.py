"""Entry points: a user's mistake is one line, a bug keeps its traceback.

Every command of the repository starts with `cli.run(main)` instead of
`absl.app.run(main)`. It differs in what a failure prints:

  * a bad flag (unknown, unparsable, or refused by a validator), an
    `app.UsageError`, a `UserError` (a mistake in a flag, a file or a
    setting that the user fixes) or a `FileNotFoundError` (a path the user
    gave; the project's messages name the flag) prints exactly one line,
    `<command>: error: <message>`, to stderr and exits with status 2 (the
    status of a usage error, as argparse's); no traceback;
  * a storage that refuses a write (full, over quota, read-only, no
    permission, gs:// without credentials: `storage_failure`) is the
    machine's doing, not a bug: one line naming the path, status 2;
  * any other exception is a bug and propagates with its traceback;
  * a `Stopped` (training that saved a checkpoint on a signal) prints its
    one line, how to resume, and exits with 128 + the signal's number;
  * SIGTERM raises `Interrupted` in the main thread, as Ctrl-C raises
    `KeyboardInterrupt`; both print one line and exit with 128 + the
    signal's number, after the `finally` blocks and context managers of the
    interrupted code have run (temporary files removed, checkpoints left as
    they were), so that the same command resumes. A signal whose exception
    was swallowed (Python ignores exceptions raised in finalizers, and
    TensorFlow's iterators run some) still ends the command with that
    status when `main` returns, and a second Ctrl-C or SIGTERM ends the
    process at once.

Before TensorFlow is imported the package sets `TF_CPP_MIN_LOG_LEVEL`
unless it is set (`official_repro/__init__.py`): TensorFlow's C++ start-up
messages would otherwise surround the one line.
"""

import errno
import os
import re
import signal
import sys
from typing import Callable, NoReturn, Optional, Sequence

from absl import app
from absl import flags

# The exit status of a usage error: a flag, file or setting to fix.
EXIT_USAGE = 2


class UserError(ValueError):
  """A mistake in the command line, an input file or a setting.

  Its message names what is wrong and how to fix it; `cli.run` prints it as
  one line. A `ValueError`, so that callers catching those still do.
  """


class Interrupted(BaseException):
  """SIGTERM reached the main thread.

  SIGTERM reached the main thread (Ctrl-C raises KeyboardInterrupt); a
  BaseException, as KeyboardInterrupt, so that `except Exception` does not
  swallow it.
  """

  def __init__(self, signal_number: int):
    super().__init__(f'stopped by {signal.Signals(signal_number).name}')
    self.signal_number = signal_number


class Stopped(Exception):
  """A command stopped on a signal after saving its state.

  `run` prints its message (which says how to resume) as one line and exits
  with 128 + `signal_number`, as a shell reports a process the signal ended.
  """

  def __init__(self, signal_number: int, message: str):
    super().__init__(message)
    self.signal_number = signal_number


def command_name(argv0: Optional[str] = None) -> str:
  """'python -m <module>' spelled as the module, or the script's name."""
  main = sys.modules.get('__main__')
  spec = getattr(main, '__spec__', None)
  if spec is not None and spec.name:
    return spec.name.removesuffix('.__main__')
  return os.path.basename(argv0 or sys.argv[0])


def fail(message: str) -> NoReturn:
  """Prints `<command>: error: <message>` (one line) and exits with 2."""
  line = ' '.join(str(message).split())
  print(f'{command_name()}: error: {line}', file=sys.stderr, flush=True)
  sys.exit(EXIT_USAGE)


def _parse_flags(argv: Sequence[str]) -> Sequence[str]:
  try:
    return flags.FLAGS(argv)
  except flags.Error as error:
    fail(error)


# Signals received by `run`'s handler, in order.
_received = []


def _on_signal(signal_number, frame):
  """Handles SIGINT and SIGTERM: an exception first, then the process ends.

  Raises `KeyboardInterrupt` (SIGINT) or `Interrupted` (SIGTERM) the
  first time; ends the process at once the second time.
  """
  del frame
  _received.append(signal_number)
  if len(_received) > 1:
    print(
        f'{command_name()}: stopped at once by a second signal.',
        file=sys.stderr,
        flush=True,
    )
    os._exit(128 + signal_number)  # pylint: disable=protected-access
  if signal_number == signal.SIGINT:
    raise KeyboardInterrupt
  raise Interrupted(signal_number)


def _stopped_while_starting(signal_number, frame):
  """Ends a command stopped before its `main` began: nothing was written."""
  del frame
  name = signal.Signals(signal_number).name
  print(
      f'{command_name()}: stopped by {name} while starting; nothing was '
      'written.',
      file=sys.stderr,
      flush=True,
  )
  os._exit(128 + signal_number)  # pylint: disable=protected-access


def stop_while_starting() -> None:
  """Ctrl-C or SIGTERM during a command's imports ends it at once.

  Importing TensorFlow and Model Garden takes seconds, and code run while
  importing may catch the `KeyboardInterrupt` that Python's own handler
  raises, so a Ctrl-C then was lost and the command ran on. The packages
  call this when they are imported for `python -m <module>` (Python sets
  `sys.argv[0]` to '-m' while it imports the module's packages), before
  anything else; `run` installs its own handlers when `main` starts.
  """
  if sys.argv[:1] == ['-m']:
    for number in (signal.SIGINT, signal.SIGTERM):
      signal.signal(number, _stopped_while_starting)


def run(main: Callable[[Sequence[str]], None]) -> None:
  """`absl.app.run(main)` with the failure handling of the module doc."""

  def guarded(argv: Sequence[str]) -> None:
    previous = {
        number: signal.signal(number, _on_signal)
        for number in (signal.SIGINT, signal.SIGTERM)
    }
    try:
      main(argv)
    except (UserError, app.UsageError, FileNotFoundError) as error:
      fail(error)
    except Stopped as stopped:
      print(f'{command_name()}: {stopped}', file=sys.stderr, flush=True)
      sys.exit(128 + stopped.signal_number)
    except RuntimeError as error:
      missing = missing_gin_bindings(error)
      if missing is None:
        raise
      fail(missing)
    except Exception as error:  # pylint: disable=broad-except
      failure = storage_failure(error)
      if failure is None:
        raise
      fail(failure)
    except KeyboardInterrupt:
      _stopped(signal.SIGINT)
    except Interrupted as stopped:
      _stopped(stopped.signal_number)
    finally:
      for number, handler in previous.items():
        signal.signal(number, handler)
    if _received:
      _stopped(_received[0])

  app.run(guarded, flags_parser=_parse_flags)


# errno values of a storage that refuses a write: no space, over quota,
# read-only, no permission.
_STORAGE_ERRNOS = (
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EROFS,
    errno.EACCES,
    errno.EPERM,
)
# TensorFlow's errors of a file system that refuses (tf.io.gfile, gs://).
_STORAGE_ERRORS = (
    'ResourceExhaustedError',
    'PermissionDeniedError',
    'UnauthenticatedError',
)


def storage_failure(error: Exception) -> Optional[str]:
  """One line for a storage that refuses, or a path of the wrong kind, or None.

  A path of the wrong kind is a file where a folder goes, or the reverse.
  Neither is a bug (the storage is the machine's doing, the path the
  user's): the command stops with one line naming the path (every writer
  writes to a temporary name first, so what was finished before stays as it
  was). Other exceptions get None.
  """
  if isinstance(error, OSError) and error.errno in _STORAGE_ERRNOS:
    where = error.filename or ''
    return (
        f'{where}: {error.strerror or error}; free space, or give a '
        'writable location (for gs://, check the credentials).'
    ).lstrip(': ')
  if type(error).__name__ in _STORAGE_ERRORS and type(
      error
  ).__module__.startswith('tensorflow'):
    message = getattr(error, 'message', None) or str(error)
    if type(error).__name__ == 'ResourceExhaustedError' and (
        'No space left' not in message and 'quota' not in message.lower()
    ):
      return None  # memory, not storage
    return (
        f'{message.splitlines()[0][:300]}; free space, or give a writable '
        'location (for gs://, check the credentials).'
    )
  remote = _remote_storage_failure(error)
  if remote is not None:
    return remote
  return _path_kind_failure(error)


# TensorFlow's file-system messages of a path of the wrong kind.
_NOT_A_FOLDER = re.compile(r'^(\S+?)(?: is not a directory|; Not a directory)')
_NOT_A_FILE = re.compile(r'^(\S+?); Is a directory')


def _path_kind_failure(error: Exception) -> Optional[str]:
  """One line for a file given where a folder goes, or a folder for a file.

  Python raises `NotADirectoryError` / `IsADirectoryError`, tf.io.gfile
  `FailedPreconditionError` ('<path> is not a directory', '<path>; Is a
  directory'); anything else gets None.
  """
  if isinstance(error, (NotADirectoryError, IsADirectoryError)):
    folder = isinstance(error, NotADirectoryError)
    path = error.filename or ''
  elif type(error).__name__ == 'FailedPreconditionError' and type(
      error
  ).__module__.startswith('tensorflow'):
    message = (getattr(error, 'message', None) or str(error)).strip()
    match = _NOT_A_FOLDER.match(message) or _NOT_A_FILE.match(message)
    if match is None:
      return None
    folder = match.re is _NOT_A_FOLDER
    path = match.group(1)
  else:
    return None
  if folder:
    return (
        f'{path} (or a folder above it) is a file where a folder is '
        'expected; give a folder path, or move the file away.'
    )
  return f'{path} is a folder where a file is expected; give a file path.'


# TensorFlow's errors of a remote file system that cannot be reached, and
# what their messages say about the transport (any other error that names a
# gs:// path, a failing tf.data function or a TPU abort, keeps its
# traceback).
_REMOTE_ERRORS = (
    'FailedPreconditionError',
    'UnavailableError',
    'DeadlineExceededError',
)
_TRANSPORT_FAILURE = re.compile(
    r'Error executing an HTTP request|libcurl|Could not resolve host|'
    r'Timeout was reached|Couldn.t connect'
)
# A remote path in TensorFlow's file-system messages ('... of gs://b/x').
_REMOTE_PATH = re.compile(r'\b(?:gs|s3|hdfs)://\S+')


def _remote_storage_failure(error: Exception) -> Optional[str]:
  """One line for a remote storage that cannot be reached, or None.

  Without credentials or a network, TensorFlow's GCS file system fails with
  `FailedPreconditionError` or `UnavailableError` ("Error executing an HTTP
  request ... when reading metadata of gs://...").
  """
  if type(error).__name__ not in _REMOTE_ERRORS or not type(
      error
  ).__module__.startswith('tensorflow'):
    return None
  message = getattr(error, 'message', None) or str(error)
  path = _REMOTE_PATH.search(message)
  if path is None or not _TRANSPORT_FAILURE.search(message):
    return None
  return (
      f'{path.group(0).rstrip(".,;:")}: the storage cannot be reached '
      f'({message.splitlines()[0].strip()[:200]}); check the network and '
      'the credentials (GOOGLE_APPLICATION_CREDENTIALS, or `gcloud auth '
      'application-default login`).'
  )


_MISSING_BINDINGS = re.compile(
    r'Required bindings for `([\w.]+)` not provided in config: \[(.*?)\]'
)


def missing_gin_bindings(error: Exception) -> Optional[str]:
  """A one-line message for gin's missing-binding error, or None."""
  match = _MISSING_BINDINGS.match(str(error))
  if match is None:
    return None
  configurable = match.group(1)
  names = [
      configurable + '.' + name.strip(" '")
      for name in match.group(2).split(',')
  ]
  return (
      f'gin: {", ".join(names)} not set; bind it in a --gin_file or '
      f'with --gin_param={names[0]}=<value>.'
  )


def _stopped(signal_number: int) -> NoReturn:
  name = signal.Signals(signal_number).name
  print(
      f'{command_name()}: stopped by {name}; rerun the same command to '
      'resume.',
      file=sys.stderr,
      flush=True,
  )
  sys.exit(128 + signal_number)


def refuse_positional(argv: Sequence[str]) -> None:
  """Raises `UserError` when `argv` has arguments besides the program."""
  if len(argv) > 1:
    raise UserError(
        f'unexpected argument(s) {" ".join(argv[1:])}: this command takes '
        'flags only (--name=value); a flag given two values needs the flag '
        'twice (--gin_file=a.gin --gin_file=b.gin).'
    )
