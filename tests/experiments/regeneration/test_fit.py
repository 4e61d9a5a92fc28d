"""Tests of experiments.regeneration.fit."""

import pytest

from experiments.regeneration import fit
from official_repro.metrics import flops

_GIB = 1024**3


def _shape(hidden=1024, layers=24, heads=16, seq=512, vocab=30522):
  return flops.NetworkShape(
      hidden=hidden,
      layers=layers,
      embedding=hidden,
      intermediate=4 * hidden,
      heads=heads,
      seq_length=seq,
      vocab_size=vocab,
  )


def _report(network, batch, predictions=76):
  return flops.ComputeReport(
      objective='masked_lm',
      seq_length=network.seq_length,
      batch_size=batch,
      train_steps=1,
      max_predictions=predictions,
      networks={
          'encoder': flops.NetworkCost(network, 'bert', {'mlm_head': 1.0})
      },
  )


@pytest.mark.parametrize(
    'name, replicas, hbm',
    [
        ('v3-8', 8, 16),
        ('v2-32', 32, 8),
        ('v4-8', 4, 32),
        ('v5p-16', 8, 95),
        ('v5litepod-16', 16, 16),
        ('v6e-8', 8, 32),
    ],
)
def test_replicas_and_memory_per_replica(name, replicas, hbm):
  device = fit.accelerator(name)
  assert (device.replicas, device.hbm_gib) == (replicas, hbm)


@pytest.mark.parametrize('name', ['v9-8', 'v3', 'v3-x', 'tpu-8'])
def test_an_unknown_accelerator_is_refused(name):
  with pytest.raises(ValueError, match='expected VERSION-SIZE'):
    fit.accelerator(name)


def test_the_global_batch_must_divide_over_the_replicas():
  assert fit.per_replica_batch(1024, fit.accelerator('v3-8'), 'r') == 128
  with pytest.raises(ValueError, match='100 does not divide over the 8'):
    fit.per_replica_batch(100, fit.accelerator('v3-8'), 'r')


@pytest.mark.parametrize(
    'hidden, heads, seq, batch', [(768, 12, 128, 32), (1024, 16, 512, 8)]
)
def test_activations_are_korthikanti_et_al_in_bfloat16(
    hidden, heads, seq, batch
):
  # Korthikanti et al. 2022, Eq. (1) without tensor parallelism:
  # s * b * h * (34 + 5 * a * s / h) bytes per layer (16-bit, i = 4h).
  expected = seq * batch * hidden * (34 + 5 * heads * seq / hidden)
  net = _shape(hidden=hidden, heads=heads, seq=seq)
  assert fit.layer_activation_bytes(net, batch) == pytest.approx(expected)


def test_state_is_weights_gradients_and_two_adam_slots_in_float32():
  memory = fit.estimate(_report(_shape(), 1), 1000, 'lamb', 1)
  assert memory.state == 1000 * 4 * 4
  assert fit.estimate(_report(_shape(), 1), 1000, 'sgd', 1).state == 8000


def test_a_large_model_at_a_v3_8_per_core_batch_is_refused_with_the_fix():
  report = _report(_shape(), batch=2048)  # 003's large: 2048 x 512
  result = fit.check(report, 335_000_000, 'lamb', fit.accelerator('v3-8'), 'r')
  assert result.per_replica_batch == 256 and not result.fits
  reason = fit.refusal(result, 2048, 'teams_large on a v3-8')
  assert reason.startswith('teams_large on a v3-8: 256 per replica')
  assert f'at most {result.largest_batch} examples per replica' in reason
  assert 'e.g. v3-' in reason
  # The suggested slice fits.
  suggested = reason.split('e.g. ')[1].split(')')[0]
  bigger = fit.check(
      report, 335_000_000, 'lamb', fit.accelerator(suggested), 'r'
  )
  assert bigger.fits and fit.refusal(bigger, 2048, 'r') is None


def test_the_largest_batch_is_the_last_that_fits():
  report = _report(_shape(hidden=256, layers=12, heads=4, seq=128), 128)
  result = fit.check(report, 14_000_000, 'lamb', fit.accelerator('v3-8'), 'r')
  device = fit.accelerator('v3-8')
  at = lambda b: fit.estimate(report, 14_000_000, 'lamb', b).total  # noqa: E731
  assert at(result.largest_batch) <= device.hbm_gib * _GIB
  assert at(result.largest_batch + 1) > device.hbm_gib * _GIB


def test_accelerator_items_give_a_default_and_per_run_types():
  assert fit.parse_types(('v3-8', 'teams_large=v3-128')) == (
      'v3-8',
      {'teams_large': 'v3-128'},
  )
  assert fit.parse_types(()) == ('v3-8', {})
  with pytest.raises(ValueError, match='two defaults'):
    fit.parse_types(('v3-8', 'v4-8'))
