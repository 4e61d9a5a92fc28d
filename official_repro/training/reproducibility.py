"""Seeds, deterministic runs and the state a resumed run must restore.

`run_seed` fixes one seed per `model_dir` (`experiment.seed`, or drawn and
saved in `seed.json`) so a resumed run replays the same data and masks. With
`experiment.deterministic`, `configure` turns on op determinism and
`tf.random.Generator`-backed dropout and sampling; Keras keeps those
generators out of checkpoints, so `random_generators` collects them for the
trainer to checkpoint, and a resumed run ends as an uninterrupted one.
"""

import contextlib
import os
import random
from typing import Iterator, List, Optional, Tuple

from absl import logging
import tensorflow as tf
import tf_keras

# Private module: TF exports only `enable_op_determinism`; reading and undoing
# it (`configure` restores the previous state) have no public API.
from tensorflow.python.framework import config as tf_config  # pylint: disable=g-direct-tensorflow-import
from official_repro.common import cli
from official_repro.common import json_files

SEED_FILENAME = 'seed.json'
_GLOBAL_STEP_KEY = 'global_step/.ATTRIBUTES/VARIABLE_VALUE'


def run_seed(model_dir: str, seed: Optional[int]) -> int:
  """The seed of the run in `model_dir`, saved there on the first start.

  `seed` (`experiment.seed`) None uses the saved seed or draws one; another
  seed than the saved one is refused.
  """
  path = os.path.join(model_dir, SEED_FILENAME)
  if tf.io.gfile.exists(path):
    saved = json_files.read_json(path)['seed']
    if seed is not None and seed != saved:
      raise ValueError(
          f'experiment.seed={seed}, but the run in {model_dir} was started '
          f'with seed {saved} ({path}); resuming it with another seed would '
          f'replay other data. Use seed {saved} or a new --model_dir.'
      )
    return saved
  if seed is None:
    seed = random.SystemRandom().randrange(2**31)
  tf.io.gfile.makedirs(model_dir)
  json_files.write_json(path, dict(seed=seed))
  return seed


@contextlib.contextmanager
def configure(seed: int, deterministic: bool) -> Iterator[None]:
  """Seeds everything; optionally makes ops and random streams deterministic.

  With `deterministic`, op determinism and Keras' generator-backed random
  layers are on until the context exits (the previous state is restored).
  """
  tf_keras.utils.set_random_seed(seed)
  if not deterministic:
    yield
    return
  determinism_was_on = tf_config.is_op_determinism_enabled()
  generator_was_on = (
      tf_keras.backend.experimental.is_tf_random_generator_enabled()
  )
  tf.config.experimental.enable_op_determinism()
  tf_keras.backend.experimental.enable_tf_random_generator()
  try:
    yield
  finally:
    if not determinism_was_on:
      tf_config.disable_op_determinism()
    if not generator_was_on:
      tf_keras.backend.experimental.disable_tf_random_generator()


def random_generators(model: tf.Module) -> List[tf.random.Generator]:
  """The `tf.random.Generator`s of a model's random layers, in layer order.

  Created if not yet called, so a checkpoint restores them before the first
  step; empty unless `configure(deterministic=True)`.
  """
  base = tf_keras.__internal__.layers.BaseRandomLayer
  generators = []
  for module in [model, *model.submodules]:
    if not isinstance(module, base):
      continue
    # Private: tf_keras has no public access to a layer's RandomGenerator,
    # its lazy creation or the tf.random.Generator it wraps.
    rng = module._random_generator  # pylint: disable=protected-access
    rng._maybe_init()  # pylint: disable=protected-access
    generator = getattr(rng, '_generator', None)
    if generator is not None and not any(generator is g for g in generators):
      generators.append(generator)
  return generators


def checkpoint_step(path: str) -> int:
  """The global step a (readable) checkpoint holds."""
  return int(tf.train.load_checkpoint(path).get_tensor(_GLOBAL_STEP_KEY))


def _readable(path: str) -> Optional[str]:
  """None if every tensor of the checkpoint reads back, else the error."""
  try:
    reader = tf.train.load_checkpoint(path)
    for name in reader.get_variable_to_shape_map():
      reader.get_tensor(name)
  except (tf.errors.OpError, ValueError, IndexError) as error:
    return f'{type(error).__name__}: {str(error).splitlines()[0]}'
  return None


def latest_readable_checkpoint(
    model_dir: str, repoint: bool = True
) -> Tuple[Optional[str], int]:
  """`(path, step)` of the newest checkpoint that reads back, or `(None, 0)`.

  Unreadable newer ones are logged and skipped; with `repoint` the checkpoint
  state is pointed at the one returned, so that Orbit restores it.
  """
  state = tf.train.get_checkpoint_state(model_dir)
  if state is None:
    return None, 0
  candidates = list(state.all_model_checkpoint_paths) or [
      state.model_checkpoint_path
  ]
  if state.model_checkpoint_path not in candidates:
    candidates.append(state.model_checkpoint_path)
  skipped = []
  # `get_checkpoint_state` has already put `model_dir` in front of the
  # relative paths that the checkpoint state file holds.
  for index in range(len(candidates) - 1, -1, -1):
    path = candidates[index]
    error = _readable(path)
    if error is None:
      if skipped and repoint:
        tf.compat.v1.train.update_checkpoint_state(
            model_dir, path, all_model_checkpoint_paths=candidates[: index + 1]
        )
        logging.warning(
            'Resuming from %s; skipped the unreadable newer '
            'checkpoint(s): %s',
            path,
            '; '.join(skipped),
        )
      return path, checkpoint_step(path)
    skipped.append(f'{path} ({error})')
  raise cli.UserError(
      f'No checkpoint in {model_dir} reads back: '
      + '; '.join(skipped)
      + '. Remove them (or the whole --model_dir) to start afresh.'
  )
