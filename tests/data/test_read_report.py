"""`ReadReport`: counts, the skipped records named, and the summary line."""

import logging

from absl.testing import absltest

from official_repro.data import read_report


def _report(num_malformed: int) -> read_report.ReadReport:
  report = read_report.ReadReport(
      path='train.tsv', record_name='rows', num_records=10, num_examples=8
  )
  for line in range(1, num_malformed + 1):
    report.add_malformed(line + 1, f'bad row {line}')
  return report


def test_a_clean_read_summarises_its_counts_only():
  report = _report(0)
  report.counts['words'] += 41
  assert report.summary() == (
      'train.tsv: 8 examples from 10 rows, 0 malformed rows skipped; words: 41'
  )


def test_skipped_records_are_named_by_line_and_the_rest_counted():
  report = _report(7)
  assert report.num_malformed == 7
  summary = report.summary()
  assert summary.startswith(
      'train.tsv: 8 examples from 10 rows, 7 malformed rows skipped ('
  )
  shown = summary[summary.index('(') + 1 : -1].split('; ')
  assert shown == [f'line {n + 1}: bad row {n}' for n in range(1, 6)] + [
      'and 2 more'
  ]


def test_a_record_of_another_file_keeps_its_path_and_one_without_a_line_none():
  report = read_report.ReadReport(path='race/', record_name='files')
  report.add_malformed(None, 'no answers', path='race/high/1.txt')
  report.add_malformed(None, 'question 3 lacks options')
  report.file_format = 'json'
  assert report.summary().endswith(
      '(json format) (race/high/1.txt: no answers; question 3 lacks options)'
  )
  assert str(report.malformed[0]) == 'race/high/1.txt: no answers'


class LogTest(absltest.TestCase):

  def test_warns_only_when_records_were_skipped(self):
    # absl's own logger: another test's verbosity may have raised its level.
    with self.assertLogs(logger='absl', level='INFO') as logs:
      _report(0).log('GLUE')
      _report(1).log('GLUE')
    levels = [record.levelno for record in logs.records]
    self.assertEqual(levels, [logging.INFO, logging.WARNING])
    self.assertIn('GLUE: train.tsv: 8 examples', logs.output[0])
