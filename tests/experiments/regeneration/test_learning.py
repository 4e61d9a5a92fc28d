"""The learning target: every objective's held-out curve against targets."""

import json
import os

import pytest
import tensorflow as tf

from official_repro.training import word_order
from experiments.regeneration import learning
from experiments.regeneration import registry
from experiments.regeneration import runner

# Held-out metrics each fake run evaluates at steps 2 and 4.
_CURVES = {
    'masked_lm': [dict(masked_lm_accuracy=0.2), dict(masked_lm_accuracy=0.31)],
    'electra': [
        dict(masked_lm_accuracy=0.1, discriminator_auc=0.7),
        dict(masked_lm_accuracy=0.24, discriminator_auc=0.9),
    ],
    'teams': [
        dict(masked_lm_accuracy=0.1, discriminator_auc=0.7, mws_accuracy=0.3),
        dict(masked_lm_accuracy=0.2, discriminator_auc=0.8, mws_accuracy=0.55),
    ],
    'script': [
        dict(masked_lm_accuracy=0.1, discriminator_auc=0.9),
        dict(masked_lm_accuracy=0.2, discriminator_auc=0.84),
    ],
}


def _fake_pretrain(calls):
  def pretrain(run, settings, records, model_dir, steps, interval, seed=None):
    del settings, records, interval
    calls.append((run.name, steps, seed))
    writer = tf.summary.create_file_writer(
        os.path.join(model_dir, 'validation')
    )
    with writer.as_default():
      for step, metrics in zip((2, 4), _CURVES[run.name]):
        for name, value in metrics.items():
          tf.summary.scalar(name, value, step=step)
    writer.close()
    os.makedirs(os.path.join(model_dir, 'encoder'), exist_ok=True)
    for name in (f'encoder-{steps}.index', 'encoder_config.json'):
      open(os.path.join(model_dir, 'encoder', name), 'w').close()

  return pretrain


@pytest.fixture(scope='module')
def report(tmp_path_factory):
  """A learning report made with fake jobs.

  (content, out, pretraining calls, fine-tuning calls) of a learning
  report made with fake jobs.
  """
  calls, finetuned = [], []

  def finetune(target, settings, checkpoint, step_dir, random_init=False):
    del target, step_dir
    finetuned.append((checkpoint, random_init, sorted(settings.tasks)))
    mean = 0.5 if random_init else 0.7
    return {
        task: dict(score=mean, summary=dict(n=3, mean=mean, std=0.01))
        for task in settings.tasks
    }

  tmp_path = tmp_path_factory.mktemp('learning')
  settings = runner.GridSettings(
      target='learning',
      scale='cpu',
      corpus='c',
      vocab_file=None,
      glue_dir='g',
      reference_steps=4,
      tasks={'sst2': 1.0, 'mrpc': 3.0, 'cola': 3.0, 'rte': 3.0},
      num_runs=3,
      learned_vocab_size=4096,
      eval_fraction=0.1,
      pretrain_seeds=3,
      held_out_steps=2,
  )
  out = str(tmp_path / 'out')
  with pytest.MonkeyPatch.context() as patch:
    patch.setattr(runner, '_pretrain', _fake_pretrain(calls))
    patch.setattr(runner, 'finetune', finetune)
    patch.setattr(runner, 'build_records', lambda *args: 8192)
    patch.setattr(
        word_order,
        'word_order',
        lambda *args, **kwargs: dict(
            steps=2,
            in_order=dict(
                masked_lm_accuracy=0.31,
                context_free=0.16,
                mask_token_accuracy=0.22,
                mask_token_context_free=0.07,
            ),
            shuffled=dict(
                masked_lm_accuracy=0.12,
                context_free=0.16,
                mask_token_accuracy=0.08,
                mask_token_context_free=0.07,
            ),
        ),
    )
    content = learning.run_learning(
        registry.get('learning'), settings, out, str(tmp_path / 'runs')
    )
  return content, out, calls, finetuned


@pytest.mark.slow
def test_each_objective_trains_once_with_the_first_seed(report):
  _, _, calls, _ = report
  assert calls == [
      (name, 4, 1) for name in ('masked_lm', 'electra', 'teams', 'script')
  ]


def test_targets_are_judged_on_the_last_evaluation(report):
  content, _, _, _ = report
  met = {
      (name, check['metric']): check['met']
      for name, run in content['runs'].items()
      for check in run['targets']
  }
  assert met == {
      ('masked_lm', 'masked_lm_accuracy'): True,
      ('electra', 'discriminator_auc'): True,
      ('electra', 'masked_lm_accuracy'): False,  # 0.24 < 0.25
      ('teams', 'mws_accuracy'): True,  # 0.55 >= 3 x 1/6
      ('script', 'discriminator_auc'): False,  # 0.9 early, 0.84 at the end
  }


def test_only_the_masked_lm_is_fine_tuned_against_random_init(report):
  content, _, _, finetuned = report
  masked_lm_dir = content['runs']['masked_lm']['model_dir']
  assert sorted(finetuned) == [
      (masked_lm_dir, False, ['cola', 'mrpc', 'sst2']),
      (masked_lm_dir, True, ['cola', 'mrpc', 'sst2']),
  ]
  assert all(
      'finetuned' not in content['runs'][name]
      for name in ('electra', 'teams', 'script')
  )
  gap = content['runs']['masked_lm']['against_random_init']['sst2']
  assert gap['gap'] == pytest.approx(0.2)
  # Twice the standard error: 2 * sqrt(0.01^2 / 3 * 2).
  assert gap['noise'] == pytest.approx(2 * (2 * 0.01**2 / 3) ** 0.5)
  assert gap['verdict'] == 'ahead'


@pytest.mark.slow
def test_report_and_figures_are_written(report):
  content, out, _, _ = report
  with open(os.path.join(out, 'learning_cpu.md')) as f:
    text = f.read()
  assert '| in order | 0.310 | 0.160 | 0.220 | 0.070 |' in text
  shuffled = '| words of each segment shuffled | 0.120 | 0.160 | 0.080 |'
  assert shuffled in text
  assert 'critic AUC | 0.840 | >= 0.850 | no |' in text
  assert '| masked LM (001 BERT_small) | 0.700 ± 0.010 (+0.200, ahead)' in text
  with open(os.path.join(out, 'learning_cpu.json')) as f:
    assert json.load(f)['runs']['teams']['final']['mws_accuracy'] == (
        pytest.approx(0.55)
    )
  for name in ('masked_lm', 'electra', 'teams', 'script', 'overlay'):
    with open(os.path.join(out, f'learning_cpu_{name}.png'), 'rb') as f:
      assert f.read(8) == b'\x89PNG\r\n\x1a\n'
  assert content['runs']['masked_lm']['held_out']['4'] == dict(
      masked_lm_accuracy=pytest.approx(0.31)
  )


@pytest.mark.parametrize(
    'pretrained, verdict',
    [(0.70, 'ahead'), (0.50, 'behind'), (0.605, 'within noise')],
)
def test_gap_verdict_is_signed(pretrained, verdict):
  def result(mean):
    return dict(summary=dict(n=3, mean=mean, std=0.01))

  # Twice the standard error of the difference: about 0.016.
  assert learning._gap(result(pretrained), result(0.6))['verdict'] == verdict


def test_a_word_order_measured_before_the_ceiling_prints_its_note(report):
  content, _, _, _ = report
  order = dict(
      steps=50,
      in_order=dict(masked_lm_accuracy=0.341),
      shuffled=dict(masked_lm_accuracy=0.08),
      note='Correction: the ceiling was not measured here.',
  )
  text = learning.markdown(dict(content, word_order=order))
  assert '| in order | 0.341 |\n' in text
  assert 'best without context' not in text
  assert '\nCorrection: the ceiling was not measured here.\n' in text
