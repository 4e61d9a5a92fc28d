"""Packs tokenized documents into `[CLS] A [SEP] B [SEP]` training instances.

As BERT's, with two changes: sentences over `max_seq_length - 3` tokens are
cut into pieces (several instances, not one truncated), and the short target
length (`short_seq_prob`) is drawn per chunk rather than per document, so the
share of short instances holds for whole books too. All randomness comes from
one `random.Random`.
"""

import dataclasses
import random
from typing import List, Optional, Sequence, Tuple

from official_repro.common import cli

Document = Sequence[Sequence[int]]


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
  """How to pack documents into instances (the flags of the same names)."""

  max_seq_length: int = 128
  short_seq_prob: float = 0.1
  next_sentence_prediction: bool = False

  def __post_init__(self):
    if self.max_seq_length < 5:
      raise cli.UserError(
          'max_seq_length must be >= 5 ([CLS] A [SEP] B [SEP]), '
          f'got {self.max_seq_length}.'
      )
    if not 0.0 <= self.short_seq_prob <= 1.0:
      raise cli.UserError(
          f'short_seq_prob must be in [0, 1], got {self.short_seq_prob}.'
      )

  @property
  def max_num_tokens(self) -> int:
    return self.max_seq_length - 3


@dataclasses.dataclass
class Instance:
  """One training instance.

  `segment_ids` are 0 for [CLS], A and the first [SEP], 1 after;
  `next_sentence_label` is 1 for a random-document B (None without NSP).
  """

  input_ids: List[int]
  segment_ids: List[int]
  next_sentence_label: Optional[int] = None


@dataclasses.dataclass
class InstanceStats:
  """Counters collected while making instances; names say what they count."""

  documents: int = 0
  instances: int = 0
  tokens: int = 0
  text_tokens: int = 0
  truncated_instances: int = 0
  tokens_truncated: int = 0
  short_target_chunks: int = 0
  long_sentences_split: int = 0
  random_next_instances: int = 0
  chunks_skipped: int = 0


class InstanceMaker:
  """Makes instances from documents.

  Sentences fill a chunk up to its drawn target length, cut at a random
  sentence boundary into A and B. With next-sentence prediction, half of the
  time (always for one sentence) B comes from another document (label 1) and
  the chunk's unused sentences go back; without it a one-sentence chunk is cut
  inside. The longer segment loses tokens at a random end until the pair fits.
  """

  def __init__(
      self,
      options: InstanceOptions,
      cls_id: int,
      sep_id: int,
  ):
    """A maker with ids `cls_id`, `sep_id`."""
    self._options = options
    self._cls_id = cls_id
    self._sep_id = sep_id
    self._rng = None
    self.stats = InstanceStats()

  def cut_long_sentences(self, document: Document) -> List[List[int]]:
    """Copies a document, dropping empty sentences and cutting long ones."""
    limit = self._options.max_num_tokens
    sentences = []
    for sentence in document:
      if len(sentence) > limit:
        self.stats.long_sentences_split += 1
      sentences.extend(
          list(sentence[i : i + limit]) for i in range(0, len(sentence), limit)
      )
    return sentences

  def from_document(
      self,
      documents: List[List[List[int]]],
      index: int,
      rng: random.Random,
  ) -> List[Instance]:
    """Makes the instances of `documents[index]` (from `cut_long_sentences`).

    Other documents supply random next segments; `rng` draws every choice.
    """
    self._rng = rng
    document = documents[index]
    self.stats.documents += 1
    target_length = self._draw_target_length()
    instances, chunk, chunk_length, i = [], [], 0, 0
    while i < len(document):
      chunk.append(document[i])
      chunk_length += len(document[i])
      if i == len(document) - 1 or chunk_length >= target_length:
        instance, unused = self._chunk_to_instance(
            chunk, target_length, documents, index
        )
        if instance is not None:
          instances.append(instance)
        i -= unused
        chunk, chunk_length = [], 0
        target_length = self._draw_target_length()
      i += 1
    return instances

  def _draw_target_length(self) -> int:
    max_num_tokens = self._options.max_num_tokens
    if self._rng.random() < self._options.short_seq_prob:
      self.stats.short_target_chunks += 1
      return self._rng.randint(2, max_num_tokens)
    return max_num_tokens

  def _chunk_to_instance(
      self,
      chunk: List[List[int]],
      target_length: int,
      documents: List[List[List[int]]],
      index: int,
  ) -> Tuple[Optional[Instance], int]:
    """`(instance or None if too short, unused trailing sentences)`."""
    if sum(len(s) for s in chunk) < 2:
      self.stats.chunks_skipped += 1
      return None, 0
    split = 1 if len(chunk) < 2 else self._rng.randint(1, len(chunk) - 1)
    segment_a = _concat(chunk[:split])
    label, unused = None, 0
    if self._options.next_sentence_prediction:
      label = 0
      wants_random = len(chunk) == 1 or self._rng.random() < 0.5
      if wants_random and len(documents) > 1:
        label = 1
        segment_b = self._random_segment(
            documents, index, max(1, target_length - len(segment_a))
        )
        unused = len(chunk) - split
    if label != 1:
      segment_b = _concat(chunk[split:])
    if not segment_b:
      # A single sentence and no other document to draw from: cut it.
      cut = self._rng.randint(1, len(segment_a) - 1)
      segment_a, segment_b = segment_a[:cut], segment_a[cut:]
    segment_a, segment_b = self._truncate_pair(segment_a, segment_b)
    return self._make_instance(segment_a, segment_b, label), unused

  def _random_segment(
      self, documents: List[List[List[int]]], index: int, length: int
  ) -> List[int]:
    """Another document's sentences from a random one to >= `length` tokens."""
    other = self._rng.randrange(len(documents) - 1)
    if other >= index:
      other += 1
    document = documents[other]
    segment = []
    for sentence in document[self._rng.randrange(len(document)) :]:
      segment.extend(sentence)
      if len(segment) >= length:
        break
    self.stats.random_next_instances += 1
    return segment

  def _truncate_pair(
      self, segment_a: List[int], segment_b: List[int]
  ) -> Tuple[List[int], List[int]]:
    """Drops tokens at either end of the longer segment until the pair fits."""
    excess = len(segment_a) + len(segment_b) - self._options.max_num_tokens
    if excess <= 0:
      return segment_a, segment_b
    self.stats.truncated_instances += 1
    self.stats.tokens_truncated += excess
    front, back = [0, 0], [len(segment_a), len(segment_b)]
    for _ in range(excess):
      longer = 0 if back[0] - front[0] > back[1] - front[1] else 1
      if self._rng.random() < 0.5:
        front[longer] += 1
      else:
        back[longer] -= 1
    return (segment_a[front[0] : back[0]], segment_b[front[1] : back[1]])

  def _make_instance(
      self, segment_a: List[int], segment_b: List[int], label: Optional[int]
  ) -> Instance:
    input_ids = (
        [self._cls_id] + segment_a + [self._sep_id] + segment_b + [self._sep_id]
    )
    segment_ids = [0] * (len(segment_a) + 2) + [1] * (len(segment_b) + 1)
    self.stats.instances += 1
    self.stats.tokens += len(input_ids)
    self.stats.text_tokens += len(segment_a) + len(segment_b)
    return Instance(input_ids, segment_ids, label)


def _concat(sentences: Sequence[Sequence[int]]) -> List[int]:
  return [token for sentence in sentences for token in sentence]
