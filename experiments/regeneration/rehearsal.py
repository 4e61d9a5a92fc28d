"""The stand-ins of a rehearsed paper-scale launch (--rehearse).

The launch's own code path runs against `fake_gcloud.py`; what stands in is
chosen here, in the commands sent, never by the fake: a local bucket, capped
steps and batches, records from --corpus, cut GLUE and SQuAD, and
`--strategy=cpu --mixed_precision=float32` (bfloat16 is slow on CPUs).
"""

import dataclasses
import json
import os
import sys
from typing import Dict, Iterable, Optional, Sequence

import tensorflow as tf

from official_repro.data import create_pretraining_data
from official_repro.data import glue as glue_data
from official_repro.data import records as records_lib
from official_repro.data import tokenization

TRAIN_STEPS = 3
PRETRAIN_BINDINGS = (
    'pretrain_data.train_batch_size=2',
    'pretrain_data.eval_batch_size=2',
    'experiment.steps_per_loop=1',
    'experiment.checkpoint_interval=1',
    'experiment.validation_steps=1',
    'experiment.max_to_keep=10',
    'optimization.warmup_steps=1',
    # One seed and op determinism, so that a rehearsal preempted mid-run
    # gives the table of one that was not (a run resumed from a checkpoint
    # continues the same random streams).
    'experiment.seed=1',
    'experiment.deterministic=True',
)
# At the papers' sizes, one checkpoint per run: a Large model's with its
# optimizer slots is about 5 GB, and a table's runs share this disk.
PAPER_SIZE_BINDINGS = ('experiment.max_to_keep=1',)
FINETUNE_FLAGS = (
    '--gin_param=run_protocol.num_runs=1',
    '--gin_param=finetuning.num_epochs=1',
    '--gin_param=finetuning.train_batch_size=4',
    '--gin_param=finetuning.eval_batch_size=4',
)
RUN_TPU_FLAGS = (
    '--strategy=cpu',
    '--mixed_precision=float32',
    '--skip_install',
    '--project=rehearsal-project',
)
# The TPU software version a rehearsal names for multi-host slices (the fake
# creates their hosts; it installs nothing).
POD_VERSION = 'tpu-vm-tf-2.20.0-pod-pjrt'
SIZES = dict(paper=(), tiny=('gin/regenerate/tiny.gin',))
# Fine-tuning at tiny sizes: the include's 128 positions (SQuAD's cells ask
# for up to 512).
TINY_FINETUNE_FLAGS = ('--gin_param=finetuning.max_seq_length=128',)
_TRAIN_ROWS = 8
_DEV_ROWS = 8
_SQUAD_QUESTIONS = 8


def write_gcloud(bin_dir: str, gcloud: Optional[str] = None) -> str:
  """A `gcloud` in `bin_dir` that runs `gcloud` or this package's fake."""
  tf.io.gfile.makedirs(bin_dir)
  fake = gcloud or os.path.join(os.path.dirname(__file__), 'fake_gcloud.py')
  command = f'exec "{sys.executable}" "{fake}" "$@"'
  if gcloud:
    command = f'exec "{gcloud}" "$@"'
  path = os.path.join(bin_dir, 'gcloud')
  with tf.io.gfile.GFile(path, 'w') as f:
    f.write(f'#!/bin/sh\n{command}\n')
  os.chmod(path, 0o755)  # A local shim: PATH needs an executable file.
  return bin_dir


def environment(root: str, bin_dir: str, faults: Optional[str]) -> Dict:
  """run_tpu.sh's environment: the fake first on PATH, its state in root."""
  env = dict(os.environ, FAKE_GCLOUD_ROOT=os.path.join(root, 'vms'))
  env['PATH'] = f'{bin_dir}{os.pathsep}{env["PATH"]}'
  env.pop('FAKE_GCLOUD_FAULTS', None)
  if faults:
    env['FAKE_GCLOUD_FAULTS'] = faults
  return env


def _head(source: str, target: str, rows: int, header: bool) -> None:
  with tf.io.gfile.GFile(source) as f:
    lines = [line for _, line in zip(range(rows + int(header)), f)]
  with tf.io.gfile.GFile(target, 'w') as f:
    f.write(''.join(lines))


def slice_glue(glue_dir: str, out_dir: str, tasks: Iterable[str]) -> str:
  """`out_dir` with the first few rows of each task's splits."""
  for task in tasks:
    spec = glue_data.get_task_spec(task)
    source = os.path.join(glue_dir, spec.directory)
    target = os.path.join(out_dir, spec.directory)
    tf.io.gfile.makedirs(target)
    header = task != 'cola'
    for split in spec.splits:
      rows = _TRAIN_ROWS if split == 'train' else _DEV_ROWS
      _head(
          os.path.join(source, f'{split}.tsv'),
          os.path.join(target, f'{split}.tsv'),
          rows,
          header,
      )
  return out_dir


def _slice_squad_file(source: str, target: str) -> None:
  with tf.io.gfile.GFile(source) as f:
    data = json.load(f)
  kept, questions = [], 0
  for article in data['data']:
    paragraphs = []
    for paragraph in article['paragraphs']:
      qas = paragraph['qas'][: _SQUAD_QUESTIONS - questions]
      if qas:
        paragraphs.append(dict(paragraph, qas=qas))
        questions += len(qas)
    if paragraphs:
      kept.append(dict(article, paragraphs=paragraphs))
    if questions >= _SQUAD_QUESTIONS:
      break
  with tf.io.gfile.GFile(target, 'w') as f:
    json.dump(dict(data, data=kept), f)


def slice_squad(squad_dir: str, out_dir: str, versions: Sequence[str]) -> str:
  """`out_dir` with a few questions of each version's train and dev file."""
  for version in versions:
    source = os.path.join(squad_dir, version)
    target = os.path.join(out_dir, version)
    tf.io.gfile.makedirs(target)
    for name in tf.io.gfile.listdir(source):
      if name.endswith('.json'):
        _slice_squad_file(
            os.path.join(source, name), os.path.join(target, name)
        )
  return out_dir


def build_records(
    corpus: str, vocab_file: str, root: str, keys: Iterable[str]
) -> Dict[str, str]:
  """{records key: records} built from `corpus` once per key.

  Records of another tokenizer (training would refuse them) are rebuilt.
  """
  paths = {}
  for key in sorted(set(keys)):
    length, masking = key.split('-')
    path = os.path.join(root, f'records-{key}')
    if not _current_records(path):
      create_pretraining_data.prepare_pretraining_data(
          [corpus],
          path,
          vocab_file=vocab_file,
          lower_case=True,
          document_mode='file',
          max_seq_length=int(length),
          masking=masking,
          dupe_factor=1,
          eval_fraction=0.2,
      )
    paths[key] = path
  return paths


def _current_records(path: str) -> bool:
  """Whether `path` holds complete records of this repository's tokenizer."""
  if not tf.io.gfile.exists(os.path.join(path, records_lib.METADATA_FILENAME)):
    return False
  metadata = records_lib.load_metadata(path)
  return metadata.get('tokenizer') == tokenization.TOKENIZER_NAME


def gpu_grid(settings, root: str):
  """The gpu scale's grid settings, rehearsed here: capped, float16."""
  return dataclasses.replace(
      settings,
      glue_dir=slice_glue(
          settings.glue_dir, os.path.join(root, 'data', 'glue'), settings.tasks
      ),
      reference_steps=2 * TRAIN_STEPS,
      tasks={task: 1.0 for task in settings.tasks},
      num_runs=1,
      pretrain_seeds=1,
      strategy='one_device',
      mixed_precision='float16',
      pretrain_bindings=PRETRAIN_BINDINGS[:2]
      + ('experiment.validation_steps=1',),
      finetune_flags=FINETUNE_FLAGS[2:],
  )
