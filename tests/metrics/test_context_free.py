"""The context-free ceiling: brute force, the 80/10/10 estimate, the counts."""

import collections
import itertools

import numpy as np
import pytest
import tensorflow as tf

from official_repro.data import masking
from official_repro.data import records
from official_repro.metrics import context_free

_MASK = 4
_SPECIAL = (0, 1, 2, 3, 4)


def _joint(share, mask_fraction, random_fraction):
  """P(shown, original) by enumerating what masking does to each token."""
  words = [t for t in range(len(share)) if t not in _SPECIAL]
  keep = 1 - mask_fraction - random_fraction
  joint = collections.defaultdict(float)
  for original in words:
    joint[(_MASK, original)] += share[original] * mask_fraction
    joint[(original, original)] += share[original] * keep
    for replacement in words:
      joint[(replacement, original)] += (
          share[original] * random_fraction / len(words)
      )
  return joint


@pytest.mark.parametrize(
    'fractions', [(0.8, 0.1), (0.85, 0.0), (0.8, 0.2), (0.5, 0.4)]
)
@pytest.mark.parametrize('seed', range(4))
def test_the_predictor_is_the_best_of_every_context_free_map(fractions, seed):
  rng = np.random.default_rng(seed)
  counts = np.zeros(9, np.int64)
  # Four words, one of them far rarer than the rest (where copying loses).
  counts[5:] = rng.integers(1, 50, size=4) * [1, 1, 1, 400]
  counts[5 + seed % 3] = rng.integers(0, 2)
  share = counts / counts.sum()
  joint = _joint(share, *fractions)
  shown_tokens = sorted({shown for shown, _ in joint})

  def expected(mapping):
    return sum(p for (s, o), p in joint.items() if mapping[s] == o)

  best = max(
      expected(dict(zip(shown_tokens, guesses)))
      for guesses in itertools.product(range(5, 9), repeat=len(shown_tokens))
  )
  predictor = context_free.ContextFreePredictor(
      counts=counts,
      mask_token_id=_MASK,
      mask_token_fraction=fractions[0],
      random_token_fraction=fractions[1],
      num_replacements=4,
  )
  table = predictor.table()
  assert expected({s: table[s] for s in shown_tokens}) == pytest.approx(best)


def _masked_batch(share, seed=0):
  """Sequences where token 10 has `share` of the words, masked 80/10/10."""
  rng = np.random.default_rng(seed)
  size, length, vocab_size = 2000, 64, 500
  words = np.where(
      rng.random((size, length)) < share,
      10,
      rng.integers(11, vocab_size, size=(size, length)),
  )
  words[:, 0], words[:, -1] = 2, 3  # [CLS], [SEP]
  batch = masking.mask_batch(
      tf.constant(words),
      tf.ones_like(words),
      config=masking.MaskingConfig(max_predictions_per_seq=10),
      mask_token_id=_MASK,
      special_token_ids=_SPECIAL,
      vocab_size=vocab_size,
      seed=tf.constant([seed, 1]),
  )
  counts = np.bincount(words[:, 1:-1].ravel(), minlength=vocab_size)
  predictor = context_free.ContextFreePredictor(
      counts=counts,
      mask_token_id=_MASK,
      mask_token_fraction=0.8,
      random_token_fraction=0.1,
      num_replacements=vocab_size - len(_SPECIAL),
  )
  return {name: value.numpy() for name, value in batch.items()}, predictor


@pytest.mark.parametrize('share', [0.05, 0.3])
def test_under_80_10_10_it_copies_kept_tokens_and_guesses_masks(share):
  batch, predictor = _masked_batch(share)
  shown, original = context_free.slots(batch)
  accuracy = np.mean(predictor.predict(shown) == original)
  # The kept tenth copied, the [MASK] slots answered with the frequent
  # token, a random replacement right only by chance.
  assert accuracy == pytest.approx(0.1 + 0.8 * share, abs=0.015)


def test_report_scores_a_model_and_the_ceiling_on_the_same_slots():
  batch, predictor = _masked_batch(0.3)
  shown, original = context_free.slots(batch)

  def copy(b):
    return np.take_along_axis(
        b['input_word_ids'], b['masked_lm_positions'], axis=1
    )

  report = context_free.masked_lm_report(copy, [batch], predictor)
  masked = shown == _MASK
  assert report['slots'] == len(shown) == int(batch['masked_lm_weights'].sum())
  assert report['mask_token_slots'] == int(masked.sum())
  assert report['accuracy'] == pytest.approx(np.mean(shown == original))
  assert report['mask_token_accuracy'] == 0.0
  assert report['mask_token_context_free'] == pytest.approx(
      np.mean(original[masked] == 10)
  )
  oracle = context_free.masked_lm_report(
      lambda b: b['masked_lm_ids'], [batch], predictor
  )
  assert oracle['accuracy'] == oracle['mask_token_accuracy'] == 1.0
  assert oracle['context_free'] == report['context_free']


def test_the_predictor_counts_the_training_words(tiny_records, record_words):
  predictor = context_free.ContextFreePredictor.from_records(
      tiny_records, 0.8, 0.1
  )
  metadata = records.load_metadata(tiny_records)
  expected = collections.Counter(record_words(tiny_records, 'train'))
  assert dict(
      (token, count) for token, count in enumerate(predictor.counts) if count
  ) == dict(expected)
  assert predictor.mask_token_id == metadata['special_token_ids']['mask']
  assert predictor.num_replacements == metadata['vocab_size'] - len(
      set(metadata['special_token_ids'].values())
  )
  assert predictor.predict(np.array([predictor.mask_token_id])) == [
      expected.most_common(1)[0][0]
  ]
