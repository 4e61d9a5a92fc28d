"""The original BERT/ELECTRA fine-tuning update, re-computed in numpy.

google-research/electra's `model/optimization.py`: the learning rate is the
linear decay times min(1, t / W) at global step t (before the update),
gradients are clipped to global norm 1.0, then `AdamWeightDecayOptimizer`
updates each variable with no bias correction,

    m = b1 m + (1 - b1) g,   v = b2 v + (1 - b2) g^2,
    u = m / (sqrt(v) + eps) [+ wd * p unless LayerNorm/bias],
    p = p - lr_t * layer_multiplier * u.

The reference below is that loop, written from those lines; ours is
`LayerwiseAdamWeightDecay(bias_correction=False)` on
`WarmupTimesPolynomialDecay`, with a dense and a sparse (embedding) gradient.
"""

import numpy as np
import pytest
import tensorflow as tf
import tf_keras

from official_repro.optimization import layerwise_decay
from official_repro.optimization import warmup_times_decay

_LR, _STEPS, _WARMUP, _WD, _EPS, _B1, _B2 = 1e-2, 10, 3, 0.01, 1e-6, 0.9, 0.999
_MULTIPLIERS = {'embeddings:0': 0.8**3, 'kernel:0': 0.8, 'bias:0': 1.0}


def _reference_lr(step):
  return _LR * (1 - step / _STEPS) * min(1.0, step / _WARMUP)


def _gradients(rng, step):
  """Dense gradients for `kernel` and `bias`; rows 1 and 3 of `embeddings`."""
  scale = 3.0 if step % 2 else 0.1  # Clipping acts on every other step.
  return {
      'embeddings': (np.array([1, 3]), scale * rng.normal(size=(2, 4))),
      'kernel': scale * rng.normal(size=(4, 3)),
      'bias': scale * rng.normal(size=3),
  }


def _original(initial, steps):
  """Variables after `steps` updates of the original's loop (float64)."""
  params = {k: v.astype(np.float64) for k, v in initial.items()}
  m = {k: np.zeros_like(v) for k, v in params.items()}
  v = {k: np.zeros_like(p) for k, p in params.items()}
  rng = np.random.default_rng(0)
  for step in range(steps):
    grads = _gradients(rng, step)
    rows, values = grads['embeddings']
    dense = np.zeros_like(params['embeddings'])
    np.add.at(dense, rows, values)
    grads = {**grads, 'embeddings': dense}
    norm = np.sqrt(sum(np.sum(g**2) for g in grads.values()))
    grads = {k: g * 1.0 / max(norm, 1.0) for k, g in grads.items()}
    for name, grad in grads.items():
      m[name] = _B1 * m[name] + (1 - _B1) * grad
      v[name] = _B2 * v[name] + (1 - _B2) * grad**2
      update = m[name] / (np.sqrt(v[name]) + _EPS)
      if name != 'bias':
        update = update + _WD * params[name]
      rate = _reference_lr(step) * _MULTIPLIERS[f'{name}:0']
      params[name] = params[name] - rate * update
  return params


def _ours(initial, steps, bias_correction):
  variables = {k: tf.Variable(v, name=k) for k, v in initial.items()}
  optimizer = layerwise_decay.LayerwiseAdamWeightDecay(
      lr_multipliers=_MULTIPLIERS,
      learning_rate=warmup_times_decay.WarmupTimesPolynomialDecay(
          _LR, _STEPS, _WARMUP
      ),
      weight_decay_rate=_WD,
      epsilon=_EPS,
      beta_1=_B1,
      beta_2=_B2,
      exclude_from_weight_decay=['LayerNorm', 'layer_norm', 'bias'],
      gradient_clip_norm=1.0,
      bias_correction=bias_correction,
  )
  rng = np.random.default_rng(0)
  for step in range(steps):
    grads = _gradients(rng, step)
    rows, values = grads['embeddings']
    sparse = tf.IndexedSlices(
        tf.constant(values, tf.float32),
        tf.constant(rows),
        tf.constant(initial['embeddings'].shape),
    )
    optimizer.apply_gradients(
        [
            (sparse, variables['embeddings']),
            (tf.constant(grads['kernel'], tf.float32), variables['kernel']),
            (tf.constant(grads['bias'], tf.float32), variables['bias']),
        ]
    )
  return {k: v.numpy() for k, v in variables.items()}


def _initial():
  rng = np.random.default_rng(1)
  return {
      'embeddings': rng.normal(size=(5, 4)).astype(np.float32),
      'kernel': rng.normal(size=(4, 3)).astype(np.float32),
      'bias': rng.normal(size=3).astype(np.float32),
  }


def test_the_original_update_is_reproduced_step_by_step():
  initial = _initial()
  expected, ours = _original(initial, _STEPS), _ours(initial, _STEPS, False)
  for name in initial:
    moved = np.abs(expected[name] - initial[name]).max()
    assert moved > 1e-3, name  # The steps moved every variable.
    np.testing.assert_allclose(ours[name], expected[name], rtol=0, atol=1e-6)


def test_keras_bias_correction_is_not_the_original_update():
  """The mutation the option exists for: bias correction left on."""
  initial = _initial()
  expected, ours = _original(initial, _STEPS), _ours(initial, _STEPS, True)
  assert np.abs(ours['kernel'] - expected['kernel']).max() > 1e-4


def test_the_schedule_is_the_decay_times_the_warmup_fraction():
  schedule = warmup_times_decay.WarmupTimesPolynomialDecay(_LR, _STEPS, _WARMUP)
  for step in range(_STEPS + 1):
    assert float(schedule(step)) == pytest.approx(
        _reference_lr(step), rel=1e-6, abs=1e-12
    )
  clone = tf_keras.optimizers.schedules.deserialize(
      tf_keras.optimizers.schedules.serialize(schedule)
  )
  assert clone.get_config() == schedule.get_config()
  no_warmup = warmup_times_decay.WarmupTimesPolynomialDecay(_LR, _STEPS, 0)
  assert float(no_warmup(0)) == pytest.approx(_LR)
  with pytest.raises(ValueError, match='decay_steps'):
    warmup_times_decay.WarmupTimesPolynomialDecay(_LR, 0, 0)
