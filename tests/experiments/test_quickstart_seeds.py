"""Tests of the quickstart-over-seeds report."""

from experiments import quickstart_seeds


def _result(in_order, shuffled, context_free):
  return dict(
      in_order=dict(
          accuracy=in_order,
          context_free=context_free,
          mask_token_accuracy=in_order / 2,
          mask_token_context_free=0.05,
      ),
      shuffled=dict(accuracy=shuffled),
  )


def test_a_row_per_seed_and_each_control_judged():
  results = [_result(0.24, 0.12, 0.143), _result(0.23, 0.126, 0.143)]
  text = quickstart_seeds.report([1, 2], results)
  assert '| 1 | 0.240 | 0.120 | 0.143 | 0.120 | 0.050 |' in text
  assert '| 2 | 0.230 | 0.126 | 0.143 | 0.115 | 0.050 |' in text
  # Gap 0.112; noise 2 * sqrt((0.00707^2 + 0.00424^2) / 2) = 0.012.
  assert '- in order against shuffled: +0.112 (noise 0.012): ahead.' in text
  assert text.count(': ahead.') == 2


def test_a_gap_within_the_seeds_spread_is_not_a_lead():
  results = [_result(0.15, 0.10, 0.14), _result(0.13, 0.30, 0.14)]
  text = quickstart_seeds.report([1, 2], results)
  assert 'in order against no context: +0.000 (noise 0.020)' in text
  assert text.count('within noise') == 2
