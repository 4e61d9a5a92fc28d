"""Tests for official_repro.data.text_cleaning."""

import os
import random

import pytest

from official_repro.common import cli
from official_repro.data import text_cleaning as tc


def _write(path, content, mode='w'):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  if isinstance(content, bytes):
    with open(path, 'wb') as f:
      f.write(content)
  else:
    with open(path, mode, encoding='utf-8') as f:
      f.write(content)
  return str(path)


class TestSplitSentences:

  def test_basic_split(self):
    assert tc.split_sentences('It rained. We stayed in! Did you? Yes.') == [
        'It rained.',
        'We stayed in!',
        'Did you?',
        'Yes.',
    ]

  def test_abbreviations_do_not_split(self):
    text = (
        'Mr. Smith met Dr. Jones and Mrs. Brown at St. Paul, e.g. at '
        'noon, i.e. early, etc. Then they left.'
    )
    assert tc.split_sentences(text) == [
        'Mr. Smith met Dr. Jones and Mrs. Brown at St. Paul, e.g. at noon, '
        'i.e. early, etc. Then they left.'
    ]

  def test_more_abbreviations(self):
    assert tc.split_sentences(
        'See Fig. 3 and Vol. 2 by Prof. Black vs. Jr. Lee. Done.'
    ) == ['See Fig. 3 and Vol. 2 by Prof. Black vs. Jr. Lee.', 'Done.']

  def test_initials_do_not_split_but_pronoun_does(self):
    assert tc.split_sentences(
        'J. R. R. Tolkien wrote it. So did I. Then we ate.'
    ) == ['J. R. R. Tolkien wrote it.', 'So did I.', 'Then we ate.']

  def test_number_abbreviation_only_before_digit(self):
    assert tc.split_sentences('Room No. 5 was empty. I said no. Then ok.') == [
        'Room No. 5 was empty.',
        'I said no.',
        'Then ok.',
    ]

  def test_quotes_and_brackets(self):
    text = (
        '"Stop!" He ran. She said "Go." "Now?" he asked. (It was late.) '
        '\u201cFine.\u201d \u2018Sure.\u2019 Then 3 men came.'
    )
    assert tc.split_sentences(text) == [
        '"Stop!"',
        'He ran.',
        'She said "Go."',
        '"Now?" he asked.',
        '(It was late.)',
        '\u201cFine.\u201d',
        '\u2018Sure.\u2019',
        'Then 3 men came.',
    ]

  def test_no_split_before_lowercase_or_inside_numbers(self):
    assert tc.split_sentences('Pi is 3.14 or so. and more? yes.') == [
        'Pi is 3.14 or so. and more? yes.'
    ]

  def test_whitespace_and_empty(self):
    assert tc.split_sentences('  One.\n\n   Two.  ') == ['One.', 'Two.']
    assert tc.split_sentences('   ') == []


class TestIsHeading:

  @pytest.mark.parametrize(
      'block',
      [
          ['CHAPTER IV'],
          ['Chapter 12'],
          ['CHAPTER 45. The Affidavit.'],
          ['Book the First--Recalled to Life'],
          ['I. The Period'],
          ['* * * * *'],
          ['Youth'],
          ['New York'],
          ['Chapter I      The Period', 'Chapter II     The Mail'],
      ],
  )
  def test_headings(self, block):
    assert tc.is_heading(block)

  @pytest.mark.parametrize(
      'block',
      [
          ['Yes.'],
          ['Oh!'],
          ['He said:'],
          ['It was the best of times,', 'it was the worst of times.'],
          ['Part of the reason was the rain.'],
          ['Said he'],
          ['Part two of the plan failed.'],
      ],
  )
  def test_not_headings(self, block):
    assert not tc.is_heading(block)


def _read_corpus(inputs, options=tc.CleaningOptions()):
  """`(documents, stats)` of every file of `inputs`, read as records read it."""
  reader, stats, documents = tc.CorpusReader(options), tc.CorpusStats(), []
  for path in tc.find_files(inputs, options.file_pattern):
    documents.extend(reader.iter_documents(path, stats))
  if not documents:
    raise cli.UserError(tc.empty_corpus_message(inputs, stats))
  return documents, stats


class TestReadCorpus:

  def test_blank_line_documents_join_wrapped_lines(self, tmp_path):
    path = _write(
        tmp_path / 'a.txt',
        'The cat sat on\nthe mat. It slept.\n\nA dog barked.\n',
    )
    documents, stats = _read_corpus([path])
    assert documents == [
        ['The cat sat on the mat.', 'It slept.'],
        ['A dog barked.'],
    ]
    assert (
        stats.files,
        stats.documents,
        stats.paragraphs,
        stats.sentences,
        stats.lines_read,
        stats.blank_lines,
    ) == (1, 2, 2, 3, 4, 1)

  def test_file_mode_and_sentence_per_line(self, tmp_path):
    _write(tmp_path / 'b.txt', 'First line here\nSecond one\n\nThird. Four.\n')
    _write(tmp_path / 'a.txt', 'Alpha is first.\n')
    documents, stats = _read_corpus(
        [str(tmp_path)],
        tc.CleaningOptions(
            document_mode='file', sentence_per_line=True, drop_headings=False
        ),
    )
    assert documents == [
        ['Alpha is first.'],
        ['First line here', 'Second one', 'Third. Four.'],
    ]
    assert stats.paragraphs == 3

  def test_directory_recursion_and_pattern(self, tmp_path):
    _write(tmp_path / 'x' / 'y' / 'deep.txt', 'Deep text here.\n')
    _write(tmp_path / 'skip.md', 'Not read.\n')
    _write(tmp_path / 'x' / 'notes.text', 'Other pattern.\n')
    documents, _ = _read_corpus([str(tmp_path)])
    assert documents == [['Deep text here.']]
    documents, _ = _read_corpus(
        [str(tmp_path)], tc.CleaningOptions(file_pattern='*.text')
    )
    assert documents == [['Other pattern.']]

  def test_crlf_and_bom_read_like_lf(self, tmp_path):
    text = 'One line\nwrapped here.\n\nNext doc.\n'
    plain = _write(tmp_path / 'lf' / 'a.txt', text.encode('utf-8'))
    crlf = _write(
        tmp_path / 'crlf' / 'a.txt',
        b'\xef\xbb\xbf' + text.replace('\n', '\r\n').encode(),
    )
    expected, _ = _read_corpus([plain])
    documents, stats = _read_corpus([crlf])
    assert documents == expected
    assert documents[0][0] == 'One line wrapped here.'
    assert stats.files_with_bom == 1
    assert stats.files_with_crlf == 1

  def test_decode_errors_counted_when_replacing(self, tmp_path):
    path = _write(
        tmp_path / 'a.txt',
        b'Bad \xff byte and \xfe here. Real \xef\xbf\xbd ok.\n',
    )
    documents, stats = _read_corpus(
        [path], tc.CleaningOptions(encoding_errors='replace')
    )
    assert stats.decode_errors == 2
    assert stats.files_with_decode_errors == 1
    assert documents[0][0] == 'Bad \ufffd byte and \ufffd here.'

  def test_a_file_that_is_not_utf8_is_refused_by_name_and_offset(
      self, tmp_path
  ):
    _write(tmp_path / 'good.txt', 'Fine text here.\n')
    _write(tmp_path / 'bad.txt', b'\xef\xbb\xbfCaf\xe9 latin-1 text.\n')
    with pytest.raises(
        ValueError, match=r'bad.txt is not UTF-8: byte 6 ' r'\(0xe9\)'
    ):
      _read_corpus([str(tmp_path)])

  def test_gutenberg_stripping(self, tmp_path):
    lines = [
        'The Project Gutenberg EBook of X',
        'License text',
        '',
        '*** START OF THIS PROJECT GUTENBERG EBOOK X ***',
        '',
        'CHAPTER I',
        '',
        'It was a _dark_ night. The end came.',
        '',
        '[Illustration: A ship.]',
        '',
        '***END OF THE PROJECT GUTENBERG EBOOK X***',
    ] + ['footer line'] * 5
    book = _write(tmp_path / 'book.txt', '\n'.join(lines) + '\n')
    plain = _write(tmp_path / 'plain.txt', 'No markers at all here.\n')
    documents, stats = _read_corpus(
        [book, plain],
        tc.CleaningOptions(document_mode='file', strip_gutenberg=True),
    )
    assert documents == [
        ['It was a dark night.', 'The end came.'],
        ['No markers at all here.'],
    ]
    assert stats.lines_skipped_by_reason == {
        'gutenberg header': 4,
        'gutenberg footer': 6,
        'gutenberg illustration': 1,
        'heading': 1,
    }
    assert stats.files_without_gutenberg_markers == 1
    assert stats.italics_underscores_removed == 2

  def test_headings_kept_when_disabled(self, tmp_path):
    path = _write(tmp_path / 'a.txt', 'CHAPTER I\n\nText follows.\n')
    documents, _ = _read_corpus(
        [path], tc.CleaningOptions(document_mode='file', drop_headings=False)
    )
    assert documents == [['CHAPTER I', 'Text follows.']]

  def test_drop_line_regexes_counted_per_regex(self, tmp_path):
    path = _write(
        tmp_path / 'a.txt',
        'Keep this line.\n# comment one\n# comment two\n'
        'Page 12\nAlso kept.\n',
    )
    page = r'^Page \d+$'
    documents, stats = _read_corpus(
        [path], tc.CleaningOptions(drop_line_regexes=['^#', page])
    )
    assert documents == [['Keep this line.', 'Also kept.']]
    assert stats.lines_skipped_by_reason == {
        "drop_line_regex '^#'": 2,
        f'drop_line_regex {page!r}': 1,
    }
    assert 'drop_line_regex' in stats.report()

  def test_min_sentence_chars(self, tmp_path):
    path = _write(tmp_path / 'a.txt', 'Ok. This one is long enough.\n\nNo.\n')
    documents, stats = _read_corpus(
        [path], tc.CleaningOptions(min_sentence_chars=5)
    )
    assert documents == [['This one is long enough.']]
    assert stats.sentences_dropped_short == 2
    assert stats.empty_documents_dropped == 1

  def test_missing_path_names_it(self, tmp_path):
    missing = str(tmp_path / 'nope.txt')
    with pytest.raises(FileNotFoundError, match='nope.txt'):
      _read_corpus([missing])

  def test_directory_without_matching_files(self, tmp_path):
    _write(tmp_path / 'a.md', 'Text.\n')
    with pytest.raises(ValueError, match=r"no files matching '\*\.txt'"):
      _read_corpus([str(tmp_path)])

  def test_empty_corpus_raises_no_text(self, tmp_path):
    path = _write(tmp_path / 'a.txt', '\n\n   \n# only a comment\n')
    with pytest.raises(
        ValueError,
        match=r'a\.txt: 1 files read, 0 non-empty '
        r'documents.*no text.*drop_line_regex',
    ):
      _read_corpus([path], tc.CleaningOptions(drop_line_regexes=['^#']))

  def test_ram_filesystem_reads_like_local(self, tmp_path, to_ram):
    local = tmp_path / 'corpus'
    _write(local / 'b.txt', 'First doc here.\n\nSecond doc.\n')
    _write(
        local / 'x' / 'y' / 'deep.txt',
        b'\xef\xbb\xbfDeep one\r\nwrapped. Bad \xff byte.\r\n',
    )
    _write(local / 'x' / 'skip.md', 'Not read.\n')
    single = _write(tmp_path / 'single.txt', 'Alone here.\n')
    replace = tc.CleaningOptions(encoding_errors='replace')
    expected, expected_stats = _read_corpus([str(local), single], replace)
    remote = [to_ram(local), to_ram(single)]
    documents, stats = _read_corpus(remote, replace)
    assert (
        documents
        == expected
        == [
            ['First doc here.'],
            ['Second doc.'],
            ['Deep one wrapped.', 'Bad \ufffd byte.'],
            ['Alone here.'],
        ]
    )
    assert (
        stats.files,
        stats.bytes_read,
        stats.files_with_bom,
        stats.files_with_crlf,
        stats.decode_errors,
    ) == (expected_stats.files, expected_stats.bytes_read, 1, 1, 1)
    missing = os.path.join(remote[0], 'nope.txt')
    with pytest.raises(FileNotFoundError, match=missing):
      _read_corpus([missing])
    with pytest.raises(ValueError, match='no files matching'):
      _read_corpus([remote[0]], tc.CleaningOptions(file_pattern='*.text'))

  def test_invalid_options(self):
    with pytest.raises(ValueError, match='document_mode'):
      tc.CleaningOptions(document_mode='page')
    with pytest.raises(ValueError, match='invalid regex'):
      tc.CleaningOptions(drop_line_regexes=['('])


def _whole_file_lines(data):
  """Brute force: decode all of `data`, then split it (the reference)."""
  bom = data.startswith(b'\xef\xbb\xbf')
  raw = data[3:] if bom else data
  text = raw.decode('utf-8', errors='replace')
  errors = text.count('\ufffd') - raw.count(b'\xef\xbf\xbd')
  lines = text.replace('\r\n', '\n').replace('\r', '\n').split('\n')
  if not lines[-1]:
    lines.pop()
  counts = {
      'files': 1,
      'bytes_read': len(data),
      'lines_read': len(lines),
      'files_with_bom': int(bom),
      'files_with_crlf': int('\r' in text),
      'decode_errors': errors,
      'files_with_decode_errors': int(errors > 0),
  }
  return lines, counts


# Pieces that a chunk boundary can split: a BOM, CR, LF, CRLF, multi-byte
# characters, undecodable bytes, a cut-off sequence, a genuine U+FFFD.
_PIECES = (
    b'ab',
    b'\r',
    b'\n',
    b'\r\n',
    'é'.encode(),
    '€'.encode(),
    b'\xff',
    b'\xe2\x82',
    b'\xef\xbf\xbd',
    b'\xef\xbb\xbf',
)


def _crafted_files():
  rng = random.Random(0)
  files = [
      b'',
      b'\n\n',
      b'\xef\xbb',
      b'no final newline',
      b'\xef\xbb\xbfBOM \xe2\x82\xac line\r\nCRLF\r\rlone CR\r',
      b'bad \xff\xfe, cut \xe2\x82 and real \xef\xbf\xbd\xef\xbf\xbd.\n',
  ]
  files += [b''.join(rng.choice(_PIECES) for _ in range(80)) for _ in range(20)]
  return files


class TestStreamedReading:
  """Reading a file in chunks counts what reading it whole counts."""

  @pytest.mark.parametrize('chunk', [1, 2, 3, 5, 1 << 20])
  def test_lines_and_counts_match_a_whole_file_read(
      self, tmp_path, monkeypatch, chunk
  ):
    monkeypatch.setattr(tc, '_READ_CHUNK', chunk)
    for number, data in enumerate(_crafted_files()):
      path = _write(tmp_path / f'{number}.txt', data)
      stats = tc.CorpusStats()
      lines = list(tc.read_lines(path, stats, 'replace'))
      expected_lines, expected_counts = _whole_file_lines(data)
      assert lines == expected_lines, data
      counts = {name: getattr(stats, name) for name in expected_counts}
      assert counts == expected_counts, data

  @pytest.mark.parametrize('chunk', [1, 2, 3, 1 << 20])
  def test_strict_names_the_first_bad_byte_of_the_file(
      self, tmp_path, monkeypatch, chunk
  ):
    monkeypatch.setattr(tc, '_READ_CHUNK', chunk)
    data = b'\xef\xbb\xbfGood \xe2\x82\xac\r\nthen \xe2\x82 cut\n\xff'
    path = _write(tmp_path / 'bad.txt', data)
    # The cut-off sequence at byte 18 of the file (15 after the BOM).
    with pytest.raises(
        ValueError, match=r'bad.txt is not UTF-8: byte 18 \(0xe2\)'
    ):
      list(tc.read_lines(path, tc.CorpusStats()))

  def test_unreadable_file_gives_no_lines(self, tmp_path):
    os.symlink(tmp_path / 'missing.txt', tmp_path / 'gone.txt')
    stats = tc.CorpusStats()
    assert tc.read_lines(str(tmp_path / 'gone.txt'), stats) is None
    assert (stats.files, stats.files_unreadable) == (0, 1)
    assert stats.unreadable_files[0].startswith(str(tmp_path / 'gone.txt'))

  @pytest.mark.parametrize(
      'lines',
      [
          ['License'] * 30 + ['*** START OF X', 'Body.', '*** END OF X', 'f'],
          ['Title', '*** START OF X'] + ['Body.'] * 30,
          ['No markers here.'] * 30,
      ],
  )
  def test_gutenberg_stripping_holds_a_bounded_header(self, lines):
    expected_stats = tc.CorpusStats()
    expected = list(
        tc.strip_gutenberg_boilerplate(lines, expected_stats, lambda: None)
    )
    read_again = []

    def again():
      read_again.append(True)
      return iter(lines)

    stats = tc.CorpusStats()
    body = list(tc.strip_gutenberg_boilerplate(iter(lines), stats, again, 20))
    assert body == expected
    assert stats == expected_stats
    # Only a file without START marker, longer than the bound, is read again.
    assert bool(read_again) == (lines[0] == 'No markers here.')

  def test_a_bound_cuts_long_documents_and_paragraphs_only(self, tmp_path):
    paragraphs = [f'Sentence {i} is here. And {i} more.' for i in range(40)]
    book = _write(tmp_path / 'book.txt', '\n\n'.join(paragraphs) + '\n')
    size = os.path.getsize(book)
    by_line = _write(tmp_path / 'lines.txt', '\n'.join(paragraphs) + '\n')
    file_mode = tc.CorpusReader(tc.CleaningOptions(document_mode='file'))
    blank_line = tc.CorpusReader(tc.CleaningOptions())
    for reader, path in ((file_mode, book), (blank_line, by_line)):
      whole_stats, stats = tc.CorpusStats(), tc.CorpusStats()
      (whole,) = reader.iter_documents(path, whole_stats)
      # A file below the bound reads as without it.
      assert list(reader.iter_documents(path, stats, size + 1)) == [whole]
      assert stats == whole_stats
      cut_stats = tc.CorpusStats()
      pieces = list(reader.iter_documents(path, cut_stats, size // 10))
      assert len(pieces) >= 5
      assert all(
          sum(len(s) for s in piece) < size // 10 + 40 for piece in pieces
      )
      assert cut_stats.documents == len(pieces)
      if reader is file_mode:
        # Cut between paragraphs: the same sentences, the same counts.
        assert [s for piece in pieces for s in piece] == whole
        cut_stats.documents = whole_stats.documents
        assert cut_stats == whole_stats


@pytest.mark.parametrize(
    'encoding, named',
    [
        ('utf-16', 'UTF-16LE'),  # with its byte-order mark
        ('utf-16-le', 'UTF-16LE'),  # without one: NUL bytes at odd offsets
        ('utf-16-be', 'UTF-16BE'),
        ('utf-32', 'UTF-32LE'),
    ],
)
@pytest.mark.parametrize('encoding_errors', ['strict', 'replace'])
def test_utf16_and_utf32_are_refused_by_name(
    tmp_path, encoding, named, encoding_errors
):
  path = tmp_path / 'book.txt'
  path.write_bytes(('The cat sat on the mat.\n' * 20).encode(encoding))
  stats = tc.CorpusStats()
  with pytest.raises(cli.UserError, match=f'book.txt is {named}, not UTF-8'):
    list(tc.read_lines(str(path), stats, encoding_errors))


def test_each_real_file_is_found_once_through_links_and_loops(tmp_path):
  books = tmp_path / 'books'
  (books / 'shelf').mkdir(parents=True)
  (books / 'shelf' / 'a.txt').write_text('A book.\n')
  (books / 'b.txt').write_text('Another.\n')
  os.symlink(books, books / 'shelf' / 'loop')  # a loop back to the top
  os.symlink(books / 'b.txt', books / 'same_as_b.txt')
  found = tc.find_files([str(books)])
  assert sorted(os.path.basename(p) for p in found) == ['a.txt', 'b.txt']


def test_files_the_pattern_leaves_out_are_listed(tmp_path):
  (tmp_path / 'a.txt').write_text('x\n')
  (tmp_path / 'B.TXT').write_text('y\n')
  (tmp_path / 'notes.md').write_text('z\n')
  skipped = []
  found = tc.find_files([str(tmp_path)], '*.txt', skipped)
  assert [os.path.basename(p) for p in found] == ['a.txt']
  assert sorted(os.path.basename(p) for p in skipped) == ['B.TXT', 'notes.md']
