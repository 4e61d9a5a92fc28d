"""Two MultiWorkerMirroredStrategy workers on loopback ports, CPU only.

Each worker is its own process (tests/training/multi_worker_main.py) with its
own `TF_CONFIG`, as on two GPU hosts. They must read different shards of the
records, see the global batch split between them, and end with identical
weights after training the tiny masked-LM config together.
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from official_repro.training import distribute
from official_repro.training import gin_utils

REPO_ROOT = gin_utils.REPO_ROOT
WORKER = os.path.join(REPO_ROOT, 'tests', 'training', 'multi_worker_main.py')


def _free_ports(count):
  sockets = [socket.socket() for _ in range(count)]
  for s in sockets:
    s.bind(('127.0.0.1', 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def _encoder_weights(model_dir):
  (export,) = tf.io.gfile.glob(
      os.path.join(model_dir, 'encoder', 'encoder-*.index')
  )
  reader = tf.train.load_checkpoint(export[: -len('.index')])
  return {
      name: reader.get_tensor(name)
      for name in reader.get_variable_to_shape_map()
      if 'OPTIMIZER_SLOT' not in name
  }


@pytest.mark.slow
def test_two_workers_read_different_shards_and_agree(tiny_records, tmp_path):
  workers = [f'127.0.0.1:{port}' for port in _free_ports(2)]
  processes = []
  for index in range(2):
    env = dict(
        os.environ,
        PYTHONPATH=REPO_ROOT,
        CUDA_VISIBLE_DEVICES='',
        TF_CONFIG=json.dumps(
            {
                'cluster': {'worker': workers},
                'task': {'type': 'worker', 'index': index},
            }
        ),
    )
    processes.append(
        subprocess.Popen(
            [
                sys.executable,
                WORKER,
                tiny_records,
                str(tmp_path / f'w{index}'),
                str(tmp_path / f'w{index}.json'),
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    )
  outputs = []
  try:
    for process in processes:
      outputs.append(process.communicate(timeout=600)[0])
  finally:
    for process in processes:
      if process.poll() is None:
        process.kill()
        process.wait()
  for process, output in zip(processes, outputs):
    assert process.returncode == 0, output[-4000:]
  reports = [
      json.loads((tmp_path / f'w{i}.json').read_text()) for i in range(2)
  ]

  # Each worker is one input pipeline of two, batching half the global 8.
  for index, report in enumerate(reports):
    assert report['task_id'] == index
    assert report['train_context'] == dict(
        pipeline_id=index, num_pipelines=2, per_replica_batch_size=4
    )
    assert len(report['train_batches'][0]) == 4
  assert reports[0]['train_batches'] != reports[1]['train_batches']

  # The evaluation split (read in order, once) is partitioned between them.
  examples = [
      {tuple(row) for batch in report['eval_batches'] for row in batch}
      for report in reports
  ]
  assert examples[0] and examples[1]
  assert not examples[0] & examples[1]
  total = sum(
      len(batch) for report in reports for batch in report['eval_batches']
  )
  assert total == len(examples[0] | examples[1])

  # They trained together: 2 replicas, same steps, identical weights.
  for report in reports:
    assert report['result']['num_replicas'] == 2
    assert report['result']['global_step'] == 3
  first, second = (_encoder_weights(tmp_path / f'w{i}') for i in range(2))
  assert first.keys() == second.keys() and first
  for name in first:
    np.testing.assert_array_equal(first[name], second[name], err_msg=name)


@pytest.mark.parametrize(
    'tf_config, expected',
    [
        (None, 'needs the TF_CONFIG'),
        ('{not json', 'TF_CONFIG is not JSON'),
        (
            '{"cluster": {}, "task": {"type": "worker", "index": 0}}',
            'no cluster.worker',
        ),
        (
            '{"cluster": {"worker": ["a:1", "b:2"]}, '
            '"task": {"type": "worker", "index": 2}}',
            'index": i} with i in 0..1',
        ),
    ],
)
def test_bad_tf_config_is_named(tf_config, expected):
  environ = {} if tf_config is None else {'TF_CONFIG': tf_config}
  with pytest.raises(ValueError, match='TF_CONFIG') as raised:
    distribute.check_tf_config(environ)
  assert expected in str(raised.value)


def test_good_tf_config_passes():
  config = {
      'cluster': {'worker': ['a:1', 'b:2']},
      'task': {'type': 'worker', 'index': 1},
  }
  assert distribute.check_tf_config({'TF_CONFIG': json.dumps(config)}) == (
      config
  )
