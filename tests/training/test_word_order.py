"""Word order: shuffled held-out copies, the evaluation beside its ceiling."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from official_repro.training import word_order
from official_repro.data import pretrain_dataloader
from official_repro.data import records

# The tests share a trained run (a module fixture): one xdist worker runs
# them all (--dist loadgroup, pytest.ini).
pytestmark = pytest.mark.xdist_group('test_word_order')


def _examples(record_dir, split):
  metadata = records.load_metadata(record_dir)
  spec = records.feature_spec(metadata)
  return [
      {
          name: value.numpy()
          for name, value in tf.io.parse_single_example(record, spec).items()
      }
      for path in records.split_files(metadata, record_dir, split)
      for record in tf.data.TFRecordDataset(path)
  ]


def test_shuffling_keeps_each_segments_words_and_every_marker(
    tiny_records, tmp_path
):
  shuffled = word_order.shuffled_copy(tiny_records, str(tmp_path / 's'))
  special = set(
      records.load_metadata(tiny_records)['special_token_ids'].values()
  )
  before = _examples(tiny_records, 'eval')
  after = _examples(shuffled, 'eval')
  assert len(after) == len(before) > 0
  moved = 0
  for old, new in zip(before, after):
    for name in ('input_mask', 'segment_ids'):
      np.testing.assert_array_equal(old[name], new[name])
    is_special = np.isin(old['input_ids'], list(special))
    np.testing.assert_array_equal(
        old['input_ids'][is_special], new['input_ids'][is_special]
    )
    for segment in (0, 1):
      words = (
          (~is_special)
          & (old['segment_ids'] == segment)
          & (old['input_mask'] == 1)
      )
      assert collections.Counter(
          old['input_ids'][words]
      ) == collections.Counter(new['input_ids'][words])
    moved += int(np.sum(old['input_ids'] != new['input_ids']))
  assert moved > 0
  assert records.load_metadata(shuffled)['splits']['train']['num_examples'] == 0


def test_statically_masked_records_are_refused(static_records, tmp_path):
  with pytest.raises(ValueError, match='statically masked'):
    word_order.shuffled_copy(static_records, str(tmp_path / 's'))


@pytest.fixture(scope='module')
def evaluated(run_tiny_pretraining, tiny_records, tmp_path_factory):
  """(the run's own result, word_order.evaluate) of a tiny masked-LM run."""
  model_dir = tmp_path_factory.mktemp('word_order') / 'run'
  result = run_tiny_pretraining(model_dir, ['gin/pretrain/masked_lm.gin'])
  return result, word_order.evaluate(str(model_dir), tiny_records, steps=-1)


@pytest.mark.slow
def test_evaluation_matches_the_runs_own(evaluated):
  result, ours = evaluated
  for name in ('masked_lm_accuracy', 'lm_example_loss'):
    assert ours[name] == pytest.approx(result['eval'][name], rel=1e-5), name
  # The slot-level accuracy is recomputed from the logits; it must agree
  # with the task's weighted metric.
  assert ours['accuracy'] == pytest.approx(ours['masked_lm_accuracy'], abs=1e-6)
  assert 0 < ours['mask_token_slots'] < ours['slots']


def test_the_ceiling_is_a_count_over_the_evaluated_slots(
    evaluated, tiny_records, record_words
):
  _, ours = evaluated

  metadata = records.load_metadata(tiny_records)
  mask = metadata['special_token_ids']['mask']
  replacements = metadata['vocab_size'] - len(
      set(metadata['special_token_ids'].values())
  )
  train = collections.Counter(record_words(tiny_records, 'train'))
  ((top, most),) = train.most_common(1)
  _, config = pretrain_dataloader.pretraining_data_configs(
      tiny_records, max_seq_length=32, train_batch_size=8
  )
  # 80/10/10: a shown word is the original with weight 0.1 * (count + count
  # / R) and any other word with 0.1 * count(other) / R: copy it unless it
  # is that much rarer than the most frequent; behind [MASK], `top`.
  hits = mask_hits = slots = mask_slots = 0
  for batch in pretrain_dataloader.PretrainDataLoader(config).load():
    batch = {name: value.numpy() for name, value in batch.items()}
    ids = batch['input_word_ids']
    for row, positions in enumerate(batch['masked_lm_positions']):
      for slot, position in enumerate(positions):
        if batch['masked_lm_weights'][row, slot] == 0:
          continue
        shown = int(ids[row, position])
        original = int(batch['masked_lm_ids'][row, slot])
        copies = shown != mask and train[shown] * (replacements + 1) >= most
        hit = original == (shown if copies else top)
        slots += 1
        hits += hit
        if shown == mask:
          mask_slots += 1
          mask_hits += hit
  assert (ours['slots'], ours['mask_token_slots']) == (slots, mask_slots)
  assert ours['context_free'] == pytest.approx(hits / slots)
  assert ours['mask_token_context_free'] == pytest.approx(
      mask_hits / mask_slots
  )
