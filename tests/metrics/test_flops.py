"""ELECTRA's FLOPs formula reproduces its published values; budgets; CLI."""

import os

import gin
import pytest

from official_repro.metrics import flops
from official_repro.training import gin_utils

V = 30522


def _net(hidden, layers, embedding, seq_length):
  return flops.NetworkShape(hidden=hidden, layers=layers, embedding=embedding,
                            intermediate=4 * hidden,
                            heads=max(1, hidden // 64),
                            seq_length=seq_length, vocab_size=V)


def _electra(hidden, generator_hidden, embedding, seq_length):
  return (flops.network_flops(_net(hidden, 12, embedding, seq_length), 'rtd') +
          flops.network_flops(
              _net(generator_hidden, 12, embedding, seq_length), 'mlm'))


def _bert(hidden, embedding, seq_length):
  return flops.network_flops(_net(hidden, 12, embedding, seq_length), 'mlm')


# ELECTRA's flops_computation.py outputs (as quoted in its README/paper).
@pytest.mark.parametrize('per_token, batch, steps, seq, published', [
    (lambda: _electra(256, 64, 128, 128), 128, 1e6, 128, 1.294e18),
    (lambda: _bert(256, 128, 128), 128, 1.45e6, 128, 1.419e18),
    (lambda: _bert(768, 768, 512), 256, 1e6, 512, 6.428e19),
    (lambda: _electra(768, 256, 768, 512), 256, 766e3, 512, 6.425e19),
])
def test_reproduces_published_values(per_token, batch, steps, seq, published):
  value = flops.train_flops(per_token(), batch, steps, seq)
  assert abs(value - published) / published < 0.005


def test_steps_for_budget_inverts_train_flops():
  per_token = _bert(256, 128, 128)
  budget = flops.train_flops(per_token, 1024, 163000, 128)
  assert flops.steps_for_budget(budget, per_token, 1024, 128) == (
      pytest.approx(163000))


def test_albert_shared_block_costs_compute_like_bert():
  bert = _net(256, 12, 128, 128)
  assert flops.network_flops(bert, 'rtd') > 12 * flops.block_flops(bert)


@pytest.fixture
def clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def test_report_and_parameters_of_paper_configs(clean_gin):
  del clean_gin
  counts = {}
  for name in ('bert_small', 'electra_small', 'ale_small'):
    gin.clear_config()
    gin_utils.parse_config([os.path.join(
        gin_utils.REPO_ROOT, 'gin/papers/001_ale', name + '.gin')], [])
    report = flops.report_from_gin(vocab_size=V)
    counts[name] = flops.model_parameters(flops.build_pretrainer(report))
    text = flops.format_report(report, counts[name])
    assert 'train FLOPs (ELECTRA formula)' in text
  # 001 Table IV: 13.5M, 13.5M, 4.8M (discriminator with embeddings).
  for name, expected in (('bert_small', 13.5e6), ('electra_small', 13.5e6),
                         ('ale_small', 4.8e6)):
    assert abs(counts[name]['discriminator'] - expected) / expected < 0.03
  assert counts['electra_small']['shared'] == V * 128
  assert counts['ale_small']['generator_only'] < counts['electra_small'][
      'generator_only']
