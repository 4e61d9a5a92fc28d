"""End-to-end tests of the rescoring command on hand-made N-best lists.

The lists are those of tests/rescoring/test_interpolation.py (where the
expected WERs are derived): the dev set is a TSV file, the test set an
ESPnet decode directory in upper case, the references one sclite trn file
with ESPnet's `<speaker>-<utt-id>` ids, the LM scores one TSV file. Tuned
on dev over weights 0:1:0.1, the weight is 0.3; test WER is 2/7 for the
first pass, 1/7 rescored, 0 for the oracle. The runs without LM scores
read a set of their own (`_EVAL`, its word edits counted by hand beside it).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from official_repro import rescore
from tests.rescoring.nbest_lists import DEV
from tests.rescoring.nbest_lists import TEST

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run_rescore(flags):
  """Runs `python -m official_repro.rescore` with `flags` on the CPU."""
  return subprocess.run(
      [sys.executable, '-m', 'official_repro.rescore', *flags],
      cwd=REPO_ROOT,
      capture_output=True,
      text=True,
      timeout=300,
      env={**os.environ, 'CUDA_VISIBLE_DEVICES': ''},
      check=False,
  )


def _write_inputs(root):
  """Writes dev.tsv, test/ (ESPnet), ref.trn and lm.tsv under `root`."""
  with open(root / 'dev.tsv', 'w') as f:
    f.write('utt_id\trank\tfirst_pass_score\ttext\n')
    for utterance_id, (_, hypotheses) in DEV.items():
      for rank, (text, first_pass, _) in enumerate(hypotheses, start=1):
        f.write(f'{utterance_id}\t{rank}\t{first_pass}\t{text}\n')
  max_rank = max(len(h) for _, h in TEST.values())
  for rank in range(1, max_rank + 1):
    directory = root / 'test' / f'{rank}best_recog'
    directory.mkdir(parents=True)
    with (
        open(directory / 'text', 'w') as text_file,
        open(directory / 'score', 'w') as score_file,
    ):
      for utterance_id, (_, hypotheses) in TEST.items():
        if rank <= len(hypotheses):
          text, first_pass, _ = hypotheses[rank - 1]
          text_file.write(f'{utterance_id} {text.upper()}\n')
          score_file.write(f'{utterance_id} tensor({first_pass})\n')
  with open(root / 'ref.trn', 'w') as f:
    for utterance_id, (reference, _) in {**DEV, **TEST}.items():
      f.write(f'{reference.upper()}\t(spk-{utterance_id})\n')
  with open(root / 'lm.tsv', 'w') as f:
    for utterance_id, (_, hypotheses) in {**DEV, **TEST}.items():
      for rank, (_, _, lm) in enumerate(hypotheses, start=1):
        f.write(f'{utterance_id}\t{rank}\t{lm}\n')


def _settings(root, **overrides):
  values = dict(
      nbest=(('dev', str(root / 'dev.tsv')), ('test', str(root / 'test'))),
      references=(('', str(root / 'ref.trn')),),
      lm_scores=(('', str(root / 'lm.tsv')),),
      lower_case=True,
      dev_set='dev',
      weights=rescore.parse_grid('0:1:0.1', 'weights'),
  )
  values.update(overrides)
  return rescore.Settings(**values)


@pytest.mark.slow
def test_command_end_to_end(tmp_path):
  _write_inputs(tmp_path)
  output_json = tmp_path / 'out' / 'results.json'
  completed = _run_rescore(
      [
          f'--nbest=dev={tmp_path / "dev.tsv"}',
          f'--nbest={tmp_path / "test"}',
          f'--references={tmp_path / "ref.trn"}',
          f'--lm_scores={tmp_path / "lm.tsv"}',
          '--lower_case',
          '--dev_set=dev',
          '--weights=0:1:0.1',
          '--length_bonuses=0',
          f'--output_json={output_json}',
          f'--output_text_dir={tmp_path / "out"}',
      ]
  )
  assert completed.returncode == 0, completed.stderr
  stdout = completed.stdout
  assert '| 0.3 | **0.00** |' in stdout
  assert '| 0.2 | 20.00 |' in stdout
  assert 'Chosen: weight 0.3, length bonus 0.' in stdout
  assert '### test: 3 utterances, 7 hypotheses, 7 reference words' in stdout
  assert '| first pass (rank 1) | 28.57 | 1 | 1 | 0 |' in stdout
  assert '| rescored (weight 0.3, length bonus 0) | 14.29 | 1 | 0 | 0 |' in (
      stdout
  )
  assert '| oracle | 0.00 | 0 | 0 | 0 |' in stdout
  assert '### dev (tuning set)' in stdout

  results = json.loads(output_json.read_text())
  assert (results['weight'], results['length_bonus']) == (0.3, 0.0)
  assert len(results['grid_search']['points']) == 11
  test = results['sets']['test']
  assert test['nbest']['format'] == 'espnet'
  assert test['references']['format'] == 'trn'
  assert test['result']['first_pass']['wer'] == pytest.approx(2 / 7)
  assert test['result']['rescored']['wer'] == pytest.approx(1 / 7)
  assert test['result']['oracle']['wer'] == 0.0
  assert results['sets']['dev']['result']['first_pass']['errors'] == 2
  assert (tmp_path / 'out' / 'test' / 'text').read_text() == (
      'v1 good morning sir\nv2 yes\nv3 open a door\n'
  )


class _TableScorer:
  """Returns the LM scores of the fixture, looked up by text."""

  def __init__(self):
    self._scores = {
        text: lm
        for _, hypotheses in {**DEV, **TEST}.values()
        for text, _, lm in hypotheses
    }

  def __call__(self, sentences):
    return np.array([self._scores[sentence] for sentence in sentences])


def test_scorer_gives_the_same_results_as_a_scores_file(tmp_path):
  _write_inputs(tmp_path)
  from_file = rescore.run(_settings(tmp_path))
  from_scorer = rescore.run(
      _settings(tmp_path, lm_scores=()), scorer=_TableScorer(), batch_size=3
  )
  for name in ('dev', 'test'):
    assert (
        from_scorer['sets'][name]['result'] == from_file['sets'][name]['result']
    )
  assert from_scorer['sets']['test']['lm_scores'] == {'scorer': '_TableScorer'}


def test_scoring_with_a_scorer_logs_its_progress_per_set(
    tmp_path, progress_lines
):
  _write_inputs(tmp_path)
  lines = progress_lines
  rescore.run(
      _settings(tmp_path, lm_scores=()), scorer=_TableScorer(), batch_size=3
  )
  # Distinct texts: 5 in dev, 7 in test; 3 per scorer call.
  assert [
      line.split(' (')[0].split(',')[0]
      for line in lines
      if line.startswith('LM scores')
  ] == [
      'LM scores of dev: 3/5 texts',
      'LM scores of dev: 5/5 texts',
      'LM scores of test: 3/7 texts',
      'LM scores of test: 6/7 texts',
      'LM scores of test: 7/7 texts',
  ]


def test_one_point_grid_needs_no_dev_set(tmp_path):
  _write_inputs(tmp_path)
  results = rescore.run(_settings(tmp_path, dev_set='', weights=(0.0,)))
  assert results['grid_search'] is None
  test = results['sets']['test']['result']
  assert test['rescored'] == test['first_pass']


def test_embedded_json_references(tmp_path):
  _write_inputs(tmp_path)
  content = {
      utterance_id: {
          'ref': reference,
          **{
              f'hyp_{rank}': {'score': first_pass, 'text': text}
              for rank, (text, first_pass, _) in enumerate(hypotheses, start=1)
          },
      }
      for utterance_id, (reference, hypotheses) in TEST.items()
  }
  (tmp_path / 'test.json').write_text(json.dumps(content))
  results = rescore.run(
      _settings(
          tmp_path,
          nbest=(('test', str(tmp_path / 'test.json')),),
          references=(),
          dev_set='',
          weights=(0.3,),
      )
  )
  test = results['sets']['test']
  assert test['references'] == {
      'path': str(tmp_path / 'test.json'),
      'format': 'embedded',
  }
  assert test['result']['rescored']['errors'] == 1


def test_settings_errors(tmp_path):
  with pytest.raises(ValueError, match="--dev_set='eval' is not one"):
    _settings(tmp_path, dev_set='eval')
  with pytest.raises(
      ValueError, match=r'--references names the sets ' r"\['eval'\]"
  ):
    _settings(tmp_path, references=(('eval', 'ref.trn'),))
  with pytest.raises(ValueError, match='more than one path without'):
    _settings(tmp_path, lm_scores=(('', 'a.tsv'), ('', 'b.tsv')))
  with pytest.raises(ValueError, match=r"sets \['dev'\] more than once"):
    _settings(tmp_path, nbest=(('dev', 'a'), ('dev', 'b')))


def test_run_errors(tmp_path):
  _write_inputs(tmp_path)
  with pytest.raises(ValueError, match='not both'):
    rescore.run(_settings(tmp_path), scorer=_TableScorer())
  with pytest.raises(ValueError, match='11 points; give --dev_set'):
    rescore.run(_settings(tmp_path, dev_set=''))
  with pytest.raises(ValueError, match='11 points; give --dev_set'):
    rescore.run(
        _settings(tmp_path, dev_set='', lm_scores=()), scorer=_TableScorer()
    )
  with pytest.raises(ValueError, match='--output_text_dir gets the rescored'):
    rescore.run(
        _settings(tmp_path, lm_scores=(), output_text_dir=str(tmp_path))
    )
  with pytest.raises(ValueError, match="Set 'dev' .* has no references"):
    rescore.run(_settings(tmp_path, references=()))
  (tmp_path / 'dev_only.trn').write_text('THE CAT SAT (spk-u1)\n')
  with pytest.raises(
      ValueError, match='1 of 2 utterances .* have no ' 'reference'
  ):
    rescore.run(
        _settings(
            tmp_path,
            references=(
                ('dev', str(tmp_path / 'dev_only.trn')),
                ('test', str(tmp_path / 'ref.trn')),
            ),
        )
    )


# Set 'eval' for the runs without LM scores: (reference, hypotheses by rank
# with their first-pass scores). Word edits counted by hand:
#   w1 'the cat sat down' (4 words): rank 1 'the hat sat' 1 sub + 1 del;
#      rank 2 'the cat sat' 1 del (the oracle: fewest, lowest rank);
#      rank 3 'the cat sat down now' 1 ins.
#   w2 'hello world' (2 words): rank 1 exact (the oracle); rank 2 1 del,
#      with the higher first-pass score (the first pass is rank 1 all the
#      same, and the table notes the one list out of order).
#   w3 'open the door' (3 words): rank 1 'oven' 1 sub + 2 del; rank 2
#      'open a floor' 2 sub; rank 3 'open the' 1 del (the oracle).
# First pass: 2 sub, 3 del, 0 ins = 5 errors / 9 words = 55.56%.
# Oracle: 0 sub, 2 del, 0 ins = 2 errors / 9 words = 22.22%.
_EVAL = {
    'w1': (
        'the cat sat down',
        [
            ('the hat sat', -1.0),
            ('the cat sat', -2.0),
            ('the cat sat down now', -3.0),
        ],
    ),
    'w2': ('hello world', [('hello world', -1.5), ('hello', -0.5)]),
    'w3': (
        'open the door',
        [('oven', -1.0), ('open a floor', -1.5), ('open the', -2.0)],
    ),
}


def _write_eval(root):
  """Writes `_EVAL` as eval.tsv and its references as Kaldi text."""
  with open(root / 'eval.tsv', 'w') as f:
    f.write('utt_id\trank\tfirst_pass_score\ttext\n')
    for utterance_id, (_, hypotheses) in _EVAL.items():
      for rank, (text, first_pass) in enumerate(hypotheses, start=1):
        f.write(f'{utterance_id}\t{rank}\t{first_pass}\t{text}\n')
  with open(root / 'text', 'w') as f:
    for utterance_id, (reference, _) in _EVAL.items():
      f.write(f'{utterance_id} {reference}\n')


def test_without_lm_scores_only_first_pass_and_oracle(tmp_path):
  _write_eval(tmp_path)
  # The default grid of 11 weights needs no --dev_set without LM scores.
  results = rescore.run(
      rescore.Settings(
          nbest=(('eval', str(tmp_path / 'eval.tsv')),),
          references=(('', str(tmp_path / 'text')),),
          weights=rescore.parse_grid('0:1:0.1', 'weights'),
          output_json=str(tmp_path / 'out.json'),
      )
  )
  result = results['sets']['eval']['result']
  assert (result['first_pass']['errors'], result['oracle']['errors']) == (5, 2)
  assert result['first_pass']['wer'] == pytest.approx(5 / 9)
  assert result['oracle']['wer'] == pytest.approx(2 / 9)
  assert result['rescored'] is None and results['weight'] is None
  assert 'rescored' not in results['sets']['eval']['markdown']
  assert json.loads((tmp_path / 'out.json').read_text()) == results


@pytest.mark.slow
def test_command_without_lm_scores_prints_first_pass_and_oracle(tmp_path):
  _write_eval(tmp_path)
  completed = _run_rescore(
      [
          f'--nbest=eval={tmp_path / "eval.tsv"}',
          f'--references={tmp_path / "text"}',
      ]
  )
  assert completed.returncode == 0, completed.stderr
  stdout = completed.stdout
  assert '### eval: 3 utterances, 8 hypotheses, 9 reference words' in stdout
  assert '| first pass (rank 1) | 55.56 | 2 | 3 | 0 |' in stdout
  assert '| oracle | 22.22 | 0 | 2 | 0 |' in stdout
  assert 'Note: in 1 lists the rank-1 hypothesis' in stdout
  assert 'rescored' not in stdout
  assert stdout.rstrip().endswith(
      'give --lm_scores=[<set>=]<path> (utt_id<TAB>rank<TAB>score lines from '
      'any LM) or --init_checkpoint=<SCRIPT pretraining model_dir>.'
  )


def test_parse_grid():
  assert rescore.parse_grid('0:1:0.25', 'w') == (0.0, 0.25, 0.5, 0.75, 1.0)
  assert rescore.parse_grid('0:0.3:0.1', 'w') == (0.0, 0.1, 0.2, 0.3)
  assert rescore.parse_grid('2, -1,0:1:0.5,2', 'w') == (
      -1.0,
      0.0,
      0.5,
      1.0,
      2.0,
  )
  assert rescore.parse_grid('0:0.25:0.1', 'w') == (0.0, 0.1, 0.2)
  for spec, message in (
      ('a', 'not a number'),
      ('0:1', 'not a number'),
      ('1:0:0.1', 'stop >= start'),
      ('0:1:0', 'step > 0'),
      ('0:1e9:1e-3', 'at most'),
  ):
    with pytest.raises(ValueError, match=message):
      rescore.parse_grid(spec, 'weights')
