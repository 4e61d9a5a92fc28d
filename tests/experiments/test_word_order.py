"""The word-order command: its flags reach the evaluation, its JSON is it."""

import json

import pytest

# The tests share a trained run (a module fixture): one xdist worker runs
# them all (--dist loadgroup, pytest.ini).
pytestmark = pytest.mark.xdist_group('test_word_order_cli')


@pytest.fixture(scope='module')
def masked_lm_run(run_tiny_pretraining, tmp_path_factory):
  """(model_dir, the run's own result) of a tiny masked-LM run."""
  model_dir = tmp_path_factory.mktemp('word_order_cli') / 'run'
  result = run_tiny_pretraining(model_dir, ['gin/pretrain/masked_lm.gin'])
  return str(model_dir), result


@pytest.mark.slow
def test_in_order_accuracy_is_the_runs_own_and_the_json_is_printed(
    python_m, masked_lm_run, tiny_records, tmp_path
):
  model_dir, result = masked_lm_run
  output_json = tmp_path / 'out' / 'word_order.json'
  completed = python_m(
      [
          'experiments.word_order',
          f'--model_dir={model_dir}',
          f'--records={tiny_records}',
          '--steps=-1',
          '--seed=5',
          f'--output_json={output_json}',
      ]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  saved = json.loads(output_json.read_text())
  assert saved['steps'] == -1
  assert saved['model_dir'] == model_dir
  in_order = saved['in_order']['masked_lm_accuracy']
  assert in_order == pytest.approx(
      result['eval']['masked_lm_accuracy'], rel=1e-5
  )
  assert f'held-out, in order: masked-LM accuracy {in_order:.4f}' in (
      completed.stdout
  )
  assert 'held-out, shuffled: masked-LM accuracy' in completed.stdout


@pytest.mark.parametrize(
    'args, named',
    [
        (['--records=/tmp/r'], 'model_dir'),
        (['--model_dir=/tmp/m'], 'records'),
        (['--model_dir=/tmp/m', '--records=/tmp/r', 'extra'], 'extra'),
    ],
)
def test_missing_and_stray_arguments_are_refused_before_any_work(
    python_m, args, named
):
  completed = python_m(['experiments.word_order', *args])
  assert completed.returncode != 0
  assert 'Traceback' not in completed.stderr
  assert named in completed.stderr
