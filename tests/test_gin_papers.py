"""Every paper gin file equals the paper's table and cites it line by line."""

import os
import re

import gin
import pytest

from official_repro.tasks import finetuning_schedule
from official_repro.training import gin_utils

GIN_DIR = os.path.join(gin_utils.REPO_ROOT, 'gin')

# 001 (Shao), Table V, column BERT_small, transcribed from the paper.
TABLE_V_BERT_SMALL = {
    'pretrain_data.max_seq_length': 128,        # Max Seq Len
    'pretrain_data.train_batch_size': 1024,     # Train Batch Size
    'experiment.train_steps': 163000,           # Train Steps 163k
    'optimization.learning_rate': 5e-4,         # Learning Rate
    'optimization.end_learning_rate': 0.0,      # LR Decay: Linear
    'optimization.decay_power': 1.0,            # LR Decay: Linear
    'optimization.warmup_steps': 10000,         # Warmup Steps
    'optimization.optimizer': 'lamb',           # LAMB
    'optimization.beta_1': 0.9,                 # LAMB beta_1
    'optimization.beta_2': 0.999,               # LAMB beta_2
    'optimization.epsilon': 1e-6,               # LAMB epsilon
    'encoder.dropout_rate': 0.1,                # Dropout
    'encoder.attention_dropout_rate': 0.1,      # Dropout
    'optimization.weight_decay_rate': 0.01,     # Weight Decay
    'pretrain_data.mask_rate': 0.15,            # Mask Percent 15
    'encoder.num_layers': 12,                   # Num Layers
    'encoder.hidden_size': 256,                 # Hidden Size
    'encoder.intermediate_size': 1024,          # FNN Size
    'encoder.num_attention_heads': 4,           # Attention Heads
    'encoder.embedding_size': 128,              # Embedding Size
}


_ELECTRA_TABLE_V = dict(
    TABLE_V_BERT_SMALL,
    **{'electra.generator_size': 0.25,       # Generator Size
       'electra.temperature': 0.8})          # Sec. IV-B: T = 0.8

# Columns of 001 Table V (and Table IV's "2x time" row), cell by cell.
TABLE_V = {
    'bert_small.gin': TABLE_V_BERT_SMALL,
    'electra_small.gin': dict(_ELECTRA_TABLE_V,
                              **{'experiment.train_steps': 125000}),
    'electra_small_2x.gin': dict(_ELECTRA_TABLE_V,
                                 **{'experiment.train_steps': 250000}),
    'ale_small.gin': dict(_ELECTRA_TABLE_V,
                          **{'experiment.train_steps': 162000,
                             'encoder.backbone': 'albert'}),
}


@pytest.fixture
def clean_gin():
  gin.clear_config()
  gin_utils.register_configurables()
  yield
  gin.clear_config()


@pytest.mark.parametrize('filename', sorted(TABLE_V))
def test_001_columns_equal_table_v(clean_gin, filename):
  del clean_gin
  gin_utils.parse_config(
      [os.path.join(GIN_DIR, 'papers/001_ale', filename)], [])
  for name, value in TABLE_V[filename].items():
    assert gin.query_parameter(name) == value, name
  heads = gin.query_parameter('encoder.num_attention_heads')
  assert gin.query_parameter('encoder.hidden_size') // heads == 64  # head size


# 001 Table VI: (learning rate, train batch size, epochs) per GLUE task.
TABLE_VI = {
    'mrpc': (2e-4, 64, 3), 'cola': (7e-5, 32, 3), 'mnli': (4e-4, 256, 3),
    'sst2': (3e-4, 256, 3), 'qqp': (5e-4, 256, 3), 'qnli': (2e-4, 256, 3),
    'rte': (3e-4, 32, 10), 'stsb': (3e-5, 8, 10),
}


@pytest.mark.parametrize('task', sorted(TABLE_VI))
def test_001_finetuning_equals_table_vi(clean_gin, task):
  del clean_gin
  gin_utils.parse_config(
      [os.path.join(GIN_DIR, 'finetune/001_ale', task + '.gin')], [])
  schedule = finetuning_schedule.FinetuningSchedule()
  assert schedule.task == task
  assert (schedule.learning_rate, schedule.train_batch_size,
          schedule.num_epochs) == TABLE_VI[task]


def _paper_gin_files():
  for folder in ('papers', 'finetune'):
    yield from _gin_files_under(os.path.join(GIN_DIR, folder))


def _gin_files_under(directory):
  for root, _, files in os.walk(directory):
    for name in sorted(files):
      if name.endswith('.gin'):
        yield os.path.join(root, name)


@pytest.mark.parametrize('path', list(_paper_gin_files()))
def test_every_paper_binding_cites_its_source(path):
  binding = re.compile(r'^[A-Za-z_][\w./]*\s*=')
  with open(path) as f:
    for number, line in enumerate(f, 1):
      if binding.match(line):
        assert '#' in line, f'{path}:{number} has no citation: {line.strip()}'


# Per paper: (runs, aggregation, selection) as its text states (see the
# citations in gin/finetune/<paper>/protocol.gin).
PROTOCOLS = {
    '001_ale': (10, 'max', 'last'),
    '002_convbert': (9, 'median', 'last'),
    '003_teams': (15, 'median', 'best'),
    '004_script': (8, 'mean', 'last'),
}

# (learning rate, batch, epochs, layer-wise decay, weight decay) per task:
# 003 Table 6 (small), 004 Table 5 (small), 002 ConvBERT reference.
_003_GLUE = (1e-4, 32, 5, None, 0.01)
_004_GLUE = (3e-4, 32, 3, 0.8, 0.0)
_002_GLUE = (3e-4, 32, 3, 0.8, 0.01)
FINETUNE_TABLES = {
    '003_teams': dict(
        {task: _003_GLUE for task in finetuning_schedule.GLUE_TASKS},
        squad11=(8e-5, 48, 5, None, 0.01), squad20=(8e-5, 48, 5, None, 0.01)),
    '004_script': dict(
        {task: _004_GLUE for task in finetuning_schedule.GLUE_TASKS},
        rte=(3e-4, 32, 10, 0.8, 0.0), stsb=(3e-4, 32, 10, 0.8, 0.0),
        squad11=(3e-4, 32, 2, 0.8, 0.0), squad20=(3e-4, 32, 2, 0.8, 0.0)),
    '002_convbert': dict(
        {task: _002_GLUE for task in finetuning_schedule.GLUE_TASKS},
        rte=(3e-4, 32, 10, 0.8, 0.01), stsb=(3e-4, 32, 10, 0.8, 0.01)),
}


def _finetune_cases():
  for paper, table in sorted(FINETUNE_TABLES.items()):
    for task in sorted(table):
      yield paper, task


@pytest.mark.parametrize('paper, task', list(_finetune_cases()))
def test_finetuning_tables(clean_gin, paper, task):
  del clean_gin
  gin_utils.parse_config(
      [os.path.join(GIN_DIR, 'finetune', paper, task + '.gin')], [])
  schedule = finetuning_schedule.FinetuningSchedule()
  assert schedule.task == task
  assert (schedule.learning_rate, schedule.train_batch_size,
          schedule.num_epochs, schedule.layerwise_lr_decay,
          schedule.weight_decay_rate) == FINETUNE_TABLES[paper][task]
  assert schedule.warmup_fraction == 0.1
  assert schedule.adam_epsilon == 1e-6
  protocol = finetuning_schedule.RunProtocol()
  selection = 'last' if task.startswith('squad') else PROTOCOLS[paper][2]
  assert (protocol.num_runs, protocol.aggregation, protocol.selection) == (
      PROTOCOLS[paper][:2] + (selection,))


@pytest.mark.parametrize('task, epochs, aggregation, use_crf', [
    ('race', 3, 'mean', False), ('pos', 3, 'mean', False),
    ('pos_crf', 3, 'mean', True)])
def test_001_race_and_pos(clean_gin, task, epochs, aggregation, use_crf):
  """001 Sec. IV: lr 5e-5, 3 epochs, average over 10 runs."""
  del clean_gin
  gin_utils.parse_config(
      [os.path.join(GIN_DIR, 'finetune/001_ale', task + '.gin')], [])
  schedule = finetuning_schedule.FinetuningSchedule()
  assert (schedule.learning_rate, schedule.num_epochs) == (5e-5, epochs)
  protocol = finetuning_schedule.RunProtocol()
  assert (protocol.num_runs, protocol.aggregation) == (10, aggregation)
  if task.startswith('pos'):
    assert gin.query_parameter('pos.use_crf') is use_crf
  else:
    assert gin.query_parameter('race.levels') == ('middle',)
    assert schedule.max_seq_length == 384


def test_001_glue_protocol(clean_gin):
  del clean_gin
  gin_utils.parse_config(
      [os.path.join(GIN_DIR, 'finetune/001_ale/rte.gin')], [])
  protocol = finetuning_schedule.RunProtocol()
  assert (protocol.num_runs, protocol.aggregation, protocol.selection) == (
      PROTOCOLS['001_ale'])
