"""Probes of a replaced-token detector, against naive re-computations."""

import itertools
import json
import os
import shutil

import numpy as np
import pytest
from scipy import special
import tensorflow as tf

from experiments.investigations import discriminator_horizon
from experiments.investigations import discriminator_probe_lib
from official_repro.common import cli
from official_repro.training import saved_runs

pytestmark = pytest.mark.slow


def pairwise_auc(labels, scores):
  """P(positive scores above negative), ties one half, by every pair."""
  wins = 0.0
  positives = [s for y, s in zip(labels, scores) if y]
  negatives = [s for y, s in zip(labels, scores) if not y]
  for p, n in itertools.product(positives, negatives):
    wins += 1.0 if p > n else 0.5 if p == n else 0.0
  return wins / (len(positives) * len(negatives))


def test_auc_is_the_pairwise_win_rate_with_ties_halved():
  rng = np.random.RandomState(0)
  labels = rng.rand(200) < 0.3
  scores = np.round(rng.normal(size=200) + labels, 1)  # many ties
  assert discriminator_probe_lib.auc(labels, scores) == pytest.approx(
      pairwise_auc(labels, scores), abs=1e-12
  )


def test_auc_of_a_perfect_reversed_and_constant_scorer():
  labels = np.array([0, 1, 0, 1, 1])
  assert discriminator_probe_lib.auc(labels, labels * 2.0) == 1.0
  assert discriminator_probe_lib.auc(labels, -labels * 2.0) == 0.0
  assert discriminator_probe_lib.auc(labels, np.ones(5)) == 0.5


def test_auc_is_nan_without_both_classes():
  assert np.isnan(discriminator_probe_lib.auc(np.zeros(3), np.arange(3.0)))
  assert np.isnan(discriminator_probe_lib.auc(np.ones(3), np.arange(3.0)))


def _tokens(seed=0, n=400, vocab=7):
  rng = np.random.RandomState(seed)
  labels = (rng.rand(n) < 0.3).astype(np.int64)
  probability = np.where(labels > 0, rng.rand(n), np.nan)
  return discriminator_probe_lib.DetectedTokens(
      sequence=rng.randint(0, 6, n),
      token_ids=rng.randint(0, vocab, n),
      labels=labels,
      logits=np.round(rng.normal(size=n) + labels, 1),
      generator_probability=probability,
      masked=int(labels.sum()) + 10,
      unchanged=10,
  )


def test_identity_scorer_is_each_tokens_replaced_rate_on_the_even_sequences():
  tokens = _tokens()
  replaced, seen = {}, {}
  for b, t, y in zip(tokens.sequence, tokens.token_ids, tokens.labels):
    if b % 2 == 0:
      seen[t] = seen.get(t, 0) + 1
      replaced[t] = replaced.get(t, 0) + y
  odd = [i for i, b in enumerate(tokens.sequence) if b % 2]
  labels = [tokens.labels[i] for i in odd]
  rates = [
      (replaced.get(tokens.token_ids[i], 0) + 1.0)
      / (seen.get(tokens.token_ids[i], 0) + 2.0)
      for i in odd
  ]
  identity, detector = discriminator_probe_lib.identity_auc(
      tokens, vocab_size=7
  )
  assert identity == pytest.approx(pairwise_auc(labels, rates), abs=1e-12)
  assert detector == pytest.approx(
      pairwise_auc(labels, [tokens.logits[i] for i in odd]), abs=1e-12
  )


def test_an_identity_only_source_is_found_by_the_identity_scorer():
  rng = np.random.RandomState(1)
  token_ids = rng.randint(0, 50, 4000)
  labels = (token_ids >= 40).astype(np.int64)  # only tokens 40-49 replaced
  tokens = discriminator_probe_lib.DetectedTokens(
      sequence=np.arange(4000) % 8,
      token_ids=token_ids,
      labels=labels,
      logits=rng.normal(size=4000),
      generator_probability=np.full(4000, np.nan),
      masked=0,
      unchanged=0,
  )
  identity, detector = discriminator_probe_lib.identity_auc(
      tokens, vocab_size=50
  )
  assert identity == 1.0
  assert abs(detector - 0.5) < 0.05


def test_plausibility_bands_by_a_loop_over_tokens():
  tokens = _tokens(seed=2)
  bands = discriminator_probe_lib.plausibility_bands(tokens)
  edges = discriminator_probe_lib.PLAUSIBILITY_EDGES
  assert [(b['low'], b['high']) for b in bands] == list(zip(edges, edges[1:]))
  originals = [s for y, s in zip(tokens.labels, tokens.logits) if y == 0]
  for band in bands:
    members = [
        s
        for y, s, p in zip(
            tokens.labels, tokens.logits, tokens.generator_probability
        )
        if y > 0
        and band['low'] <= p
        and (p < band['high'] or (band['high'] == 1.0 and p <= 1.0))
    ]
    assert band['replaced'] == len(members)
    assert band['recall'] == pytest.approx(np.mean([s > 0 for s in members]))
    assert band['auc'] == pytest.approx(
        pairwise_auc(
            [1] * len(members) + [0] * len(originals), members + originals
        ),
        abs=1e-12,
    )
  assert sum(b['replaced'] for b in bands) == tokens.labels.sum()


def test_each_slots_probability_lands_on_its_position_of_the_real_tokens():
  batch = dict(
      input_mask=np.array([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]]),
      masked_lm_positions=np.array([[1, 3], [2, 0]]),
      masked_lm_weights=np.array([[1.0, 1.0], [1.0, 0.0]]),
      masked_lm_ids=np.array([[7, 8], [9, 0]]),
  )
  corrupted = np.array([[2, 6, 5, 8, 0], [2, 4, 5, 0, 0]])
  labels = np.array([[0, 1, 0, 0, 0], [0, 0, 1, 0, 0]])
  logits = np.arange(10.0).reshape(2, 5)
  replacements = np.array([[6, 8], [5, 0]])
  probabilities = np.array([[0.25, 0.5], [0.75, 0.9]])
  tokens = discriminator_probe_lib._flatten(
      3, batch, corrupted, labels, logits, replacements, probabilities
  )
  np.testing.assert_array_equal(tokens.token_ids, [2, 6, 5, 8, 2, 4, 5])
  np.testing.assert_array_equal(tokens.labels, [0, 1, 0, 0, 0, 0, 1])
  np.testing.assert_array_equal(tokens.logits, [0, 1, 2, 3, 5, 6, 7])
  np.testing.assert_array_equal(
      tokens.generator_probability,
      [np.nan, 0.25, np.nan, np.nan, np.nan, np.nan, 0.75],
  )
  np.testing.assert_array_equal(tokens.sequence, [3, 3, 3, 3, 4, 4, 4])
  # Slot (0, 1) sampled its original (8); the unweighted slot is not counted.
  assert (tokens.masked, tokens.unchanged) == (3, 1)


def test_a_run_without_a_detector_is_refused_in_one_line(exported_encoder):
  with pytest.raises(
      cli.UserError, match='no replaced-token detector'
  ) as error:
    discriminator_probe_lib.probe(exported_encoder, steps=1)
  assert '\n' not in str(error.value)
  assert os.path.basename(exported_encoder) in str(error.value)


def test_a_checkpoint_is_named_by_prefix_file_or_name_else_refused(
    tiny_electra_run,
):
  prefix = os.path.join(tiny_electra_run, 'ckpt-1')
  for given in (prefix, prefix + '.index', 'ckpt-1'):
    assert (
        discriminator_probe_lib._checkpoint_prefix(tiny_electra_run, given)
        == prefix
    )
  with pytest.raises(
      cli.UserError, match='ckpt-9: no such checkpoint in .*; it has ckpt-1'
  ) as error:
    discriminator_probe_lib.probe(
        tiny_electra_run, steps=1, checkpoint='ckpt-9'
    )
  assert '\n' not in str(error.value)


def test_scripts_critic_is_probed_as_its_detector(tiny_script_run):
  result = discriminator_probe_lib.probe(str(tiny_script_run), steps=1)
  generator = result['sources']['generator']
  replaced = round(generator['replaced_share'] * generator['tokens'])
  assert replaced > 0
  assert sum(b['replaced'] for b in result['plausibility']) == replaced
  for metrics in result['sources'].values():
    assert 0.0 <= metrics['auc'] <= 1.0
  # The critic's "replaced" log-odds is -logsumexp of its V token logits
  # (004 Eq. 4-5: the replaced class has logit 0), on the corrupted ids.
  run = saved_runs.load(str(tiny_script_run))
  _, detect = discriminator_probe_lib._probed_functions(run)
  batch = dict(
      input_word_ids=tf.constant([[2, 4, 4, 7, 3, 0]]),
      input_mask=tf.constant([[1, 1, 1, 1, 1, 0]]),
      input_type_ids=tf.zeros([1, 6], tf.int32),
      masked_lm_positions=tf.constant([[1, 2]]),
      masked_lm_ids=tf.constant([[5, 6]]),
      masked_lm_weights=tf.constant([[1.0, 1.0]]),
  )
  corrupted, labels, logits = detect(batch, tf.constant([[8, 6]]))
  np.testing.assert_array_equal(corrupted, [[2, 8, 6, 7, 3, 0]])
  np.testing.assert_array_equal(labels, [[0, 1, 0, 0, 0, 0]])
  token_logits = run.model.token_logits(
      corrupted, batch['input_mask'], batch['input_type_ids'], training=False
  ).numpy()
  np.testing.assert_allclose(
      logits, -special.logsumexp(token_logits, axis=-1), rtol=1e-5, atol=1e-5
  )


def test_the_horizon_probes_each_checkpoint_once_and_reports_each(
    tiny_electra_run, tmp_path
):
  run = tmp_path / 'run'
  shutil.copytree(tiny_electra_run, run)
  probes = discriminator_horizon.probe_checkpoints(str(run), 1)
  assert sorted(probes) == [1, 2]
  assert probes[1]['steps'] == probes[2]['steps'] == 1
  kept_dir = run / discriminator_horizon.PROBES_SUBDIR
  first, second = kept_dir / 'step_1.json', kept_dir / 'step_2.json'
  before = first.stat().st_mtime_ns, second.stat().st_mtime_ns
  # Same --probe_steps, both checkpoints on disk: both probes are reused.
  discriminator_horizon.probe_checkpoints(str(run), 1)
  assert (first.stat().st_mtime_ns, second.stat().st_mtime_ns) == before
  # A probe from before `steps` was kept is reused when its batches match.
  older = json.loads(second.read_text())
  del older['steps']
  second.write_text(json.dumps(older))
  before = second.stat().st_mtime_ns
  discriminator_horizon.probe_checkpoints(str(run), 1)
  assert second.stat().st_mtime_ns == before
  # The run deletes ckpt-1, as max_to_keep does: its probe stays, while
  # ckpt-2, probed on other batches than asked, is probed again.
  for path in run.glob('ckpt-1.*'):
    path.unlink()
  before = first.stat().st_mtime_ns
  probes = discriminator_horizon.probe_checkpoints(str(run), 2)
  assert sorted(probes) == [1, 2] and first.stat().st_mtime_ns == before
  assert (probes[1]['steps'], probes[2]['steps']) == (1, 2)
  lines = discriminator_horizon.probe_lines(probes)
  rows = [
      line
      for line in lines
      if line.startswith('| 1 |') or line.startswith('| 2 |')
  ]
  assert len(rows) == 2
  on_half = probes[2]['sources']['generator']['auc_on_identity_half']
  assert rows[1].split(' | ')[1] == f'{on_half:.3f}'
  assert rows[1].endswith(f" | {probes[2]['batches']} |")
  assert '### The probe at step 2' in lines
