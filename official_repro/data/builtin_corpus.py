"""A small English corpus that ships with every Python installation.

For a quickstart without downloads: the `pydoc_data.topics` help topics and
the standard library's docstrings (one document per module), prose only
(`prose_paragraphs`). Written for `document_mode='blank_line'`: documents
separated by a blank line, one paragraph a line.
"""

import ast
import inspect
import os
import re
import sysconfig
from typing import Iterator, List, Optional, Sequence

from pydoc_data import topics as pydoc_topics
import tensorflow as tf

from official_repro.common import json_files

TOPICS_FILENAME = 'pydoc_topics.txt'
DOCSTRINGS_FILENAME = 'stdlib_docstrings.txt'
_SKIPPED_DIRS = frozenset(
    'test tests idlelib lib2to3 site-packages dist-packages __pycache__ '
    'turtledemo ensurepip config-3 venv'.split()
)
_UNDERLINE = re.compile(r'^\s*([*=\-~^#+])\1{2,}\s*$')
_BULLET = re.compile(r'^[*+\-] ')
_SENTENCE_END = re.compile(r'[.!?]["\')\]]*$')


def write_builtin_corpus(
    output_dir: str,
    max_chars: int = 2_000_000,
    min_docstring_chars: int = 200,
    stdlib_dir: Optional[str] = None,
) -> List[str]:
  """Writes the pydoc topics and stdlib docstrings as a blank_line corpus.

  `output_dir` is any `tf.io.gfile` path; documents are added (topics first,
  then docstrings by module path) until `max_chars`. Returns the files written
  (none empty); ValueError when no document could be gathered.
  """
  tf.io.gfile.makedirs(output_dir)
  stdlib_dir = stdlib_dir or sysconfig.get_paths()['stdlib']
  budget = max_chars
  paths = []
  docstrings = _docstring_documents(stdlib_dir, min_docstring_chars)
  for filename, documents in (
      (TOPICS_FILENAME, _topic_documents()),
      (DOCSTRINGS_FILENAME, docstrings),
  ):
    kept = []
    for document in documents:
      size = sum(len(p) + 1 for p in document)
      if size > budget:
        break
      budget -= size
      kept.append(document)
    if kept:
      path = os.path.join(output_dir, filename)
      text = '\n\n'.join('\n'.join(document) for document in kept)
      json_files.write_text(path, text + '\n')
      paths.append(path)
  if not paths:
    raise ValueError(
        'write_builtin_corpus: found no pydoc topic and no '
        f'docstring of at least {min_docstring_chars} characters '
        f'under {stdlib_dir} within max_chars={max_chars}.'
    )
  return paths


def prose_paragraphs(text: str) -> List[str]:
  """The prose paragraphs of a docstring or help text, one line each.

  reST underlines and bullets are dropped; indented, `Name:`-over-indented,
  doctest and unterminated paragraphs are skipped.
  """
  paragraphs = []
  for block in re.split(r'\n\s*\n', inspect.cleandoc(text)):
    lines = [
        line.rstrip()
        for line in block.split('\n')
        if line.strip() and not _UNDERLINE.match(line)
    ]
    if not lines or lines[0][0].isspace():
      continue
    if lines[0].endswith(':') and len(lines) > 1 and lines[1][0].isspace():
      continue
    if any(line.lstrip().startswith(('>>>', '...', '$ ')) for line in lines):
      continue
    paragraph = _BULLET.sub('', ' '.join(line.strip() for line in lines))
    if _SENTENCE_END.search(paragraph) and any(c.isalpha() for c in paragraph):
      paragraphs.append(paragraph)
  return paragraphs


def _topic_documents() -> Iterator[List[str]]:
  for name in sorted(pydoc_topics.topics):
    paragraphs = prose_paragraphs(pydoc_topics.topics[name])
    if paragraphs:
      yield paragraphs


def _docstring_documents(
    stdlib_dir: str, min_docstring_chars: int
) -> Iterator[List[str]]:
  seen = set()
  for path in _stdlib_modules(stdlib_dir):
    paragraphs = []
    for docstring in _module_docstrings(path):
      if len(docstring) < min_docstring_chars or docstring in seen:
        continue
      seen.add(docstring)
      paragraphs.extend(prose_paragraphs(docstring))
    if paragraphs:
      yield paragraphs


def _stdlib_modules(stdlib_dir: str) -> Iterator[str]:
  """Public `.py` files under `stdlib_dir`, in sorted order."""
  # Through tf.io.gfile only to use one file API; like os.walk, it descends
  # only into the directories left in `dirs`, in their order.
  for root, dirs, files in tf.io.gfile.walk(stdlib_dir):
    dirs[:] = sorted(
        d
        for d in dirs
        if d not in _SKIPPED_DIRS
        and not d.startswith(('_', '.'))
        and not d.startswith('config-')
    )
    for name in sorted(files):
      if name.endswith('.py') and (
          name == '__init__.py' or not name.startswith('_')
      ):
        yield os.path.join(root, name)


def _module_docstrings(path: str) -> Iterator[str]:
  """The module's, then public definitions' docstrings (none if unparsable)."""
  with tf.io.gfile.GFile(path, 'rb') as f:
    # Decoded like a local text file read with encoding='utf-8' and
    # errors='replace', line endings included (universal newlines).
    source = f.read().decode('utf-8', errors='replace')
  source = source.replace('\r\n', '\n').replace('\r', '\n')
  try:
    tree = ast.parse(source, filename=path)
  except (SyntaxError, ValueError):
    return
  docstring = ast.get_docstring(tree)
  if docstring:
    yield docstring
  yield from _definition_docstrings(tree.body)


def _definition_docstrings(body: Sequence[ast.stmt]) -> Iterator[str]:
  for node in body:
    definitions = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    if not isinstance(node, definitions) or node.name.startswith('_'):
      continue
    docstring = ast.get_docstring(node)
    if docstring:
      yield docstring
    if isinstance(node, ast.ClassDef):
      yield from _definition_docstrings(node.body)
