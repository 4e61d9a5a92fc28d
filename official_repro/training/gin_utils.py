"""Parsing gin files with clear errors, and saving the operative config."""

import importlib
import os
from typing import Sequence

import gin
import tensorflow as tf

from official_repro.common import json_files

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

# Modules that define gin configurables outside the registries; with the
# registered backbones and objectives (every module of their packages) they
# are imported before parsing, so that an unknown name really is a typo.
_CONFIGURABLE_MODULES = (
    'official_repro.data.pretrain_dataloader',
    'official_repro.optimization.optimizer_config',
    'official_repro.training.experiment',
)


class GinConfigError(ValueError):
  """A gin file or binding could not be applied."""


def register_configurables() -> None:
  """Imports every module that defines gin names (see above)."""
  # pylint: disable=g-import-not-at-top
  from official_repro.modeling.networks import encoders
  from official_repro.tasks import objectives
  # pylint: enable=g-import-not-at-top
  for module in _CONFIGURABLE_MODULES:
    importlib.import_module(module)
  encoders.backbone_names()
  objectives.load_builtin_objectives()


def _is_gfile_file(path: str) -> bool:
  return tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path)


# Gin opens files with `open` unless another reader is registered: this one
# reads gin files (and their includes) on gs:// and other filesystems.
gin.config.register_file_reader(tf.io.gfile.GFile, _is_gfile_file)


def parse_config(gin_files: Sequence[str], gin_params: Sequence[str]) -> None:
  """Parses gin files then bindings, like `gin.parse_config_files_and_bindings`.

  `include` paths resolve against the including file's folder and the
  repository root, so `include 'gin/sizes/small.gin'` works from anywhere.

  Args:
    gin_files: paths of gin files (--gin_file).
    gin_params: individual bindings (--gin_param).

  Raises:
    GinConfigError: naming the file or binding and gin's reason.
  """
  register_configurables()
  gin.add_config_file_search_path(REPO_ROOT)
  for path in gin_files:
    if not tf.io.gfile.exists(path):
      raise GinConfigError(f'--gin_file {path}: no such file.')
    gin.add_config_file_search_path(os.path.dirname(
        path if '://' in path else os.path.abspath(path)))
    try:
      gin.parse_config_file(path)
    except (ValueError, IOError, SyntaxError) as error:
      raise GinConfigError(f'--gin_file {path}: {error}') from error
  for binding in gin_params:
    try:
      gin.parse_config(binding)
    except (ValueError, SyntaxError) as error:
      raise GinConfigError(f'--gin_param {binding!r}: {error}') from error


def save_config(model_dir: str, filename: str, operative: bool) -> str:
  """Writes the operative (or full) gin config into `model_dir`.

  Returns:
    The written path.
  """
  text = gin.operative_config_str() if operative else gin.config_str()
  path = os.path.join(model_dir, filename)
  tf.io.gfile.makedirs(model_dir)
  temporary = json_files.temporary_path(path)
  with tf.io.gfile.GFile(temporary, 'w') as f:
    f.write(text)
  tf.io.gfile.rename(temporary, path, overwrite=True)
  return path
