"""Tests of corpus and per-utterance WER against hand-counted edits."""

import jiwer
import pytest

from official_repro.metrics import wer


def test_substitution_and_deletion_counted_by_hand():
  # 'sat' -> 'sit' is a substitution, the second 'the' is deleted.
  (counts,) = wer.utterance_error_counts(
      ['the cat sat on the mat'], ['the cat sit on mat']
  )
  assert counts == wer.ErrorCounts(
      substitutions=1, deletions=1, insertions=0, reference_words=6
  )
  assert counts.errors == 2
  assert counts.wer == pytest.approx(2 / 6)


def test_insertions_can_push_wer_above_one():
  (counts,) = wer.utterance_error_counts(['a b'], ['x a b c d'])
  assert (counts.insertions, counts.errors, counts.wer) == (3, 3, 1.5)


def test_corpus_wer_is_total_edits_over_total_reference_words():
  references = ['the cat sat on the mat', 'a b']
  hypotheses = ['the cat sit on mat', 'a b c d']
  total = wer.corpus_error_counts(references, hypotheses)
  # (2 + 2) / (6 + 2), not the mean of 2/6 and 2/2.
  assert total.wer == pytest.approx(0.5)
  assert total.as_dict() == {
      'substitutions': 1,
      'deletions': 1,
      'insertions': 2,
      'errors': 4,
      'reference_words': 8,
      'wer': 0.5,
  }
  assert total.wer == pytest.approx(jiwer.wer(references, hypotheses))


def test_empty_hypothesis_deletes_every_reference_word():
  (counts,) = wer.utterance_error_counts(['one two three'], [''])
  assert (counts.deletions, counts.wer) == (3, 1.0)


def test_empty_reference_counts_insertions_and_has_no_wer():
  counts = wer.utterance_error_counts(['', 'a'], ['x y', 'a'])
  assert counts[0] == wer.ErrorCounts(insertions=2, reference_words=0)
  assert counts[1] == wer.ErrorCounts(reference_words=1)
  with pytest.raises(ValueError, match='no words'):
    _ = counts[0].wer
  assert counts[0].as_dict()['wer'] is None
  assert wer.corpus_error_counts(['', 'a'], ['x y', 'a']).wer == 2.0


def test_any_whitespace_separates_words():
  (counts,) = wer.utterance_error_counts(['a  b\tc'], [' a b c '])
  assert counts.errors == 0 and counts.reference_words == 3


def test_case_is_significant():
  (counts,) = wer.utterance_error_counts(['Hello'], ['hello'])
  assert counts.substitutions == 1


def test_mismatched_lengths_are_an_error():
  with pytest.raises(ValueError, match='2 references but 1 hypotheses'):
    wer.utterance_error_counts(['a', 'b'], ['a'])


def test_no_pairs_give_no_counts():
  assert not wer.utterance_error_counts([], [])
  assert wer.corpus_error_counts([], []) == wer.ErrorCounts()
