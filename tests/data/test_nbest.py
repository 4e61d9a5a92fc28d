"""Tests of the N-best and reference readers on hand-written fixtures."""

import json
import uuid

import pytest
import tensorflow as tf

from official_repro.data import nbest


def _write(path, text):
  """Writes `text` to `path` through tf.io.gfile (local or ram://)."""
  path = str(path)
  tf.io.gfile.makedirs(path.rsplit('/', 1)[0])
  with tf.io.gfile.GFile(path, 'w') as f:
    f.write(text)
  return path


def _ram_dir():
  return f'ram://nbest_test_{uuid.uuid4().hex}'


def _espnet_dir(root):
  """Two ranks; u3's score is malformed, u4 has a score but no text."""
  _write(
      f'{root}/1best_recog/text',
      'u1 THE CAT SAT\nu2 HELLO  WORD\nu3 BAD SCORE\n\n',
  )
  _write(
      f'{root}/1best_recog/score',
      "u1 tensor(-1.5)\nu2 tensor(-2.25, device='cuda:0')\n"
      'u3 tensor(nan)\nu4 tensor(-9.0)\n',
  )
  _write(
      f'{root}/1best_recog/scores',
      'u1 {"decoder": "tensor(-0.5)", "ctc": "tensor(-1.0)", '
      '"lm": -2.0}\nu2 not json\n',
  )
  _write(f'{root}/2best_recog/text', 'u1 THE CAT SAT DOWN\nu2\n')
  _write(f'{root}/2best_recog/score', 'u1 -3.0\nu2 tensor(-4.0)\n')
  return root


def test_espnet_directory_on_ram_filesystem():
  root = _espnet_dir(_ram_dir())
  nbest_set = nbest.read_nbest(root)
  assert nbest_set.report.file_format == 'espnet'
  assert [n.utterance_id for n in nbest_set.lists] == ['u1', 'u2']
  u1, u2 = nbest_set.lists
  assert u1.hypotheses == (
      nbest.Hypothesis(
          1, 'THE CAT SAT', -1.5, {'decoder': -0.5, 'ctc': -1.0, 'lm': -2.0}
      ),
      nbest.Hypothesis(2, 'THE CAT SAT DOWN', -3.0),
  )
  # Extra spaces collapse; an id alone is an empty hypothesis.
  assert [(h.text, h.first_pass_score) for h in u2.hypotheses] == [
      ('HELLO WORD', -2.25),
      ('', -4.0),
  ]
  assert u2.hypotheses[0].components == {}
  assert u2.hypotheses[1].num_words == 0
  assert nbest_set.embedded_references == {}
  report = nbest_set.report
  assert (report.num_utterances, report.num_hypotheses) == (2, 4)
  locations = [location for location, _ in report.malformed]
  assert locations == [
      f'{root}/1best_recog/score line 3',  # tensor(nan)
      f'{root}/1best_recog/scores line 2',  # not JSON
      f'{root}/1best_recog/text line 3',  # u3 has no score
      f'{root}/1best_recog/score line 4',  # u4 has no text
  ]
  assert "no score for 'u3'" in report.malformed[2][1]
  assert report.as_dict()['num_malformed'] == 4


def test_espnet_lower_case():
  nbest_set = nbest.read_nbest(
      _espnet_dir(_ram_dir()), 'espnet', lower_case=True
  )
  assert nbest_set.lists[0].hypotheses[0].text == 'the cat sat'


def test_espnet_duplicate_utterance_in_one_rank_is_an_error(tmp_path):
  _write(tmp_path / '1best_recog/text', 'u1 A\nu1 B\n')
  _write(tmp_path / '1best_recog/score', 'u1 -1\n')
  with pytest.raises(
      ValueError, match=r'text line 2: .*already given at ' r'line 1'
  ):
    nbest.read_nbest(str(tmp_path))


def test_espnet_missing_score_file_and_missing_rank_directories(tmp_path):
  _write(tmp_path / 'decode/1best_recog/text', 'u1 A\n')
  with pytest.raises(FileNotFoundError, match='1best_recog/score'):
    nbest.read_nbest(str(tmp_path / 'decode'))
  (tmp_path / 'empty').mkdir()
  with pytest.raises(FileNotFoundError, match='1best_recog'):
    nbest.read_nbest(str(tmp_path / 'empty'), 'espnet')


def test_mlm_scoring_json(tmp_path):
  content = {
      'utt1': {
          'ref': 'THE CAT',
          'hyp_2': {'score': -5, 'text': 'THE HAT'},
          'hyp_1': {'score': -1.5, 'text': 'THE CAT'},
      },
      'utt2': {
          'hyp_1': {'score': -1.0, 'text': 'X'},
          'hyp_2': {'score': -2.0},
          'hyp_3': {'score': 'oops', 'text': 'W'},
          'hyp_4': {'score': -3.0, 'text': 'Y Z', 'lm_score': 1.0},
          'notes': 'free text',
      },
      'utt3': ['not', 'an', 'object'],
  }
  path = _write(tmp_path / 'dev.am.json', json.dumps(content))
  nbest_set = nbest.read_nbest(path, lower_case=True)
  assert nbest_set.report.file_format == 'json'
  utt1, utt2 = nbest_set.lists
  assert [(h.rank, h.text, h.first_pass_score) for h in utt1.hypotheses] == [
      (1, 'the cat', -1.5),
      (2, 'the hat', -5.0),
  ]
  assert [(h.rank, h.text) for h in utt2.hypotheses] == [(1, 'x'), (4, 'y z')]
  assert nbest_set.embedded_references == {'utt1': 'the cat'}
  assert [location for location, _ in nbest_set.report.malformed] == [
      f"{path} utterance 'utt2' key 'hyp_2'",
      f"{path} utterance 'utt2' key 'hyp_3'",
      f"{path} utterance 'utt2' key 'notes'",
      f"{path} utterance 'utt3'",
  ]
  # Without its rank 1 the list's first-pass output would be another rank.
  del content['utt2']['hyp_1']
  path = _write(tmp_path / 'no_rank_1.json', json.dumps(content))
  with pytest.raises(ValueError, match="'utt2' starts at rank 4"):
    nbest.read_nbest(path, lower_case=True)


def test_mlm_scoring_json_errors(tmp_path):
  duplicate = _write(
      tmp_path / 'duplicate.json',
      '{"u": {"hyp_1": {"score": -1, "text": "A"}, '
      '"hyp_1": {"score": -2, "text": "B"}}}',
  )
  with pytest.raises(ValueError, match="'hyp_1' appears twice"):
    nbest.read_nbest(duplicate)
  broken = _write(tmp_path / 'broken.json', '{"u": {\n"hyp_1": }')
  with pytest.raises(ValueError, match='broken.json line 2 column'):
    nbest.read_nbest(broken, 'json')
  not_object = _write(tmp_path / 'list.json', '[1, 2]')
  with pytest.raises(ValueError, match='expected a JSON object'):
    nbest.read_nbest(not_object, 'json')


def test_tsv_with_header_and_malformed_lines(tmp_path):
  path = _write(
      tmp_path / 'dev.tsv',
      '\n'.join(
          [
              nbest.TSV_HEADER,
              'u1\t2\t-3.5\tTHE HAT',
              'u1\t1\t-1.0\tTHE CAT',
              'u1\t3\t-4.0\t',  # empty hypothesis
              'u2\t1\t-2.0',  # 3 fields
              '\t1\t-1\tA',  # no utterance id
              'u3\t1\t-0.5\tOK',
              '',
          ]
      ),
  )
  nbest_set = nbest.read_nbest(path)
  assert nbest_set.report.file_format == 'tsv'
  u1, u3 = nbest_set.lists
  assert [(h.rank, h.text) for h in u1.hypotheses] == [
      (1, 'THE CAT'),
      (2, 'THE HAT'),
      (3, ''),
  ]
  assert u3.hypotheses == (nbest.Hypothesis(1, 'OK', -0.5),)
  assert [location for location, _ in nbest_set.report.malformed] == [
      f'{path} line {n}' for n in (5, 6)
  ]
  assert 'expected 4' in nbest_set.report.malformed[0][1]


@pytest.mark.parametrize(
    'line, message',
    [
        ('u2\t0\t-2.0\tA', "rank '0' is not an integer >= 1"),
        ('u2\t-1\t-2.0\tA', "rank '-1' is not an integer >= 1"),
        ('u2\tone\t-2.0\tA', "rank 'one' is not an integer >= 1"),
        ('u2\t1\tinf\tA', "first_pass_score 'inf' is not a finite number"),
        ('u2\t1\tx\tA', "first_pass_score 'x' is not a finite number"),
    ],
)
def test_tsv_rank_or_score_outside_its_domain_is_refused(
    tmp_path, line, message
):
  path = _write(tmp_path / 'dev.tsv', f'u1\t1\t-1.0\tA\n{line}\n')
  with pytest.raises(ValueError, match=f'dev.tsv line 2: {message}'):
    nbest.read_nbest(path, 'tsv')


def test_a_list_without_rank_1_is_refused(tmp_path):
  path = _write(tmp_path / 'dev.tsv', 'u1\t2\t-1.0\tA\nu1\t3\t-2.0\tB\n')
  with pytest.raises(ValueError, match="utterance 'u1' starts at rank 2"):
    nbest.read_nbest(path, 'tsv')


def test_tsv_duplicate_rank_is_an_error(tmp_path):
  path = _write(tmp_path / 'dup.tsv', 'u1\t1\t-1\tA\nu1\t1\t-2\tB\n')
  with pytest.raises(
      ValueError,
      match=r'dup.tsv line 2: rank 1 of utterance '
      r"'u1' was already given at .*dup.tsv line 1",
  ):
    nbest.read_nbest(path, 'tsv')


def test_nothing_readable_is_an_error(tmp_path):
  path = _write(tmp_path / 'bad.tsv', 'u1 1 -1 A\n')
  with pytest.raises(
      ValueError,
      match=r'no hypothesis could be read as tsv; ' r'all 1 .*/bad.tsv line 1',
  ):
    nbest.read_nbest(path)
  with pytest.raises(FileNotFoundError, match='missing.tsv'):
    nbest.read_nbest(str(tmp_path / 'missing.tsv'))
  with pytest.raises(ValueError, match='nbest_format'):
    nbest.read_nbest(path, 'kaldi')


def test_non_utf8_line_is_named(tmp_path):
  path = tmp_path / 'latin1.tsv'
  path.write_bytes(b'u1\t1\t-1\tA\nu2\t1\t-1\t\xe9\n')
  with pytest.raises(ValueError, match='latin1.tsv line 2: not valid UTF-8'):
    nbest.read_nbest(str(path))


def test_kaldi_references(tmp_path):
  path = _write(tmp_path / 'text', 'u1 The  Cat\r\nu2\n\nu3 A B C\n')
  references, report = nbest.read_references(path, lower_case=True)
  assert references == {'u1': 'the cat', 'u2': '', 'u3': 'a b c'}
  assert (report.file_format, report.num_utterances) == ('kaldi', 3)


def test_trn_references_with_tab_or_space(tmp_path):
  path = _write(
      tmp_path / 'ref.trn',
      'THE CAT\t(spk1-u1)\nHELLO WORLD (spk1-u2)\n' 'NO ID HERE\n\t(spk2-u3)\n',
  )
  references, report = nbest.read_references(path)
  assert references == {
      'spk1-u1': 'THE CAT',
      'spk1-u2': 'HELLO WORLD',
      'spk2-u3': '',
  }
  assert report.file_format == 'trn'
  assert report.malformed == (
      (f'{path} line 3', 'expected "WORDS ... (<utt-id>)"'),
  )


def test_reference_format_detection_by_content(tmp_path):
  trn = _write(tmp_path / 'ref.txt', 'A B (u1)\nC (u2)\n')
  assert nbest.read_references(trn)[1].file_format == 'trn'
  kaldi = _write(tmp_path / 'text', 'u1 A B (NOISE)\nu2 C\n')
  assert nbest.read_references(kaldi)[0] == {'u1': 'A B (NOISE)', 'u2': 'C'}


def test_duplicate_reference_id_is_an_error(tmp_path):
  path = _write(tmp_path / 'text', 'u1 A\nu2 B\nu1 C\n')
  with pytest.raises(
      ValueError,
      match=r"line 3: reference id 'u1' was " 'already given at line 1',
  ):
    nbest.read_references(path)


def _lists(*utterance_ids):
  return [
      nbest.NBestList(u, (nbest.Hypothesis(1, 'A', 0.0),))
      for u in utterance_ids
  ]


def test_match_references_exact_and_espnet_speaker_prefix():
  references = {'u1': 'ONE', '1272-128104-1272-128104-0000': 'TWO'}
  assert nbest.match_references(
      _lists('u1', '1272-128104-0000'), references
  ) == ['ONE', 'TWO']


def test_match_references_missing_or_ambiguous_is_an_error():
  with pytest.raises(
      ValueError,
      match=r'1 of 2 utterances of dev.tsv have '
      r"no reference in ref.trn, e.g. \['u9'\]",
  ):
    nbest.match_references(
        _lists('u1', 'u9'), {'u1': 'A'}, 'dev.tsv', 'ref.trn'
    )
  with pytest.raises(ValueError, match='ends the reference ids'):
    nbest.match_references(_lists('u1'), {'a-u1': 'A', 'b-u1': 'B'})
