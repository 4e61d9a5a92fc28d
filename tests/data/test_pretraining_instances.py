"""Tests for official_repro.data.pretraining_instances."""

import random

import pytest

from official_repro.data import pretraining_instances as pi

CLS = 2
SEP = 3


def _make_documents(num_documents=12, seed=0):
  """Documents of sentences whose token ids are unique across the corpus."""
  rng = random.Random(seed)
  next_id = 10
  documents = []
  for _ in range(num_documents):
    document = []
    for _ in range(rng.randint(2, 30)):
      length = rng.randint(1, 20)
      document.append(list(range(next_id, next_id + length)))
      next_id += length
    documents.append(document)
  return documents


def _create(documents, seed=1, **options):
  """`(instances, stats)` of every document, shuffled by one seeded rng."""
  rng = random.Random(seed)
  maker = pi.InstanceMaker(pi.InstanceOptions(**options), CLS, SEP)
  documents = [maker.cut_long_sentences(document) for document in documents]
  documents = [document for document in documents if document]
  instances = []
  for index in range(len(documents)):
    instances.extend(maker.from_document(documents, index, rng))
  rng.shuffle(instances)
  return instances, maker.stats


def _segments(instance):
  first_sep = instance.input_ids.index(SEP)
  return (
      instance.input_ids[1:first_sep],
      instance.input_ids[first_sep + 1 : -1],
  )


def _is_contiguous(tokens):
  return all(b == a + 1 for a, b in zip(tokens, tokens[1:]))


@pytest.mark.parametrize('nsp', [False, True])
@pytest.mark.parametrize('max_seq_length', [8, 32, 128])
def test_instance_structure(nsp, max_seq_length):
  instances, stats = _create(
      _make_documents(),
      max_seq_length=max_seq_length,
      short_seq_prob=0.2,
      next_sentence_prediction=nsp,
  )
  assert stats.instances == len(instances) > 0
  for instance in instances:
    ids = instance.input_ids
    assert ids[0] == CLS and ids[-1] == SEP
    assert ids.count(SEP) == 2 and ids.count(CLS) == 1
    assert len(ids) <= max_seq_length
    segment_a, segment_b = _segments(instance)
    assert segment_a and segment_b
    assert instance.segment_ids == (
        [0] * (len(segment_a) + 2) + [1] * (len(segment_b) + 1)
    )
    # Segments are runs of a document's token stream (token ids are
    # consecutive within a document).
    assert _is_contiguous(segment_a)
    assert _is_contiguous(segment_b)
    if nsp:
      assert instance.next_sentence_label in (0, 1)
    else:
      assert instance.next_sentence_label is None
  assert stats.tokens == sum(len(i.input_ids) for i in instances)


def test_actual_next_follows_segment_a():
  instances, _ = _create(
      _make_documents(), max_seq_length=64, next_sentence_prediction=True
  )
  for instance in instances:
    segment_a, segment_b = _segments(instance)
    if instance.next_sentence_label == 0:
      assert segment_b[0] > segment_a[-1]


def test_nsp_labels_balanced():
  instances, stats = _create(
      _make_documents(40), max_seq_length=64, next_sentence_prediction=True
  )
  labels = [i.next_sentence_label for i in instances]
  assert 0 in labels and 1 in labels
  assert 0.3 < labels.count(1) / len(labels) < 0.75
  assert stats.random_next_instances == labels.count(1)


def test_random_next_returns_unused_sentences():
  # Every sentence contributes to an instance of its own document as A or
  # as an actual-next B, even when random B segments take its place.
  documents = [
      [[1000 * (d + 1) + 3 * s + k for k in range(3)] for s in range(40)]
      for d in range(6)
  ]
  instances, _ = _create(
      documents,
      max_seq_length=40,
      short_seq_prob=0.0,
      next_sentence_prediction=True,
  )
  covered = set()
  for instance in instances:
    segment_a, segment_b = _segments(instance)
    covered.update(segment_a)
    if instance.next_sentence_label == 0:
      covered.update(segment_b)
  for document in documents:
    for sentence in document:
      assert covered & set(sentence), sentence


def test_short_seq_prob_zero_fills_to_max_length():
  documents = _make_documents(20)
  max_seq_length = 32
  instances, stats = _create(
      documents,
      max_seq_length=max_seq_length,
      short_seq_prob=0.0,
      next_sentence_prediction=False,
  )
  assert stats.short_target_chunks == 0
  full = sum(len(i.input_ids) == max_seq_length for i in instances)
  # Only the last chunk of a document can fall short.
  assert full >= len(instances) - len(documents)


def test_short_seq_prob_one_makes_short_instances():
  documents = _make_documents(20)
  long_instances, _ = _create(documents, max_seq_length=64, short_seq_prob=0.0)
  short_instances, stats = _create(
      documents, max_seq_length=64, short_seq_prob=1.0
  )
  assert stats.short_target_chunks > 0

  def mean(xs):
    return sum(len(x.input_ids) for x in xs) / len(xs)

  assert mean(short_instances) < 0.8 * mean(long_instances)
  assert len(short_instances) > len(long_instances)


def test_deterministic_given_seed():
  documents = _make_documents()
  first, _ = _create(
      documents,
      seed=7,
      short_seq_prob=0.3,
      next_sentence_prediction=True,
      max_seq_length=24,
  )
  second, _ = _create(
      documents,
      seed=7,
      short_seq_prob=0.3,
      next_sentence_prediction=True,
      max_seq_length=24,
  )
  other, _ = _create(
      documents,
      seed=8,
      short_seq_prob=0.3,
      next_sentence_prediction=True,
      max_seq_length=24,
  )
  assert first == second
  assert first != other


def test_truncation_counted():
  documents = [[list(range(100, 130)), list(range(130, 160))]]
  instances, stats = _create(documents, max_seq_length=16, short_seq_prob=0.0)
  assert all(len(i.input_ids) <= 16 for i in instances)
  assert stats.truncated_instances >= 1
  assert stats.tokens_truncated > 0


def test_long_sentence_is_cut_not_lost():
  documents = [[list(range(100, 400))]]
  instances, stats = _create(documents, max_seq_length=32, short_seq_prob=0.0)
  assert stats.long_sentences_split == 1
  covered = {t for i in instances for t in i.input_ids}
  assert set(range(100, 400)) <= covered


def test_single_sentence_document_without_nsp_is_split_inside():
  instances, _ = _create([[[10, 11, 12, 13]]], max_seq_length=16)
  assert len(instances) == 1
  segment_a, segment_b = _segments(instances[0])
  assert segment_a + segment_b == [10, 11, 12, 13]


def test_too_short_chunks_and_empty_input_skipped():
  instances, stats = _create([[[10]], [], [[]]], max_seq_length=16)
  assert instances == []
  assert stats.chunks_skipped == 1


def test_invalid_options():
  with pytest.raises(ValueError, match='max_seq_length'):
    pi.InstanceOptions(max_seq_length=4)
  with pytest.raises(ValueError, match='short_seq_prob'):
    pi.InstanceOptions(short_seq_prob=1.5)
