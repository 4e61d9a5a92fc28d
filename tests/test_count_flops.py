"""The FLOPs/parameters command: the papers' configs, any objective."""

import dataclasses
import os

import gin
import pytest

from official_repro import count_flops
from official_repro.metrics import flops
from official_repro.training import gin_utils

V = 30522


@pytest.fixture
def clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def _parse(name, bindings=()):
  gin.clear_config()
  gin_utils.parse_config(
      [os.path.join(gin_utils.REPO_ROOT, 'gin/papers/001_ale', name + '.gin')],
      bindings,
  )


@pytest.mark.slow
def test_report_and_parameters_of_paper_configs(clean_gin):
  del clean_gin
  counts = {}
  for name in ('bert_small', 'electra_small', 'ale_small'):
    _parse(name)
    report, task_config = count_flops.report_from_gin(vocab_size=V)
    counts[name] = count_flops.model_parameters(
        count_flops.build_pretrainer(task_config)
    )
    text = count_flops.format_report(report, counts[name])
    assert 'train FLOPs (ELECTRA formula)' in text
  # 001 Table IV: 13.5M, 13.5M, 4.8M (discriminator with embeddings).
  for name, expected in (
      ('bert_small', 13.5e6),
      ('electra_small', 13.5e6),
      ('ale_small', 4.8e6),
  ):
    assert abs(counts[name]['encoder'] - expected) / expected < 0.03
  # 001's ELECTRA ties the whole embedding block, as its code: the word
  # (V), position (512) and type (2) tables and the LayerNorm (2), E = 128.
  assert counts['electra_small']['generator_shared'] == (V + 512 + 2 + 2) * 128
  assert (
      counts['ale_small']['generator_only']
      < counts['electra_small']['generator_only']
  )
  assert 'generator_only' not in counts['bert_small']


def test_report_reproduces_electra_small_published_flops(clean_gin):
  del clean_gin
  # ELECTRA's flops_computation.py: ELECTRA-small (batch 128, 1M steps,
  # the MLM head on 20 of 128 tokens).
  _parse(
      'electra_small',
      [
          'pretrain_data.train_batch_size = 128',
          'pretrain_data.max_predictions_per_seq = 20',
          'experiment.train_steps = 1000000',
      ],
  )
  report, _ = count_flops.report_from_gin(vocab_size=V)
  assert sorted(report.networks) == ['discriminator', 'generator']
  assert report.total_train_flops() == pytest.approx(1.294e18, rel=1e-3)


def test_report_of_convbert_config_has_convbert_blocks(clean_gin):
  del clean_gin
  _parse(
      'electra_small',
      [
          "encoder.backbone = 'convbert'",
          'convbert.head_ratio = 2',
          'convbert.kernel_size = 7',
          'convbert.num_groups = 2',
      ],
  )
  report, _ = count_flops.report_from_gin(vocab_size=V)
  discriminator = report.networks['discriminator'].shape
  assert (
      discriminator.block.head_ratio,
      discriminator.block.kernel_size,
      discriminator.block.groups,
  ) == (2, 7, 2)
  # The generator (one head) keeps the ratio and, by the reference's rule
  # N' = max(1, 1 // 2), one self-attention head of its full width.
  generator = report.networks['generator'].shape
  assert (generator.heads, generator.block.head_ratio) == (1, 2)
  terms = flops.block_terms(generator)
  assert terms['attention_softmax'] == (
      flops.SOFTMAX_FLOPS * generator.seq_length
  )
  assert terms['attention_scores'] == (
      2 * generator.hidden * generator.seq_length
  )
  text = count_flops.format_report(report, dict(encoder=1))
  assert 'head_ratio=2 k=7 G=2' in text
  bert = dataclasses.replace(discriminator, block=flops.BlockFlops())
  assert flops.block_flops(discriminator) < flops.block_flops(bert)
