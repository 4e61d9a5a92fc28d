"""The package imports neither PyTorch nor transformers (tests may)."""

import ast
import os

from official_repro.training import gin_utils

_FORBIDDEN = ('torch', 'transformers')


def _imported_modules(path):
  with open(path) as f:
    tree = ast.parse(f.read(), path)
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
      yield node.module


def test_official_repro_imports_neither_torch_nor_transformers():
  package = os.path.join(gin_utils.REPO_ROOT, 'official_repro')
  found = []
  checked = 0
  for root, _, names in os.walk(package):
    for name in names:
      if name.endswith('.py'):
        path = os.path.join(root, name)
        checked += 1
        found += [
            (path, module)
            for module in _imported_modules(path)
            if module.split('.')[0] in _FORBIDDEN
        ]
  assert checked > 100
  assert not found, found


def test_the_check_sees_an_import_inside_a_function(tmp_path):
  source = tmp_path / 'module.py'
  source.write_text(
      'def f():\n  import torch.nn\n  from transformers import x\n'
  )
  assert set(_imported_modules(str(source))) == {'torch.nn', 'transformers'}
