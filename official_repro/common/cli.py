"""Entry points: a user's mistake is one line, a bug keeps its traceback.

Every command runs `cli.run(main)` instead of `absl.app.run(main)`: a bad
flag, `app.UsageError`, `UserError` or `FileNotFoundError`, and a storage
that refuses a write or a path of the wrong kind (`storage_failure`), print
one line `<command>: error: <message>` and exit with 2, as argparse; other
exceptions are bugs and keep their traceback. A `Stopped`, Ctrl-C or SIGTERM
(raised as `Interrupted` after `finally` blocks ran) prints one line and
exits with 128 + the signal number, also when the exception was swallowed;
a second signal ends the process at once.
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
  """A mistake in the command line, an input file or a setting (one line)."""


class Interrupted(BaseException):
  """SIGTERM reached the main thread (a BaseException, as KeyboardInterrupt)."""

  def __init__(self, signal_number: int):
    super().__init__(f'stopped by {signal.Signals(signal_number).name}')
    self.signal_number = signal_number


class Stopped(Exception):
  """A command stopped on a signal after saving its state (exit 128 + it)."""

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
  _say('error: ' + ' '.join(str(message).split()))
  sys.exit(EXIT_USAGE)


def _say(text) -> None:
  """Prints `<command>: <text>` to stderr."""
  print(f'{command_name()}: {text}', file=sys.stderr, flush=True)


def _parse_flags(argv: Sequence[str]) -> Sequence[str]:
  try:
    return flags.FLAGS(argv)
  except flags.Error as error:
    fail(error)


# Signals received by `run`'s handler, in order.
_received = []


def _on_signal(signal_number, frame):
  """Raises KeyboardInterrupt or Interrupted; a second signal ends at once."""
  del frame
  _received.append(signal_number)
  if len(_received) > 1:
    _say('stopped at once by a second signal.')
    # No public call ends a process without running cleanup (sys.exit
    # raises into the interrupted code); os._exit is the documented one.
    os._exit(128 + signal_number)  # pylint: disable=protected-access
  if signal_number == signal.SIGINT:
    raise KeyboardInterrupt
  raise Interrupted(signal_number)


def _stopped_while_starting(signal_number, frame):
  """Ends a command stopped before its `main` began: nothing was written."""
  del frame
  name = signal.Signals(signal_number).name
  _say(f'stopped by {name} while starting; nothing was written.')
  # At once, as `_on_signal`'s second signal (imports must not go on).
  os._exit(128 + signal_number)  # pylint: disable=protected-access


def stop_while_starting() -> None:
  """Ctrl-C or SIGTERM while a `python -m` command imports ends it at once."""
  if sys.argv[:1] == ['-m']:
    for number in (signal.SIGINT, signal.SIGTERM):
      signal.signal(number, _stopped_while_starting)


def run(
    main: Callable[[Sequence[str]], None], positional: bool = False
) -> None:
  """`absl.app.run(main)` with the failure handling of the module doc.

  Arguments besides the flags are refused (`refuse_positional`) unless
  `positional`.
  """

  def guarded(argv: Sequence[str]) -> None:
    previous = {
        number: signal.signal(number, _on_signal)
        for number in (signal.SIGINT, signal.SIGTERM)
    }
    try:
      if not positional:
        refuse_positional(argv)
      main(argv)
    except (UserError, app.UsageError, FileNotFoundError) as error:
      fail(error)
    except Stopped as stopped:
      _say(stopped)
      sys.exit(128 + stopped.signal_number)
    except Exception as error:  # pylint: disable=broad-except
      line = missing_gin_bindings(error) or storage_failure(error)
      if line is None:
        raise
      fail(line)
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
_FREE_SPACE = (
    'free space, or give a writable location (for gs://, check the '
    'credentials).'
)
# TensorFlow's errors of a file system that refuses (tf.io.gfile, gs://).
_STORAGE_ERRORS = (
    'ResourceExhaustedError',
    'PermissionDeniedError',
    'UnauthenticatedError',
)


def storage_failure(error: Exception) -> Optional[str]:
  """One line for a refusing storage or a path of the wrong kind, or None."""
  if isinstance(error, OSError) and error.errno in _STORAGE_ERRNOS:
    where = error.filename or ''
    return f'{where}: {error.strerror or error}; {_FREE_SPACE}'.lstrip(': ')
  if _is_tf_error(error, _STORAGE_ERRORS):
    message = _message(error)
    if type(error).__name__ == 'ResourceExhaustedError' and (
        'No space left' not in message and 'quota' not in message.lower()
    ):
      return None  # memory, not storage
    return f'{message.splitlines()[0][:300]}; {_FREE_SPACE}'
  remote = _remote_storage_failure(error)
  if remote is not None:
    return remote
  return _path_kind_failure(error)


# TensorFlow's file-system messages of a path of the wrong kind.
_NOT_A_FOLDER = re.compile(r'^(\S+?)(?: is not a directory|; Not a directory)')
_NOT_A_FILE = re.compile(r'^(\S+?); Is a directory')


def _path_kind_failure(error: Exception) -> Optional[str]:
  """One line for a file given where a folder goes, or the reverse, or None."""
  if isinstance(error, (NotADirectoryError, IsADirectoryError)):
    folder = isinstance(error, NotADirectoryError)
    path = error.filename or ''
  elif _is_tf_error(error, ('FailedPreconditionError',)):
    message = _message(error).strip()
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
  """One line for a remote storage that cannot be reached, or None."""
  if not _is_tf_error(error, _REMOTE_ERRORS):
    return None
  message = _message(error)
  path = _REMOTE_PATH.search(message)
  if path is None or not _TRANSPORT_FAILURE.search(message):
    return None
  return (
      f'{path.group(0).rstrip(".,;:")}: the storage cannot be reached '
      f'({message.splitlines()[0].strip()[:200]}); check the network and '
      'the credentials (GOOGLE_APPLICATION_CREDENTIALS, or `gcloud auth '
      'application-default login`).'
  )


def _message(error: Exception) -> str:
  """A TensorFlow error's message, or the error as text."""
  return getattr(error, 'message', None) or str(error)


def _is_tf_error(error: Exception, names: Sequence[str]) -> bool:
  """Whether `error` is one of TensorFlow's errors named `names`."""
  kind = type(error)
  return kind.__name__ in names and kind.__module__.startswith('tensorflow')


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
  _say(f'stopped by {name}; rerun the same command to resume.')
  sys.exit(128 + signal_number)


def require_flags(*names: str) -> None:
  """Refuses, when the flags are parsed, each of `names` not given or empty."""
  for name in names:
    flags.register_validator(name, bool, message=f'--{name} is required.')


def refuse_positional(argv: Sequence[str]) -> None:
  """Raises `UserError` when `argv` has arguments besides the program."""
  if len(argv) > 1:
    raise UserError(
        f'unexpected argument(s) {" ".join(argv[1:])}: this command takes '
        'flags only (--name=value); a flag given two values needs the flag '
        'twice (--gin_file=a.gin --gin_file=b.gin).'
    )
