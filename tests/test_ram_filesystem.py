"""The whole chain on TensorFlow's in-memory `ram://` filesystem.

Corpus -> records -> 2 pretraining steps -> exported encoder -> 2 GLUE MRPC
fine-tuning steps, with every input and output on `ram://`, which only
`tf.io.gfile` (and TensorFlow's own file ops) can reach, as on `gs://` on a
Cloud TPU VM; the gin file and its relative include are on `ram://` too.
The test runs in an empty local working directory that must stay
empty: `os.makedirs('ram://x')` and `open('ram://x/f', 'w')` would create a
local `ram:` directory there instead of failing.
"""

import os
import random

import gin
import numpy as np
import pytest
import tensorflow as tf

from official_repro.data import create_pretraining_data
from official_repro.data import records
from official_repro.modeling.networks import export_layout
from official_repro.modeling.networks import pretrained
from official_repro.tasks import finetuning_schedule
from official_repro.training import experiment
from official_repro.training import finetuning
from official_repro.training import gin_utils

_WORDS = (
    'the quick brown fox jumps over a lazy dog while birds sing in the '
    'old trees near the river and children play games on green grass '
    'under bright summer skies'
).split()


def _write(path, text):
  with tf.io.gfile.GFile(path, 'w') as f:
    f.write(text)


def _sentence(rng, length):
  return ' '.join(rng.choice(_WORDS) for _ in range(length))


def _write_corpus(directory, rng, num_documents=30):
  documents = []
  for _ in range(num_documents):
    documents.append(
        ' '.join(
            _sentence(rng, rng.randint(4, 12)).capitalize() + '.'
            for _ in range(rng.randint(4, 9))
        )
    )
  tf.io.gfile.makedirs(directory)
  _write(os.path.join(directory, 'corpus.txt'), '\n\n'.join(documents) + '\n')


def _write_mrpc(glue_dir, rng):
  """MRPC with 8 train rows (2 steps of batch 4) and 4 dev rows."""
  directory = os.path.join(glue_dir, 'MRPC')
  tf.io.gfile.makedirs(directory)
  for split, rows in (('train', 8), ('dev', 4)):
    lines = ['\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String']
    lines += [
        f'{i % 2}\t{i}\t{i + 100}\t{_sentence(rng, 6)}\t' f'{_sentence(rng, 6)}'
        for i in range(rows)
    ]
    _write(os.path.join(directory, f'{split}.tsv'), '\r\n'.join(lines))


def _write_gin(gin_dir):
  """A gin file on ram:// including a repository file and a sibling."""
  tf.io.gfile.makedirs(gin_dir)
  _write(
      os.path.join(gin_dir, 'run.gin'),
      "include 'gin/sizes/tiny.gin'\n"
      "include 'gin/pretrain/masked_lm.gin'\n"
      "include 'steps.gin'\n",
  )
  _write(
      os.path.join(gin_dir, 'steps.gin'),
      'experiment.train_steps = 2\n'
      'experiment.steps_per_loop = 1\n'
      'experiment.checkpoint_interval = 1\n',
  )
  return os.path.join(gin_dir, 'run.gin')


def _pretrain(gin_file, records_dir, model_dir):
  gin.clear_config()
  try:
    gin_utils.parse_config(
        [gin_file],
        [
            f'pretrain_data.input_path = {records_dir!r}',
            'pretrain_data.max_seq_length = 32',
            'pretrain_data.train_batch_size = 8',
            'optimization.learning_rate = 1e-3',
        ],
    )
    params, settings = experiment.experiment_config()
    return experiment.run(
        params, settings, tf.distribute.get_strategy(), model_dir, 'train'
    )
  finally:
    gin.clear_config()


def _finetune_mrpc(encoder, glue_dir, model_dir):
  gin.clear_config()
  try:
    schedule = finetuning_schedule.FinetuningSchedule(
        task='mrpc',
        learning_rate=1e-3,
        train_batch_size=4,
        num_epochs=1,
        warmup_fraction=0.1,
        layerwise_lr_decay=0.8,
        max_seq_length=32,
    )
    protocol = finetuning_schedule.RunProtocol(
        num_runs=1, aggregation='median', selection='best'
    )
    return finetuning.run(
        schedule,
        protocol,
        encoder,
        glue_dir,
        model_dir,
        tf.distribute.get_strategy(),
    )
  finally:
    gin.clear_config()


@pytest.mark.slow
def test_corpus_to_finetuning_on_ram_filesystem(ram_dir, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  rng = random.Random(0)
  corpus_dir = os.path.join(ram_dir, 'corpus')
  records_dir = os.path.join(ram_dir, 'records')
  model_dir = os.path.join(ram_dir, 'pretrain')
  glue_dir = os.path.join(ram_dir, 'glue')
  finetune_dir = os.path.join(ram_dir, 'finetune')
  _write_corpus(corpus_dir, rng)
  _write_mrpc(glue_dir, rng)

  metadata = create_pretraining_data.prepare_pretraining_data(
      [corpus_dir],
      records_dir,
      vocab_size=120,
      max_seq_length=32,
      eval_fraction=0.1,
      seed=3,
  )
  assert metadata['source']['inputs'] == [corpus_dir]
  assert records.load_metadata(records_dir) == metadata
  assert metadata['splits']['train']['num_examples'] > 0

  gin_file = _write_gin(os.path.join(ram_dir, 'gin'))
  result = _pretrain(gin_file, records_dir, model_dir)
  assert result['global_step'] == 2
  assert result['checkpoint'].startswith(model_dir)
  assert result['exported_encoder'].startswith(
      os.path.join(model_dir, export_layout.ENCODER_SUBDIR)
  )
  for name in (
      'config.gin',
      'operative_config.gin',
      'params.yaml',
      'model_config.json',
      'checkpoint',
  ):
    assert tf.io.gfile.exists(os.path.join(model_dir, name)), name
  assert tf.io.gfile.glob(os.path.join(model_dir, 'train', 'events.*'))

  encoder = pretrained.resolve(model_dir)
  assert encoder.checkpoint_path == result['exported_encoder']
  results = _finetune_mrpc(encoder, glue_dir, finetune_dir)
  (run,) = results['runs']
  assert run['train_steps'] == 2
  assert run['history'][-1]['step'] == 2
  assert {'accuracy', 'f1'} <= set(run['selected'])
  assert all(np.isfinite(value) for value in run['selected'].values())
  for name in ('results.json', 'results.md'):
    assert tf.io.gfile.exists(os.path.join(finetune_dir, name)), name

  # Nothing was written relative to the working directory (a `ram:` folder).
  assert not os.listdir(tmp_path)
