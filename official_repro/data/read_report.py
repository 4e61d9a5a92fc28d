"""What a dataset reader read, kept and skipped; shared by every reader.

The fine-tuning readers skip unusable records rather than stop, so one broken
line does not lose a dataset; a `ReadReport` counts records and examples and
names every skipped record by file and line (JSON input: in the reason).
Dataset-specific counts go into `counts` by name.
"""

import collections
import dataclasses
from typing import Counter, List, NamedTuple, Optional

from absl import logging

_MAX_RECORDS_IN_SUMMARY = 5


class MalformedRecord(NamedTuple):
  """One record a reader skipped: file, 1-based line (or None) and why."""

  path: str
  line_number: Optional[int]
  reason: str

  def __str__(self) -> str:
    if self.line_number is None:
      return f'{self.path}: {self.reason}'
    return f'{self.path}, line {self.line_number}: {self.reason}'


@dataclasses.dataclass
class ReadReport:
  """Counts of one read, and the records it skipped (in reading order).

  `record_name` is the plural of a record ('rows', 'questions'), for
  `summary`; `file_format` the format read where several are supported ('').
  """

  path: str
  record_name: str = 'records'
  file_format: str = ''
  num_records: int = 0
  num_examples: int = 0
  malformed: List[MalformedRecord] = dataclasses.field(default_factory=list)
  counts: Counter[str] = dataclasses.field(default_factory=collections.Counter)

  @property
  def num_malformed(self) -> int:
    return len(self.malformed)

  def add_malformed(
      self, line_number: Optional[int], reason: str, path: Optional[str] = None
  ) -> None:
    """Records one skipped record of `path` (default: the report's path)."""
    self.malformed.append(
        MalformedRecord(
            self.path if path is None else path, line_number, reason
        )
    )

  def summary(self) -> str:
    """One line: the counts, then the first few skipped records."""
    text = (
        f'{self.path}: {self.num_examples} examples from '
        f'{self.num_records} {self.record_name}, {self.num_malformed} '
        f'malformed {self.record_name} skipped'
    )
    if self.file_format:
      text += f' ({self.file_format} format)'
    if self.counts:
      text += '; ' + ', '.join(
          f'{name}: {count}' for name, count in sorted(self.counts.items())
      )
    if self.malformed:
      shown = '; '.join(
          _short(record, self.path)
          for record in self.malformed[:_MAX_RECORDS_IN_SUMMARY]
      )
      more = self.num_malformed - _MAX_RECORDS_IN_SUMMARY
      text += f' ({shown}{f"; and {more} more" if more > 0 else ""})'
    return text

  def log(self, prefix: str) -> None:
    """Logs `prefix: summary()`, as a warning when records were skipped."""
    log_fn = logging.warning if self.malformed else logging.info
    log_fn('%s: %s', prefix, self.summary())


def _short(record: MalformedRecord, report_path: str) -> str:
  """The record for a summary: without its path when it is the report's."""
  if record.path != report_path:
    return str(record)
  where = '' if record.line_number is None else f'line {record.line_number}: '
  return f'{where}{record.reason}'
