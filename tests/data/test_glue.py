"""Tests of the GLUE readers and feature conversion on tiny TSV fixtures."""

import numpy as np
import pytest

from official.nlp.tools import tokenization
from official_repro.data import glue
from official_repro.data import vocab as vocab_lib

# [PAD] is deliberately not id 0, to catch an assumed padding id.
_VOCAB = [
    '[UNK]',
    '[CLS]',
    '[SEP]',
    '[PAD]',
    '[MASK]',
    'the',
    'cat',
    'sat',
    'on',
    'mat',
    'a',
    'dog',
    'ran',
    'far',
    'away',
    'play',
    '##ing',
    '##s',
    '.',
]


def _write(directory, task_dir, split, lines, newline='\n', bom=False):
  """Writes `lines` as <directory>/<task_dir>/<split>.tsv; returns the root."""
  folder = directory / task_dir
  folder.mkdir(parents=True, exist_ok=True)
  text = ('\ufeff' if bom else '') + ''.join(line + newline for line in lines)
  (folder / f'{split}.tsv').write_bytes(text.encode('utf-8'))
  return str(directory)


@pytest.fixture(scope='module', params=['model_garden', 'official_repro'])
def tokenizer(request, tmp_path_factory):
  """Model Garden's `FullTokenizer` and ours: the readers take either."""
  path = tmp_path_factory.mktemp('vocab') / 'vocab.txt'
  path.write_text('\n'.join(_VOCAB) + '\n', encoding='utf-8')
  if request.param == 'model_garden':
    return tokenization.FullTokenizer(str(path), do_lower_case=True)
  return vocab_lib.FullTokenizer(str(path), do_lower_case=True)


class TestTaskSpecs:

  def test_eight_tasks_without_wnli(self):
    assert sorted(glue.GLUE_TASKS) == [
        'cola',
        'mnli',
        'mrpc',
        'qnli',
        'qqp',
        'rte',
        'sst2',
        'stsb',
    ]
    assert glue.GLUE_TASKS['mnli'].dev_splits == (
        'dev_matched',
        'dev_mismatched',
    )
    assert glue.GLUE_TASKS['stsb'].is_regression
    assert glue.GLUE_TASKS['stsb'].label_list == ()
    assert glue.GLUE_TASKS['cola'].headline_metric == 'mcc'

  def test_unknown_task_lists_valid_ones(self, tmp_path):
    with pytest.raises(ValueError, match=r"'wnli'.*'cola'"):
      glue.read_examples(str(tmp_path), 'wnli', 'train')

  def test_unknown_split_lists_valid_ones(self, tmp_path):
    with pytest.raises(ValueError, match=r"'dev'.*dev_matched"):
      glue.read_examples(str(tmp_path), 'mnli', 'dev')
    with pytest.raises(ValueError, match=r"'test'.*'train', 'dev'"):
      glue.read_examples(str(tmp_path), 'rte', 'test')

  def test_missing_file_names_path(self, tmp_path):
    with pytest.raises(FileNotFoundError, match=r'RTE/dev\.tsv'):
      glue.read_examples(str(tmp_path), 'rte', 'dev')


class TestReaders:

  def test_cola_headerless_by_position(self, tmp_path):
    root = _write(
        tmp_path,
        'CoLA',
        'train',
        [
            'gj04\t1\t\tThe cat sat.',
            'gj04\t0\t*\tCat the sat.',
        ],
    )
    examples, report = glue.read_examples(root, 'cola', 'train')
    assert [(e.text_a, e.text_b, e.label, e.line_number) for e in examples] == [
        ('The cat sat.', None, 1, 1),
        ('Cat the sat.', None, 0, 2),
    ]
    assert examples[1].guid == 'cola-train-1'
    assert (report.num_records, report.num_examples, report.malformed) == (
        2,
        2,
        [],
    )

  def test_sst2_keeps_text_verbatim(self, tmp_path):
    root = _write(
        tmp_path,
        'SST-2',
        'dev',
        ['sentence\tlabel', 'a charming journey . \t1', 'bleak \t0'],
    )
    examples, _ = glue.read_examples(root, 'sst2', 'dev')
    assert [(e.text_a, e.label, e.line_number) for e in examples] == [
        ('a charming journey . ', 1, 2),
        ('bleak ', 0, 3),
    ]

  def test_mrpc_bom_header_and_unmatched_quote(self, tmp_path):
    root = _write(
        tmp_path,
        'MRPC',
        'train',
        [
            'Quality\t#1 ID\t#2 ID\t#1 String\t#2 String',
            '1\t11\t12\tHe said "no.\t"No, he said.',
            '0\t13\t14\tA "quoted" word.\tAnother one.',
        ],
        bom=True,
    )
    examples, report = glue.read_examples(root, 'mrpc', 'train')
    assert [(e.text_a, e.text_b, e.label) for e in examples] == [
        ('He said "no.', '"No, he said.', 1),
        ('A "quoted" word.', 'Another one.', 0),
    ]
    assert examples[1].guid == 'mrpc-train-1'
    assert report.num_examples == 2

  def test_stsb_float_scores_and_extra_columns(self, tmp_path):
    header = (
        'index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\t'
        'sentence1\tsentence2\tscore'
    )
    root = _write(
        tmp_path,
        'STS-B',
        'dev',
        [
            header,
            '0\tmain\tMSRvid\t2012\t0001\tnone\tnone\tA plane.\tAn air plane.\t'
            '5.000',
            '1\tmain\tMSRvid\t2012\t0004\tnone\tnone\tA man.\tA flute.\t0.5',
        ],
    )
    examples, _ = glue.read_examples(root, 'stsb', 'dev')
    assert [(e.text_a, e.text_b, e.label) for e in examples] == [
        ('A plane.', 'An air plane.', 5.0),
        ('A man.', 'A flute.', 0.5),
    ]
    assert all(isinstance(e.label, float) for e in examples)

  def test_qqp_columns_by_name(self, tmp_path):
    root = _write(
        tmp_path,
        'QQP',
        'train',
        [
            'id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate',
            '7\t1\t2\tWhy is the sky blue?\tWhat makes the sky blue?\t1',
        ],
    )
    examples, _ = glue.read_examples(root, 'qqp', 'train')
    assert (examples[0].text_a, examples[0].text_b, examples[0].label) == (
        'Why is the sky blue?',
        'What makes the sky blue?',
        1,
    )

  def test_mnli_dev_matched_many_columns(self, tmp_path):
    header = [
        'index',
        'promptID',
        'pairID',
        'genre',
        'sentence1_binary_parse',
        'sentence2_binary_parse',
        'sentence1_parse',
        'sentence2_parse',
        'sentence1',
        'sentence2',
        'label1',
        'label2',
        'gold_label',
    ]
    rows = [
        [
            '0',
            '1',
            '1e',
            'tel',
            '( x )',
            '( y )',
            '(S x)',
            '(S y)',
            'The cat sat.',
            'A cat sat.',
            'entailment',
            'entailment',
            'entailment',
        ],
        [
            '1',
            '2',
            '2n',
            'tel',
            '( x )',
            '( y )',
            '(S x)',
            '(S y)',
            'The dog ran.',
            'The dog sat.',
            'neutral',
            'contradiction',
            'contradiction',
        ],
    ]
    root = _write(
        tmp_path,
        'MNLI',
        'dev_matched',
        ['\t'.join(row) for row in [header] + rows],
    )
    examples, _ = glue.read_examples(root, 'mnli', 'dev_matched')
    assert [(e.text_a, e.text_b, e.label, e.guid) for e in examples] == [
        ('The cat sat.', 'A cat sat.', 1, 'mnli-dev_matched-0'),
        ('The dog ran.', 'The dog sat.', 0, 'mnli-dev_matched-1'),
    ]

  def test_qnli_and_crlf_rte(self, tmp_path):
    _write(
        tmp_path,
        'QNLI',
        'dev',
        [
            'index\tquestion\tsentence\tlabel',
            '0\tWho sat?\tThe cat sat.\tnot_entailment',
        ],
    )
    root = _write(
        tmp_path,
        'RTE',
        'train',
        [
            'index\tsentence1\tsentence2\tlabel',
            '0\tThe cat sat.\tA cat sat.\tentailment',
            '1\tThe dog ran.\tThe dog sat.\tnot_entailment',
        ],
        newline='\r\n',
    )
    qnli, _ = glue.read_examples(root, 'qnli', 'dev')
    assert (qnli[0].text_a, qnli[0].text_b, qnli[0].label) == (
        'Who sat?',
        'The cat sat.',
        1,
    )
    rte, report = glue.read_examples(root, 'rte', 'train')
    assert [(e.text_b, e.label) for e in rte] == [
        ('A cat sat.', 0),
        ('The dog sat.', 1),
    ]
    assert report.malformed == []

  def test_headerless_file_with_bom(self, tmp_path):
    root = _write(
        tmp_path, 'CoLA', 'dev', ['gj04\t1\t\tThe cat sat.'], bom=True
    )
    examples, _ = glue.read_examples(root, 'cola', 'dev')
    assert examples[0].text_a == 'The cat sat.'

  def test_ram_filesystem_reads_like_local(self, tmp_path, to_ram):
    _write(
        tmp_path / 'glue',
        'MRPC',
        'train',
        [
            'Quality\t#1 ID\t#2 ID\t#1 String\t#2 String',
            '1\t11\t12\tA stray \r stays.\t"No, he said.',
            '0\t13\t14\tb\xffd\tAnother one.',
            '',
            '0\t15\t16\tLast one.\tNo final newline.',
        ],
        newline='\r\n',
        bom=True,
    )
    path = tmp_path / 'glue' / 'MRPC' / 'train.tsv'
    path.write_bytes(
        path.read_bytes()
        .replace('\xff'.encode(), b'\xff')
        .removesuffix(b'\r\n')
    )
    local = str(tmp_path / 'glue')
    expected, expected_report = glue.read_examples(local, 'mrpc', 'train')
    remote = to_ram(local)
    examples, report = glue.read_examples(remote, 'mrpc', 'train')
    assert examples == expected
    assert [(e.text_a, e.label, e.line_number) for e in examples] == [
        ('A stray \r stays.', 1, 2),
        ('Last one.', 0, 5),
    ]
    assert (
        [(r.line_number, r.reason) for r in report.malformed]
        == [(r.line_number, r.reason) for r in expected_report.malformed]
        == [
            (3, 'not valid UTF-8'),
            (4, 'expected 5 tab-separated columns, ' 'found 1'),
        ]
    )
    with pytest.raises(FileNotFoundError, match=f'{remote}/MRPC/dev.tsv'):
      glue.read_examples(remote, 'mrpc', 'dev')


class TestMalformedInput:

  def test_malformed_rows_counted_with_line_numbers(self, tmp_path):
    root = _write(
        tmp_path,
        'RTE',
        'dev',
        [
            'index\tsentence1\tsentence2\tlabel',
            '0\tThe cat sat.\tA cat sat.\tentailment',
            '1\tToo few columns.\tentailment',
            '2\t  \tEmpty first sentence.\tentailment',
            '',
            '3\tA tab\tinside.\tA cat sat.\tentailment',
            '4\tThe dog ran.\tThe dog sat.\tnot_entailment',
        ],
    )
    examples, report = glue.read_examples(root, 'rte', 'dev')
    assert [e.line_number for e in examples] == [2, 7]
    assert examples[1].guid == 'rte-dev-5'
    assert (report.num_records, report.num_examples, report.num_malformed) == (
        6,
        2,
        4,
    )
    path = str(tmp_path / 'RTE' / 'dev.tsv')
    assert [
        (record.path, record.line_number) for record in report.malformed
    ] == [(path, 3), (path, 4), (path, 5), (path, 6)]
    assert (
        'expected 4 tab-separated columns, found 3'
        in report.malformed[0].reason
    )
    assert 'empty text in sentence1' in report.malformed[1].reason
    summary = report.summary()
    assert '2 examples from 6 rows, 4 malformed' in summary
    assert 'line 3:' in summary and 'line 6:' in summary

  def test_invalid_utf8_line_is_malformed(self, tmp_path):
    root = _write(
        tmp_path, 'SST-2', 'train', ['sentence\tlabel', 'fine\t1', 'bad\t0']
    )
    path = tmp_path / 'SST-2' / 'train.tsv'
    path.write_bytes(path.read_bytes().replace(b'bad', b'b\xffd'))
    examples, report = glue.read_examples(root, 'sst2', 'train')
    assert len(examples) == 1
    assert report.malformed == [(str(path), 3, 'not valid UTF-8')]

  def test_bad_label_stops_with_file_and_line(self, tmp_path):
    root = _write(
        tmp_path,
        'RTE',
        'train',
        [
            'index\tsentence1\tsentence2\tlabel',
            '0\tThe cat sat.\tA cat sat.\tentailment',
            '1\tThe dog ran.\tThe dog sat.\tneutral',
        ],
    )
    with pytest.raises(
        glue.GlueLabelError,
        match=r"RTE/train\.tsv, line 3: .*'neutral'.*"
        r"\['entailment', 'not_entailment'\]",
    ):
      glue.read_examples(root, 'rte', 'train')

  def test_bad_cola_label(self, tmp_path):
    root = _write(tmp_path, 'CoLA', 'train', ['gj04\t2\t\tThe cat sat.'])
    with pytest.raises(glue.GlueLabelError, match=r'line 1: .*\'2\''):
      glue.read_examples(root, 'cola', 'train')

  @pytest.mark.parametrize('score', ['5.5', '-0.1', 'high', 'nan', ''])
  def test_bad_stsb_score_stops(self, tmp_path, score):
    root = _write(
        tmp_path,
        'STS-B',
        'train',
        [
            'index\tsentence1\tsentence2\tscore',
            '0\tA plane.\tA plane.\t4.0',
            f'1\tA man.\tA flute.\t{score}',
        ],
    )
    with pytest.raises(
        glue.GlueLabelError, match=r'STS-B/train\.tsv, line 3: .*\[0\.0, 5\.0\]'
    ):
      glue.read_examples(root, 'stsb', 'train')

  def test_header_without_needed_columns(self, tmp_path):
    root = _write(
        tmp_path,
        'QNLI',
        'train',
        ['index\tquestion\ttext\tlabel', '0\tWho?\tA cat.\tentailment'],
    )
    with pytest.raises(ValueError, match=r"line 1: .*\['sentence'\]"):
      glue.read_examples(root, 'qnli', 'train')

  def test_empty_file(self, tmp_path):
    root = _write(tmp_path, 'SST-2', 'dev', [])
    with pytest.raises(ValueError, match='empty'):
      glue.read_examples(root, 'sst2', 'dev')


def _example(text_a, text_b=None, label=1):
  return glue.GlueExample(
      guid='t-0', text_a=text_a, text_b=text_b, label=label, line_number=1
  )


class TestConvertExamplesToFeatures:

  def _ids(self, tokenizer, text):
    return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))

  def test_pair_ids_type_ids_and_padding(self, tokenizer):
    vocab = tokenizer.vocab
    cls, sep, pad = vocab['[CLS]'], vocab['[SEP]'], vocab['[PAD]']
    features, report = glue.convert_examples_to_features(
        [_example('The cat sat.', 'A dog', label=0)],
        tokenizer,
        max_seq_length=12,
    )
    expected_ids = [
        cls,
        vocab['the'],
        vocab['cat'],
        vocab['sat'],
        vocab['.'],
        sep,
        vocab['a'],
        vocab['dog'],
        sep,
    ] + [pad] * 3
    np.testing.assert_array_equal(features['input_word_ids'], [expected_ids])
    np.testing.assert_array_equal(features['input_mask'], [[1] * 9 + [0] * 3])
    np.testing.assert_array_equal(
        features['input_type_ids'], [[0] * 6 + [1] * 3 + [0] * 3]
    )
    np.testing.assert_array_equal(features['label_ids'], [0])
    assert features['label_ids'].dtype == np.int32
    assert features['input_word_ids'].dtype == np.int32
    assert pad != 0
    assert report == glue.FeatureReport(num_examples=1, num_truncated=0)

  def test_single_sentence_with_wordpieces(self, tokenizer):
    vocab = tokenizer.vocab
    features, _ = glue.convert_examples_to_features(
        [_example('Cats playing')], tokenizer, max_seq_length=8
    )
    np.testing.assert_array_equal(
        features['input_word_ids'][0],
        [
            vocab['[CLS]'],
            vocab['cat'],
            vocab['##s'],
            vocab['play'],
            vocab['##ing'],
            vocab['[SEP]'],
            vocab['[PAD]'],
            vocab['[PAD]'],
        ],
    )
    np.testing.assert_array_equal(features['input_type_ids'][0], [0] * 8)

  def test_longest_first_truncation_of_pair(self, tokenizer):
    vocab = tokenizer.vocab
    # a: 6 tokens, b: 2 tokens, budget 9 - 3 = 6: a loses its last 2 tokens.
    features, report = glue.convert_examples_to_features(
        [_example('the cat sat on a mat', 'dog ran')],
        tokenizer,
        max_seq_length=9,
    )
    expected = (
        [vocab['[CLS]']]
        + self._ids(tokenizer, 'the cat sat on')
        + [vocab['[SEP]']]
        + self._ids(tokenizer, 'dog ran')
        + [vocab['[SEP]']]
    )
    np.testing.assert_array_equal(features['input_word_ids'][0], expected)
    np.testing.assert_array_equal(features['input_mask'][0], [1] * 9)
    assert report.num_truncated == 1

  def test_truncation_of_equal_lengths_pops_b_first(self, tokenizer):
    # a: 3, b: 3, budget 8 - 3 = 5: on the tie b loses its last token.
    features, _ = glue.convert_examples_to_features(
        [_example('the cat sat', 'dog ran far')], tokenizer, max_seq_length=8
    )
    vocab = tokenizer.vocab
    expected = (
        [vocab['[CLS]']]
        + self._ids(tokenizer, 'the cat sat')
        + [vocab['[SEP]']]
        + self._ids(tokenizer, 'dog ran')
        + [vocab['[SEP]']]
    )
    np.testing.assert_array_equal(features['input_word_ids'][0], expected)
    np.testing.assert_array_equal(
        features['input_type_ids'][0], [0] * 5 + [1] * 3
    )

  def test_single_sentence_truncation_and_count(self, tokenizer):
    features, report = glue.convert_examples_to_features(
        [_example('the cat sat on a mat'), _example('a dog')],
        tokenizer,
        max_seq_length=5,
    )
    vocab = tokenizer.vocab
    np.testing.assert_array_equal(
        features['input_word_ids'][0],
        [
            vocab['[CLS]'],
            vocab['the'],
            vocab['cat'],
            vocab['sat'],
            vocab['[SEP]'],
        ],
    )
    assert report == glue.FeatureReport(num_examples=2, num_truncated=1)

  def test_regression_labels_are_float(self, tokenizer):
    features, _ = glue.convert_examples_to_features(
        [_example('a cat', 'a dog', label=3.8), _example('a', 'a', label=0.0)],
        tokenizer,
        max_seq_length=8,
    )
    assert features['label_ids'].dtype == np.float32
    np.testing.assert_allclose(features['label_ids'], [3.8, 0.0])

  def test_rejects_bad_input(self, tokenizer):
    with pytest.raises(ValueError, match='No examples'):
      glue.convert_examples_to_features([], tokenizer, 8)
    with pytest.raises(ValueError, match='max_seq_length'):
      glue.convert_examples_to_features([_example('a')], tokenizer, 2)
    with pytest.raises(ValueError, match='mix'):
      glue.convert_examples_to_features(
          [_example('a', label=1), _example('a', label=1.0)], tokenizer, 8
      )

  def test_missing_special_token(self, tmp_path):
    path = tmp_path / 'small_vocab.txt'
    path.write_text('[UNK]\n[CLS]\n[SEP]\nthe\n', encoding='utf-8')
    small = tokenization.FullTokenizer(str(path), do_lower_case=True)
    with pytest.raises(ValueError, match=r'\[PAD\]'):
      glue.convert_examples_to_features([_example('the')], small, 8)


def test_a_split_with_only_its_header_is_named(tmp_path):
  folder = tmp_path / 'MRPC'
  folder.mkdir()
  (folder / 'dev.tsv').write_text(
      'Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n'
  )
  with pytest.raises(
      ValueError, match=r'MRPC/dev.tsv has no examples: 0 row\(s\) after its'
  ):
    glue.read_examples(str(tmp_path), 'mrpc', 'dev')
