"""A test-only command: `python -m tests.plugins.two_streams CODE LINES...`.

Prints each LINE to stdout, then `error line` to stderr, and exits CODE.
"""

import sys

if __name__ == '__main__':
  for line in sys.argv[2:]:
    print(line, flush=True)
  sys.stderr.write('error line\n')
  sys.exit(int(sys.argv[1]))
