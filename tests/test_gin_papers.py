"""Every paper gin file equals the paper's table and cites it line by line."""

import os
import re
import types

import gin
import pytest

from experiments import paper_tables
from experiments.paper_tables import citations

from official_repro.data import glue as glue_data
from official_repro.modeling.networks import encoders
from official_repro.optimization import layerwise_decay
from official_repro.tasks import encoder_gin
from official_repro.tasks import finetuning_base
from official_repro.tasks import finetuning_schedule
from official_repro.tasks import objectives
from official_repro.training import experiment
from official_repro.training import finetuning
from official_repro.training import gin_utils

GIN_DIR = os.path.join(gin_utils.REPO_ROOT, 'gin')

# 001 (Shao), Table V, column BERT_small, transcribed from the paper.
TABLE_V_BERT_SMALL = {
    'pretrain_data.max_seq_length': 128,  # Max Seq Len
    'pretrain_data.train_batch_size': 1024,  # Train Batch Size
    'experiment.train_steps': 163000,  # Train Steps 163k
    'optimization.learning_rate': 5e-4,  # Learning Rate
    'optimization.end_learning_rate': 0.0,  # LR Decay: Linear
    'optimization.decay_power': 1.0,  # LR Decay: Linear
    'optimization.warmup_steps': 10000,  # Warmup Steps
    'optimization.optimizer': 'lamb',  # LAMB
    'optimization.beta_1': 0.9,  # LAMB beta_1
    'optimization.beta_2': 0.999,  # LAMB beta_2
    'optimization.epsilon': 1e-6,  # LAMB epsilon
    'encoder.dropout_rate': 0.1,  # Dropout
    'encoder.attention_dropout_rate': 0.1,  # Dropout
    'optimization.weight_decay_rate': 0.01,  # Weight Decay
    'pretrain_data.mask_rate': 0.15,  # Mask Percent 15
    'encoder.num_layers': 12,  # Num Layers
    'encoder.hidden_size': 256,  # Hidden Size
    'encoder.intermediate_size': 1024,  # FNN Size
    'encoder.num_attention_heads': 4,  # Attention Heads
    'encoder.embedding_width': 128,  # Embedding Size
}


_ELECTRA_TABLE_V = dict(
    TABLE_V_BERT_SMALL,
    **{
        'electra.generator_size': 0.25,  # Generator Size
        'electra.temperature': 0.8,
    },
)  # Sec. IV-B: T = 0.8

# Columns of 001 Table V (and Table IV's "2x time" row), cell by cell.
TABLE_V = {
    'bert_small.gin': TABLE_V_BERT_SMALL,
    'electra_small.gin': dict(
        _ELECTRA_TABLE_V, **{'experiment.train_steps': 125000}
    ),
    'electra_small_2x.gin': dict(
        _ELECTRA_TABLE_V, **{'experiment.train_steps': 250000}
    ),
    'ale_small.gin': dict(
        _ELECTRA_TABLE_V,
        **{'experiment.train_steps': 162000, 'encoder.backbone': 'albert'},
    ),
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
      [os.path.join(GIN_DIR, 'papers/001_ale', filename)], []
  )
  for name, value in TABLE_V[filename].items():
    assert gin.query_parameter(name) == value, name
  heads = gin.query_parameter('encoder.num_attention_heads')
  assert gin.query_parameter('encoder.hidden_size') // heads == 64  # head size


# 001 Table VI: (learning rate, train batch size, epochs) per GLUE task.
TABLE_VI = {
    'mrpc': (2e-4, 64, 3),
    'cola': (7e-5, 32, 3),
    'mnli': (4e-4, 256, 3),
    'sst2': (3e-4, 256, 3),
    'qqp': (5e-4, 256, 3),
    'qnli': (2e-4, 256, 3),
    'rte': (3e-4, 32, 10),
    'stsb': (3e-5, 8, 10),
}


@pytest.mark.parametrize('task', sorted(TABLE_VI))
def test_001_finetuning_equals_table_vi(clean_gin, task):
  del clean_gin
  gin_utils.parse_config(
      [os.path.join(GIN_DIR, 'finetune/001_ale', task + '.gin')], []
  )
  schedule = finetuning_schedule.FinetuningSchedule()
  assert schedule.task == task
  assert (
      schedule.learning_rate,
      schedule.train_batch_size,
      schedule.num_epochs,
  ) == TABLE_VI[task]


def _paper_gin_files():
  for folder in ('papers', 'finetune'):
    yield from _gin_files_under(os.path.join(GIN_DIR, folder))


def _gin_files_under(directory):
  for root, _, files in os.walk(directory):
    for name in sorted(files):
      if name.endswith('.gin'):
        yield os.path.join(root, name)


def _cited_gin_files():
  for folder in ('papers', 'finetune', 'sizes', 'pretrain', 'regenerate'):
    yield from _gin_files_under(os.path.join(GIN_DIR, folder))


@pytest.mark.parametrize(
    'path',
    [os.path.relpath(path, GIN_DIR) for path in _gin_files_under(GIN_DIR)],
)
def test_gin_file_is_ascii(path):
  """Gin files are ASCII.

  Gin opens files in the locale's encoding: a non-ASCII comment breaks
  parsing under LANG=C (citations use the tables' ASCII row keys).
  """
  with open(os.path.join(GIN_DIR, path), 'rb') as f:
    f.read().decode('ascii')


@pytest.mark.parametrize(
    'path', [os.path.relpath(path, GIN_DIR) for path in _cited_gin_files()]
)
def test_every_binding_cites_a_cell_section_or_source(path):
  """Every binding's citations resolve.

  Every binding's citations resolve (experiments/paper_tables), and a
  binding that cites a table cell has that cell's value.
  """
  problems = [
      problem
      for binding in citations.gin_bindings(os.path.join(GIN_DIR, path))
      for problem in citations.check_binding(binding)
  ]
  assert not problems, '\n'.join(problems)


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
        {task: _003_GLUE for task in glue_data.GLUE_TASK_NAMES},
        squad11=(8e-5, 48, 5, None, 0.01),
        squad20=(8e-5, 48, 5, None, 0.01),
    ),
    '004_script': dict(
        {task: _004_GLUE for task in glue_data.GLUE_TASK_NAMES},
        rte=(3e-4, 32, 10, 0.8, 0.0),
        stsb=(3e-4, 32, 10, 0.8, 0.0),
        squad11=(3e-4, 32, 2, 0.8, 0.0),
        squad20=(3e-4, 32, 2, 0.8, 0.0),
    ),
    '002_convbert': dict(
        {task: _002_GLUE for task in glue_data.GLUE_TASK_NAMES},
        rte=(3e-4, 32, 10, 0.8, 0.01),
        stsb=(3e-4, 32, 10, 0.8, 0.01),
    ),
}


def _finetune_cases():
  for paper, table in sorted(FINETUNE_TABLES.items()):
    for task in sorted(table):
      yield paper, task


@pytest.mark.parametrize('paper, task', list(_finetune_cases()))
def test_finetuning_tables(clean_gin, paper, task):
  del clean_gin
  gin_utils.parse_config(
      [os.path.join(GIN_DIR, 'finetune', paper, task + '.gin')], []
  )
  schedule = finetuning_schedule.FinetuningSchedule()
  assert schedule.task == task
  assert (
      schedule.learning_rate,
      schedule.train_batch_size,
      schedule.num_epochs,
      schedule.layerwise_lr_decay,
      schedule.weight_decay_rate,
  ) == FINETUNE_TABLES[paper][task]
  assert schedule.warmup_fraction == 0.1
  assert schedule.adam_epsilon == 1e-6
  protocol = finetuning_schedule.RunProtocol()
  selection = 'last' if task.startswith('squad') else PROTOCOLS[paper][2]
  assert (protocol.num_runs, protocol.aggregation, protocol.selection) == (
      PROTOCOLS[paper][:2] + (selection,)
  )


@pytest.mark.parametrize(
    'task, epochs, aggregation, use_crf',
    [
        ('race', 3, 'mean', False),
        ('pos', 3, 'mean', False),
        ('pos_crf', 3, 'mean', True),
    ],
)
def test_001_race_and_pos(clean_gin, task, epochs, aggregation, use_crf):
  """001 Sec. IV: lr 5e-5, 3 epochs, average over 10 runs."""
  del clean_gin
  gin_utils.parse_config(
      [os.path.join(GIN_DIR, 'finetune/001_ale', task + '.gin')], []
  )
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
      [os.path.join(GIN_DIR, 'finetune/001_ale/rte.gin')], []
  )
  protocol = finetuning_schedule.RunProtocol()
  assert (protocol.num_runs, protocol.aggregation, protocol.selection) == (
      PROTOCOLS['001_ale']
  )
  assert protocol.stsb_metric == 'pearson'  # 001 Table II: "Pearson corr."


# 002 (ConvBERT): sizes and pretraining. The rebuttal has no architecture or
# pretraining table; the cells are the ConvBERT reference code's (see the
# citations in gin/sizes/convbert_*.gin and gin/papers/002_convbert/).
_002_RECIPE = {
    'pretrain_data.max_seq_length': 128,
    'experiment.train_steps': 1000000,
    'optimization.optimizer': 'adamw',
    'optimization.weight_decay_rate': 0.01,
    'optimization.warmup_steps': 10000,
    'optimization.end_learning_rate': 0.0,
    'optimization.global_clipnorm': 1.0,
    'pretrain_data.mask_rate': 0.15,
    'electra.generator_loss_weight': 1.0,
    'electra.rtd_loss_weight': 50.0,
    'electra.temperature': 1.0,
    'electra.tie_embeddings': True,
}


def _002_column(
    hidden,
    heads,
    ffn,
    groups,
    embedding,
    learning_rate,
    batch,
    generator_size,
    **extra,
):
  return dict(
      _002_RECIPE,
      **{
          'encoder.backbone': 'convbert',
          'encoder.hidden_size': hidden,
          'encoder.num_layers': 12,
          'encoder.num_attention_heads': heads,
          'encoder.intermediate_size': ffn,
          'convbert.num_groups': groups,
          'encoder.embedding_width': embedding,
          'convbert.kernel_size': 9,
          'convbert.head_ratio': 2,
          'optimization.learning_rate': learning_rate,
          'pretrain_data.train_batch_size': batch,
          'electra.generator_size': generator_size,
      },
      **extra,
  )


_002_SMALL = dict(
    hidden=256,
    heads=4,
    ffn=1024,
    groups=1,
    embedding=128,
    learning_rate=3e-4,
    batch=128,
    generator_size=0.25,
)
_002_MEDIUM_SMALL = dict(
    hidden=384,
    heads=8,
    ffn=1536,
    groups=2,
    embedding=128,
    learning_rate=5e-4,
    batch=128,
    generator_size=0.25,
)
_002_ONLY_CONV = {'convbert.conv_only': True}
_002_ONLY_ATTENTION = {'convbert.attention_only': True}
PRETRAIN_002 = {
    'small.gin': _002_column(**_002_SMALL),
    'medium_small.gin': _002_column(**_002_MEDIUM_SMALL),
    'base.gin': _002_column(
        hidden=768,
        heads=12,
        ffn=3072,
        groups=1,
        embedding=768,
        learning_rate=2e-4,
        batch=256,
        generator_size=1 / 3,
    ),
    'table4_bnk_gl.gin': _002_column(
        **_002_MEDIUM_SMALL, **_002_ONLY_ATTENTION
    ),
    'table4_bnk_gl_larger.gin': _002_column(
        **dict(_002_MEDIUM_SMALL, hidden=432, heads=9, ffn=1728),
        **_002_ONLY_ATTENTION,
    ),
    'table4_conv_only.gin': _002_column(**_002_SMALL, **_002_ONLY_CONV),
}

# Discriminator parameters without the pooler (the reference ConvBERT has
# none) at the BERT uncased vocabulary (30522), 512 positions, 2 types. 002
# Table 4 reports 14M for +BNK,+GL and 17M for +BNK,+GL,+Larger. Ours are
# 14.69M and 17.03M (test_002_table_4_parameters): the +Larger row has the
# reference's 9 heads of 48 and, by its rule N' = max(1, N // head_ratio),
# N' = 9 // 2 = 4 attention heads (a 192-wide attention branch and a
# 192 -> 432 output dense).
PARAMETERS_002 = {
    'small.gin': 13_143_768,
    'medium_small.gin': 17_475_888,
    'base.gin': 105_680_520,
    'table4_bnk_gl.gin': 14_692_224,
    'table4_bnk_gl_larger.gin': 17_026_608,
    'table4_conv_only.gin': 13_621_680,
}


def _convbert_parameters(config):
  """Closed-form trainable parameters of a ConvBERT encoder, pooler excluded."""
  d, e, m = config.hidden_size, config.width, config.intermediate_size
  options = config.options
  k, g = options.kernel_size, options.num_groups
  head_size = d // config.num_attention_heads
  attention_heads = max(1, config.num_attention_heads // options.head_ratio)
  conv_heads = (
      2 * attention_heads
      if options.conv_only
      else 0
      if options.attention_only
      else attention_heads
  )
  count = (
      config.vocab_size
      + config.max_position_embeddings
      + config.type_vocab_size
      + 2
  ) * e
  if e != d:
    count += e * d + d
  layer = 0
  if not options.conv_only:  # Key and value.
    layer += 2 * (d * attention_heads * head_size + attention_heads * head_size)
  query = (conv_heads if options.conv_only else attention_heads) * head_size
  layer += d * query + query
  if conv_heads:
    width = conv_heads * head_size
    layer += k * d + d * width + width  # Separable span key.
    layer += width * conv_heads * k + conv_heads * k  # Kernel generator.
    layer += d * width + width  # Values.
  context = (0 if options.conv_only else attention_heads * head_size) + (
      conv_heads * head_size
  )
  layer += context * d + d + 2 * d  # Output dense, LayerNorm.
  layer += d * m // g + m + m * d // g + d + 2 * d  # Grouped FFN, LayerNorm.
  return count + config.num_layers * layer


def _002_encoder_config(filename, **overrides):
  gin_utils.parse_config(
      [os.path.join(GIN_DIR, 'papers/002_convbert', filename)], []
  )
  return encoder_gin.encoder_config().replace(**overrides)


@pytest.mark.parametrize('filename', sorted(PRETRAIN_002))
def test_002_pretraining_columns(clean_gin, filename):
  del clean_gin
  config = _002_encoder_config(filename, vocab_size=30522)
  for name, value in PRETRAIN_002[filename].items():
    assert gin.query_parameter(name) == pytest.approx(value), name
  assert _convbert_parameters(config) == PARAMETERS_002[filename]


@pytest.mark.parametrize('filename', sorted(PRETRAIN_002))
def test_002_closed_form_matches_built_encoder(clean_gin, filename):
  """The count above, checked on the real network with 2 layers, 40 tokens."""
  del clean_gin
  config = _002_encoder_config(filename, vocab_size=40, num_layers=2)
  encoder = encoders.build_encoder(config)
  pooler = sum(
      v.shape.num_elements() for v in encoder.pooler_layer.trainable_variables
  )
  built = sum(v.shape.num_elements() for v in encoder.trainable_variables)
  assert built - pooler == _convbert_parameters(config)


# 002 Table 4: the row key of each gin file's row.
TABLE_4_ROWS_002 = {
    'table4_bnk_gl.gin': 'ConvBERTmedium-small / +BNK,+GL',
    'table4_bnk_gl_larger.gin': 'ConvBERTmedium-small / +BNK,+GL,+Larger',
}


def _printed_step(cell):
  """One unit of a cell's last printed digit: 1e6 for "14M", 1e5 for "13.5M"."""
  mantissa = re.match(r'[\d.]+', cell.printed).group(0)
  return cell.value / float(mantissa) / 10 ** len(mantissa.partition('.')[2])


@pytest.mark.slow
@pytest.mark.parametrize('filename', sorted(TABLE_4_ROWS_002))
def test_002_table_4_parameters(clean_gin, filename):
  """The built encoder has 002 Table 4's printed parameters.

  The built encoder (12 layers, 30522 tokens, pooler excluded) has the
  parameters 002 Table 4 prints for its row, to the printed digit. The
  rebuttal drops the digits below it rather than rounding: +BNK,+GL has
  14.69M and prints "14M" (rounded it would be 15M); +BNK,+GL,+Larger has
  17.03M and prints "17M".
  """
  del clean_gin
  cell = paper_tables.load('002').cell(
      '4', TABLE_4_ROWS_002[filename], 'Params'
  )
  encoder = encoders.build_encoder(
      _002_encoder_config(filename, vocab_size=30522)
  )
  pooler = sum(
      v.shape.num_elements() for v in encoder.pooler_layer.trainable_variables
  )
  count = (
      sum(v.shape.num_elements() for v in encoder.trainable_variables) - pooler
  )
  assert count == PARAMETERS_002[filename]
  assert cell.value <= count < cell.value + _printed_step(cell), (
      f'{filename}: {count} parameters, but {cell.cite()} prints '
      f'{cell.printed}'
  )


@pytest.mark.parametrize(
    'path',
    sorted(
        os.path.join(GIN_DIR, 'sizes', name)
        for name in os.listdir(os.path.join(GIN_DIR, 'sizes'))
        if name.startswith('convbert_')
    ),
)
def test_convbert_sizes_cite_their_source(path):
  """Every binding of a ConvBERT size cites 002 or the reference code.

  Every binding of a ConvBERT size cites 002 or the ConvBERT reference code
  (that the citations resolve is test_every_binding_cites_...'s check).
  """
  for binding in citations.gin_bindings(path):
    assert any(
        citation.paper == '002'
        or (
            citation.kind == 'code'
            and citation.target.startswith('yitu-opensource/ConvBert ')
        )
        for citation in citations.citations_in(binding.comment)
    ), (
        f'{binding.where} cites neither 002 nor yitu-opensource/ConvBert: '
        f'{binding.comment}'
    )


# 004 (SCRIPT), Table 4 (pretraining), transcribed from the paper: the cells
# both columns share, then each column. Train steps are Table 2's caption
# (1,000,000 small, 766,000 base); alpha and the masking split Appendix 4.1.
_004_TABLE_4_SHARED = {
    'experiment.objective': 'script',
    'script.critic_loss_weight': 50.0,  # Appendix 4.1: alpha 50
    'pretrain_data.max_seq_length': 128,  # Sec. 3: ELECTRA pre-processing
    'pretrain_data.mask_rate': 0.15,  # Mask percent 15
    'pretrain_data.masking': 'dynamic',  # Appendix 4.1: on-the-fly
    'pretrain_data.mask_token_fraction': 0.8,  # Appendix 4.1: 80% [MASK]
    'pretrain_data.random_token_fraction': 0.1,  # Appendix 4.1: 10% random
    'optimization.optimizer': 'adamw',  # Adam with Weight Decay
    'optimization.end_learning_rate': 0.0,  # Learning Rate Decay Linear
    'optimization.decay_power': 1.0,  # Learning Rate Decay Linear
    'optimization.warmup_steps': 10000,  # Warmup steps
    'optimization.epsilon': 1e-6,  # Adam epsilon
    'optimization.beta_1': 0.9,  # Adam beta_1
    'optimization.beta_2': 0.999,  # Adam beta_2
    'encoder.attention_dropout_rate': 0.1,  # Attention Dropout
    'encoder.dropout_rate': 0.1,  # Dropout
    'optimization.weight_decay_rate': 0.01,  # Weight Decay
    'encoder.num_layers': 12,  # Number of layers
}
_004_TABLE_4_SMALL = dict(
    _004_TABLE_4_SHARED,
    **{
        'encoder.hidden_size': 256,
        'encoder.intermediate_size': 1024,
        'encoder.num_attention_heads': 4,
        'encoder.embedding_width': 128,
        'optimization.learning_rate': 5e-4,
        'pretrain_data.train_batch_size': 128,
        'experiment.train_steps': 1000000,
    },
)
PRETRAIN_004 = {
    'small.gin': _004_TABLE_4_SMALL,
    'base.gin': dict(
        _004_TABLE_4_SHARED,
        **{
            'encoder.hidden_size': 768,
            'encoder.intermediate_size': 3072,
            'encoder.num_attention_heads': 12,
            'encoder.embedding_width': 768,
            'optimization.learning_rate': 2e-4,
            'pretrain_data.train_batch_size': 256,
            'experiment.train_steps': 766000,
        },
    ),
    # Sec. 3.1: small re-trained with 512 tokens for SQuAD.
    'small_squad.gin': dict(
        _004_TABLE_4_SMALL,
        **{
            'pretrain_data.max_seq_length': 512,
            'encoder.max_position_embeddings': 512,
        },
    ),
}


@pytest.mark.parametrize('filename', sorted(PRETRAIN_004))
def test_004_pretraining_columns_equal_table_4(clean_gin, filename):
  del clean_gin
  gin_utils.parse_config(
      [os.path.join(GIN_DIR, 'papers/004_script', filename)], []
  )
  for name, value in PRETRAIN_004[filename].items():
    assert gin.query_parameter(name) == value, name
  heads = gin.query_parameter('encoder.num_attention_heads')
  assert gin.query_parameter('encoder.hidden_size') // heads == 64  # head size


def test_004_small_encoder_has_14m_parameters(clean_gin):
  """004 Sec. 3 and Table 2: SCRIPT-small has "an encoder of the 14M".

  Built at the BERT uncased vocabulary (30522), 512 positions, 2 types:
  13,548,800 parameters, 13,483,008 without the pooler (which 004's
  encoders, ELECTRA's, do not have). 004 rounds ELECTRA's count: 13.48M is
  "14M" in ELECTRA (Clark et al. 2020, Table 1) as well.
  """
  del clean_gin
  gin_utils.parse_config(
      [os.path.join(GIN_DIR, 'papers/004_script/small.gin')], []
  )
  encoder = encoders.build_encoder(
      encoder_gin.encoder_config().replace(vocab_size=30522)
  )
  pooler = sum(
      v.shape.num_elements() for v in encoder.pooler_layer.trainable_variables
  )
  built = sum(v.shape.num_elements() for v in encoder.trainable_variables)
  assert (built, built - pooler) == (13_548_800, 13_483_008)
  assert built - pooler == pytest.approx(14e6, rel=0.05)


def test_004_finetuning_base_learning_rate(clean_gin):
  """004 Table 5: Learning Rate 1e-4 for Base; every other cell is Small's."""
  del clean_gin
  gin_utils.parse_config(
      [
          os.path.join(GIN_DIR, 'finetune/004_script', name)
          for name in ('rte.gin', 'base.gin')
      ],
      [],
  )
  schedule = finetuning_schedule.FinetuningSchedule()
  assert (
      schedule.task,
      schedule.learning_rate,
      schedule.num_epochs,
      schedule.layerwise_lr_decay,
  ) == ('rte', 1e-4, 10, 0.8)


def _assert_finetuning_adam_betas_and_linear_decay():
  """Fine-tuning's Adam betas and linear decay are fixed in code.

  Fine-tuning's Adam betas (0.9, 0.999) and its linear decay to 0: fixed
  in code, no gin binding (the 003 and 004 fine-tuning tables give them).
  """
  optimizer = layerwise_decay.LayerwiseAdamWeightDecay(lr_multipliers={})
  task_config = finetuning_base.FinetuneTaskConfig()
  assert (optimizer.get_config()['beta_1'], task_config.adam_beta_2) == (
      0.9,
      0.999,
  )
  config = finetuning._optimization_config(  # pylint: disable=protected-access
      types.SimpleNamespace(learning_rate=1e-4),
      train_steps=100,
      warmup_steps=10,
  )
  decay = config.learning_rate.polynomial
  assert (decay.end_learning_rate, decay.power) == (0.0, 1.0)


def test_004_table_5_cells_fixed_in_code():
  """004 Table 5's Adam betas and linear decay, which have no gin binding.

  beta_1 is AdamWeightDecay's default, beta_2 the fine-tuning task's; the
  schedule decays linearly to 0 (training/finetuning.py).
  """
  _assert_finetuning_adam_betas_and_linear_decay()


# 003 (TEAMS), Table 5 (pretraining), transcribed from the paper: the cells
# every column shares, then each column (Small/Small++, Base/Base++ and
# Large, split at their "/"). Sequence length 512 is Sec. 4.1's for small and
# base (our choice for large); static masking App. B's; lambda1 = 5 and
# lambda2 = 2 App. B's; K = 5 Sec. 4.1's.
_003_TABLE_5_SHARED = {
    'pretrain_data.mask_rate': 0.15,  # Mask Percentage 15
    'optimization.end_learning_rate': 0.0,  # Learning Rate Decay Linear
    'optimization.decay_power': 1.0,  # Learning Rate Decay Linear
    'optimization.warmup_steps': 10000,  # Warmup Steps
    'optimization.optimizer': 'adamw',  # Adam with Weight Decay
    'optimization.epsilon': 1e-6,  # Adam epsilon
    'optimization.beta_1': 0.9,  # Adam beta_1
    'optimization.beta_2': 0.999,  # Adam beta_2
    'encoder.attention_dropout_rate': 0.1,  # Attention Dropout
    'encoder.dropout_rate': 0.1,  # Dropout
    'optimization.weight_decay_rate': 0.01,  # Weight Decay
    'pretrain_data.masking': 'static',  # App. B: 40 static masks
    'pretrain_data.max_seq_length': 512,  # Sec. 4.1
}
_003_TEAMS_OBJECTIVE = {
    'experiment.objective': 'teams',
    'teams.generator_layer_fraction': 0.5,  # Generator Size 1/2
    'teams.generator_size': 1.0,  # Sec. 3.2: same width
    'teams.layer_sharing': 'partial',  # Sec. 3.2: bottom half
    'teams.rtd_loss_weight': 5.0,  # App. B: lambda1
    'teams.mws_loss_weight': 2.0,  # App. B: lambda2
    'teams.num_negatives': 5,  # Sec. 4.1: K
    'teams.negative_sampling': 'sampled',  # Sec. 4.3, footnote 7
    'teams.task_heads': 'attention',  # Sec. 3.2
    'teams.exported_representations': 'mws',  # Sec. 3.2, footnote 3
}


def _003_column(
    layers, embedding, hidden, ffn, heads, learning_rate, batch, steps
):
  return dict(
      _003_TABLE_5_SHARED,
      **{
          'encoder.num_layers': layers,
          'encoder.embedding_width': embedding,
          'encoder.hidden_size': hidden,
          'encoder.intermediate_size': ffn,
          'encoder.num_attention_heads': heads,
          'optimization.learning_rate': learning_rate,
          'pretrain_data.train_batch_size': batch,
          'experiment.train_steps': steps,
      },
  )


TABLE_5_003 = {
    'small': _003_column(12, 128, 256, 1024, 4, 5e-4, 256, 500_000),
    'small_pp': _003_column(12, 128, 256, 1024, 4, 5e-4, 256, 2_000_000),
    'base': _003_column(12, 768, 768, 3072, 12, 2e-4, 256, 1_000_000),
    'base_pp': _003_column(12, 768, 768, 3072, 12, 3e-4, 1024, 1_000_000),
    'large': _003_column(24, 1024, 1024, 4096, 16, 2e-4, 2048, 1_760_000),
}


def _parse_003(filename, bindings=()):
  gin_utils.parse_config(
      [os.path.join(GIN_DIR, 'papers/003_teams', filename)], list(bindings)
  )


@pytest.mark.parametrize('column', sorted(TABLE_5_003))
def test_003_pretraining_columns_equal_table_5(clean_gin, column):
  del clean_gin
  _parse_003(column + '.gin')
  for name, value in dict(TABLE_5_003[column], **_003_TEAMS_OBJECTIVE).items():
    assert gin.query_parameter(name) == value, name
  heads = gin.query_parameter('encoder.num_attention_heads')
  assert gin.query_parameter('encoder.hidden_size') // heads == 64  # head size


@pytest.mark.parametrize('column', sorted(TABLE_5_003))
def test_003_table_5_columns_have_no_objective(clean_gin, column):
  """table5_<column>.gin: the column's cells, no objective (Table 2's MLM)."""
  del clean_gin
  _parse_003(f'table5_{column}.gin')
  for name, value in TABLE_5_003[column].items():
    assert gin.query_parameter(name) == value, name
  assert 'objective' not in gin.get_bindings('experiment')
  assert not gin.get_bindings('teams')


_UNBOUND = object()
# What gin/pretrain/teams.gin binds; Table 2's masked-LM row has none of it.
_TEAMS_GIN_FIELDS = (
    'generator_size',
    'generator_layer_fraction',
    'layer_sharing',
    'num_negatives',
    'negative_sampling',
    'task_heads',
    'exported_representations',
    'tie_embeddings',
    'tie_embedding_block',
    'generator_loss_weight',
    'rtd_loss_weight',
    'mws_loss_weight',
)

# 003's ablations: (the file they modify, the bindings that differ from it).
ABLATIONS_003 = {
    # Table 2.
    'table2_only_mlm.gin': (
        'small_pp.gin',
        dict(
            {'experiment.objective': 'masked_lm'},
            **{f'teams.{field}': _UNBOUND for field in _TEAMS_GIN_FIELDS},
        ),
    ),
    # With lambda2 = 0 the MWS side is untrained: the RTD side is exported.
    'table2_only_rtd.gin': (
        'small_pp.gin',
        {'teams.mws_loss_weight': 0.0, 'teams.exported_representations': 'rtd'},
    ),
    'table2_only_mws.gin': ('small_pp.gin', {'teams.rtd_loss_weight': 0.0}),
    # Table 3.
    'table3_ffn_heads.gin': ('small_pp.gin', {'teams.task_heads': 'ffn'}),
    'table3_task_heads_on_top.gin': (
        'small_pp.gin',
        {'teams.task_heads': 'attention_on_top'},
    ),
    'table3_export_rtd.gin': (
        'small_pp.gin',
        {'teams.exported_representations': 'rtd'},
    ),
    # Table 4.
    'table4_full_tie.gin': ('small_pp.gin', {'teams.layer_sharing': 'full'}),
    'table4_no_tie.gin': ('small_pp.gin', {'teams.layer_sharing': 'none'}),
    'table4_base_pp_no_tie.gin': (
        'base_pp.gin',
        {'teams.layer_sharing': 'none'},
    ),
    # Figure 4: n generator layers (small++ has 0.5 of 12), the fraction
    # back at 1.0 as a count requires.
    **{
        f'fig4_generator_num_layers_{n}.gin': (
            'small_pp.gin',
            {
                'teams.generator_layer_fraction': 1.0,
                'teams.generator_num_layers': n,
            },
        )
        for n in range(1, 13)
    },
    # Figure 5: small++ is "Sampled" with K = 5.
    **{
        f'fig5_{sampling}_k{k}.gin': (
            'small_pp.gin',
            dict(
                {'teams.negative_sampling': 'hardest'}
                if sampling == 'hardest'
                else {},
                **({'teams.num_negatives': k} if k != 5 else {}),
            ),
        )
        for sampling in ('sampled', 'hardest')
        for k in (3, 5, 10, 20, 50)
    },
}


def _all_bindings():
  """Every parsed binding of the configurables a pretraining file sets."""
  names = [
      'experiment',
      'encoder',
      'pretrain_data',
      'optimization',
      *objectives.names(),
      *encoders.backbone_names(),
  ]
  bindings = {}
  for name in names:
    try:
      values = gin.get_bindings(name)
    except ValueError:  # A backbone without options.
      continue
    bindings.update(
        {f'{name}.{field}': value for field, value in values.items()}
    )
  return bindings


def _bindings_of_003(filename):
  gin.clear_config()
  _parse_003(filename)
  return _all_bindings()


@pytest.mark.parametrize('filename', sorted(ABLATIONS_003))
def test_003_ablations_change_only_their_row(clean_gin, filename):
  del clean_gin
  reference, expected = ABLATIONS_003[filename]
  before = _bindings_of_003(reference)
  after = _bindings_of_003(filename)
  difference = {
      name: after.get(name, _UNBOUND)
      for name in set(before) | set(after)
      if before.get(name, _UNBOUND) != after.get(name, _UNBOUND)
  }
  assert difference == expected


# (discriminator layers L, exported encoder layers, generator layers, generator
# layers tied to the discriminator) of every 003 file that selects an
# objective; None for masked LM (no generator).
_003_SMALL_PP_LAYERS = (12, 12, 6, 3)
LAYERS_003 = {
    'small.gin': (12, 12, 6, 3),
    'small_pp.gin': _003_SMALL_PP_LAYERS,
    'base.gin': (12, 12, 6, 3),
    'base_pp.gin': (12, 12, 6, 3),
    'large.gin': (24, 24, 12, 6),
    'table2_only_mlm.gin': None,
    'table2_only_rtd.gin': _003_SMALL_PP_LAYERS,
    'table2_only_mws.gin': _003_SMALL_PP_LAYERS,
    'table3_ffn_heads.gin': _003_SMALL_PP_LAYERS,
    'table3_task_heads_on_top.gin': (12, 13, 6, 3),  # "effectively 13"
    'table3_export_rtd.gin': _003_SMALL_PP_LAYERS,
    'table4_full_tie.gin': (12, 12, 6, 6),
    'table4_no_tie.gin': (12, 12, 6, 0),
    'table4_base_pp_no_tie.gin': (12, 12, 6, 0),
    **{
        f'fig4_generator_num_layers_{n}.gin': (12, 12, n, n // 2)
        for n in range(1, 13)
    },
    **{
        f'fig5_{sampling}_k{k}.gin': _003_SMALL_PP_LAYERS
        for sampling in ('sampled', 'hardest')
        for k in (3, 5, 10, 20, 50)
    },
}
# The files without an objective (included by the ones above).
_003_RECIPES = (
    'pretrain_recipe.gin',
    *(f'table5_{column}.gin' for column in TABLE_5_003),
)


# 003 Table 1's ELECTRA rows: generator width as a fraction of the
# discriminator's (ELECTRA's reference code; 003 gives none).
ELECTRA_003 = {
    'electra_small.gin': 0.25,
    'electra_small_pp.gin': 0.25,
    'electra_base.gin': 1 / 3,
    'electra_base_pp.gin': 1 / 3,
    'electra_large.gin': 0.25,
}


def test_003_every_pretraining_file_is_tested():
  names = {
      name
      for name in os.listdir(os.path.join(GIN_DIR, 'papers/003_teams'))
      if name.endswith('.gin')
  }
  assert names == set(LAYERS_003) | set(_003_RECIPES) | set(ELECTRA_003)


@pytest.mark.parametrize('filename', sorted(ELECTRA_003))
def test_003_electra_rows_are_electra_on_the_table_5_recipe(
    clean_gin, filename
):
  del clean_gin
  _parse_003(
      filename, ["pretrain_data.input_path = ''", 'encoder.vocab_size = 30522']
  )
  params, _ = experiment.experiment_config()
  column = TABLE_5_003[_003_column_of(filename[len('electra_') :])]
  task = params.task
  assert objectives.for_task_config(task).name == 'electra'
  assert (
      params.trainer.train_steps,
      task.train_data.global_batch_size,
      task.train_data.max_seq_length,
  ) == (
      column['experiment.train_steps'],
      column['pretrain_data.train_batch_size'],
      512,
  )
  hidden = column['encoder.hidden_size']
  assert task.model.discriminator.hidden_size == hidden
  assert task.model.generator().hidden_size == round(
      hidden * ELECTRA_003[filename]
  )
  assert task.model.generator().num_layers == column['encoder.num_layers']


def _003_column_of(filename):
  """The Table 5 column a 003 pretraining file trains."""
  for column in ('small_pp', 'base_pp', 'small', 'base', 'large'):
    if filename.startswith(column) or filename.startswith(f'table4_{column}'):
      return column
  return 'small_pp'  # Tables 2-4 and Figures 4-5 are small++ ablations.


@pytest.mark.parametrize('filename', sorted(LAYERS_003))
def test_003_files_build_their_experiment(clean_gin, filename):
  """The experiment config through gin, as train.py builds it.

  The experiment config through gin, as train.py builds it (no records:
  the BERT uncased vocabulary size is bound instead).
  """
  del clean_gin
  _parse_003(
      filename, ["pretrain_data.input_path = ''", 'encoder.vocab_size = 30522']
  )
  params, _ = experiment.experiment_config()
  column = TABLE_5_003[_003_column_of(filename)]
  task = params.task
  assert params.trainer.train_steps == column['experiment.train_steps']
  decay = params.trainer.optimizer_config.learning_rate.polynomial
  assert (decay.initial_learning_rate, decay.decay_steps) == (
      column['optimization.learning_rate'],
      column['experiment.train_steps'],
  )
  assert (
      task.train_data.global_batch_size,
      task.train_data.max_seq_length,
      task.train_data.masking,
  ) == (column['pretrain_data.train_batch_size'], 512, 'static')
  objective = objectives.for_task_config(task)
  exported = objective.exported_encoder_config(task.model)
  if LAYERS_003[filename] is None:
    assert objective.name == 'masked_lm'
    assert exported.num_layers == column['encoder.num_layers']
    return
  assert objective.name == 'teams'
  model = task.model
  assert (
      model.discriminator.num_layers,
      exported.num_layers,
      model.generator().num_layers,
      model.num_shared_layers(),
  ) == (LAYERS_003[filename])
  assert model.generator().hidden_size == model.discriminator.hidden_size


def _bert_parameters(config):
  """Closed-form parameters of a BERT encoder, pooler excluded."""
  d, e, m = config.hidden_size, config.width, config.intermediate_size
  count = (
      config.vocab_size
      + config.max_position_embeddings
      + config.type_vocab_size
      + 2
  ) * e  # Tables and LayerNorm.
  if e != d:
    count += e * d + d
  layer = 4 * (d * d + d) + 2 * d + (d * m + m) + (m * d + d) + 2 * d
  return count + config.num_layers * layer


def _003_exported_encoder_config(column):
  _parse_003(
      column + '.gin',
      ["pretrain_data.input_path = ''", 'encoder.vocab_size = 30522'],
  )
  task = experiment.experiment_config()[0].task
  return objectives.for_task_config(task).exported_encoder_config(task.model)


# TEAMS discriminators at the BERT uncased vocabulary (30522), 512 positions,
# 2 types, pooler excluded (ELECTRA's discriminators have none; with it:
# 13,548,800, 109,482,240 and 335,141,888, BERT's own counts). 003 Table 1
# reports 14M, 110M and 335M: ELECTRA's and BERT's rounded counts.
PARAMETERS_003 = {
    'small': (13_483_008, 14e6),
    'base': (108_891_648, 110e6),
    'large': (334_092_288, 335e6),
}


@pytest.mark.parametrize('column', sorted(PARAMETERS_003))
def test_003_parameters_equal_table_1(clean_gin, column):
  del clean_gin
  count, paper = PARAMETERS_003[column]
  assert _bert_parameters(_003_exported_encoder_config(column)) == count
  assert count == pytest.approx(paper, rel=0.04)


def _built_parameters(config):
  encoder = encoders.build_encoder(config)
  pooler = sum(
      v.shape.num_elements() for v in encoder.pooler_layer.trainable_variables
  )
  return (
      sum(v.shape.num_elements() for v in encoder.trainable_variables) - pooler
  )


@pytest.mark.parametrize(
    'column',
    [
        'small',
        pytest.param('base', marks=pytest.mark.slow),
        pytest.param('large', marks=pytest.mark.slow),
    ],
)
def test_003_built_discriminator_has_table_1_parameters(clean_gin, column):
  """The count above on the real network (large: ~17 s, marked slow)."""
  del clean_gin
  config = _003_exported_encoder_config(column)
  assert _built_parameters(config) == PARAMETERS_003[column][0]


# 003 Table 6 for the base and large models: (learning rate, batch, epochs,
# layer-wise decay, weight decay); GLUE files are composed after a task file.
_003_GLUE_BASE_LARGE = (3e-5, 32, 5, None, 0.01)
FINETUNE_003_SIZES = {
    **{
        (task + '.gin', size): _003_GLUE_BASE_LARGE
        for task in glue_data.GLUE_TASK_NAMES
        for size in ('glue_base.gin', 'glue_large.gin')
    },
    ('squad11_base.gin',): (5e-5, 32, 2, None, 0.01),
    ('squad20_base.gin',): (5e-5, 32, 2, None, 0.01),
    ('squad11_large.gin',): (3e-5, 48, 2, None, 0.01),
    ('squad20_large.gin',): (3e-5, 48, 2, None, 0.01),
}


@pytest.mark.parametrize('files', sorted(FINETUNE_003_SIZES))
def test_003_finetuning_base_and_large_equal_table_6(clean_gin, files):
  del clean_gin
  gin_utils.parse_config(
      [os.path.join(GIN_DIR, 'finetune/003_teams', name) for name in files], []
  )
  schedule = finetuning_schedule.FinetuningSchedule()
  assert schedule.task == files[0].split('.')[0].split('_')[0]
  assert (
      schedule.learning_rate,
      schedule.train_batch_size,
      schedule.num_epochs,
      schedule.layerwise_lr_decay,
      schedule.weight_decay_rate,
  ) == FINETUNE_003_SIZES[files]
  assert (schedule.warmup_fraction, schedule.adam_epsilon) == (0.1, 1e-6)
  protocol = finetuning_schedule.RunProtocol()
  selection = 'last' if schedule.task.startswith('squad') else 'best'
  assert (protocol.num_runs, protocol.aggregation, protocol.selection) == (
      15,
      'median',
      selection,
  )


def test_003_table_6_cells_fixed_in_code(clean_gin):
  """003 Table 6's linear decay, Adam betas and dropout: no gin binding.

  beta_1 is AdamWeightDecay's default, beta_2 the fine-tuning task's; the
  schedule decays linearly to 0; dropout 0.1 is the task head's and the
  pretrained encoder's (its exported config keeps Table 5's 0.1).
  """
  del clean_gin
  _assert_finetuning_adam_betas_and_linear_decay()
  assert finetuning_base.FinetuneTaskConfig().head_dropout_rate == 0.1
  exported = _003_exported_encoder_config('small_pp')
  assert (exported.dropout_rate, exported.attention_dropout_rate) == (0.1, 0.1)


# How each paper's pretraining masks, and where it says so: (masking,
# share shown as [MASK], share shown as a random token); the rest keep their
# token. Static records carry the split they were written with
# (create_pretraining_data's --mask_token_fraction, --random_token_fraction;
# 003's recipe writes BERT's 80/10/10), so only the mode is configured.
_BERT_SPLIT = ('dynamic', 0.8, 0.1)
_ELECTRA_SPLIT = ('dynamic', 0.85, 0.0)
PRETRAINING_MASKING = {
    # 001 Sec. IV-B.1: masked afresh every time; BERT's split for its BERT.
    '001_ale/bert_small.gin': _BERT_SPLIT,
    # 001's ELECTRA and ALE follow google-research/electra's
    # pretrain_helpers.py: 85% [MASK], 15% kept, no random token.
    '001_ale/electra_small.gin': _ELECTRA_SPLIT,
    '001_ale/electra_small_2x.gin': _ELECTRA_SPLIT,
    '001_ale/ale_small.gin': _ELECTRA_SPLIT,
    # 002's ConvBERT code is ELECTRA's: its pretrain_helpers.py masks alike.
    '002_convbert/small.gin': _ELECTRA_SPLIT,
    '002_convbert/electra_small.gin': _ELECTRA_SPLIT,
    '002_convbert/medium_small.gin': _ELECTRA_SPLIT,
    '002_convbert/base.gin': _ELECTRA_SPLIT,
    '002_convbert/table4_bnk_gl.gin': _ELECTRA_SPLIT,
    '002_convbert/table4_bnk_gl_larger.gin': _ELECTRA_SPLIT,
    '002_convbert/table4_conv_only.gin': _ELECTRA_SPLIT,
    # Ours: 002's architecture under 001's BERT recipe.
    '002_convbert/masked_lm_small.gin': _BERT_SPLIT,
    # 004 App. 4.1: on the fly, 80% [MASK], 10% random, 10% kept.
    '004_script/small.gin': _BERT_SPLIT,
    '004_script/small_squad.gin': _BERT_SPLIT,
    '004_script/base.gin': _BERT_SPLIT,
}


def _pretraining_files():
  """Every paper gin file that configures a whole pretraining run.

  Recipes and 003's Table 5 columns (`table5_*.gin`) choose no objective:
  the files that include them do.
  """
  papers = os.path.join(GIN_DIR, 'papers')
  return sorted(
      os.path.relpath(os.path.join(root, name), papers)
      for root, _, names in os.walk(papers)
      for name in names
      if name.endswith('.gin')
      and 'recipe' not in name
      and not name.startswith('table5_')
  )


@pytest.mark.parametrize('path', _pretraining_files())
def test_each_paper_masks_as_its_source(clean_gin, path):
  """Dynamic or static, and the split, as the paper or its code says.

  003 (App. B) masks statically, 40 copies: every one of its files.
  """
  del clean_gin
  gin_utils.parse_config(
      [os.path.join(GIN_DIR, 'papers', path)],
      ["pretrain_data.input_path = ''", 'encoder.vocab_size = 30522'],
  )
  masking = gin.query_parameter('pretrain_data.masking')
  if path.startswith('003_teams/'):
    assert masking == 'static'
    return
  assert (
      masking,
      gin.query_parameter('pretrain_data.mask_token_fraction'),
      gin.query_parameter('pretrain_data.random_token_fraction'),
  ) == PRETRAINING_MASKING[path]
  assert gin.query_parameter('pretrain_data.mask_rate') == 0.15


# 003's ELECTRA baselines are its own reimplementation, whose code is not
# public: they keep the word-only tying of Model Garden's ElectraPretrainer.
_WORD_ONLY_TYING = ('003_teams/electra_',)


def _bound_or_default(name, default):
  try:
    return gin.query_parameter(name)
  except ValueError:
    return default


@pytest.mark.parametrize('path', _pretraining_files())
def test_each_generator_ties_the_embedding_block_as_its_code(clean_gin, path):
  """A generator shares the whole embedding block, as the papers' code.

  google-research/electra (001), its ConvBERT fork (002) and Model Garden's
  TEAMS (003) give the generator the discriminator's position and type
  tables and embedding LayerNorm with its word table; SCRIPT (004) has one
  network and masked LM none to tie.
  """
  del clean_gin
  gin_utils.parse_config(
      [os.path.join(GIN_DIR, 'papers', path)],
      ["pretrain_data.input_path = ''", 'encoder.vocab_size = 30522'],
  )
  objective = gin.query_parameter('experiment.objective')
  if objective in ('masked_lm', 'script'):
    return
  assert objective in ('electra', 'teams'), (path, objective)
  assert _bound_or_default(f'{objective}.tie_embeddings', True) is True
  assert _bound_or_default(f'{objective}.tie_embedding_block', False) is (
      not path.startswith(_WORD_ONLY_TYING)
  ), path
