"""The dynamics-parity experiment: its metrics, comparisons and report."""

import itertools
import json
import os
import time

import gin
import numpy as np
import pytest
import tensorflow as tf

from experiments import commands
from experiments.investigations import dynamics_parity
from official_repro.common import cli
from official_repro.data import records
from official_repro.metrics import aggregation
from official_repro.metrics import context_free
from tests.experiments.investigations import test_discriminator_probe_lib

pytestmark = pytest.mark.slow


def test_held_out_metrics_by_hand():
  mask_id = 4
  batch = dict(
      input_word_ids=np.array([[2, 4, 9, 4, 0], [2, 7, 4, 3, 0]]),
      input_mask=np.array([[1, 1, 1, 1, 0], [1, 1, 1, 1, 0]]),
      masked_lm_positions=np.array([[1, 2, 3], [1, 2, 0]]),
      masked_lm_ids=np.array([[5, 9, 6], [8, 7, 0]]),
      masked_lm_weights=np.array([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]),
  )
  vocab = 10
  predicted = np.array([[5, 9, 1], [8, 1, 0]])  # right: 5, 9, 8
  mlm_logits = np.eye(vocab)[predicted] * 3.0
  rtd_logits = np.array([[-1.0, 2.0, -2.0, 0.5, 9.0], [-3.0, 1.0, 3.0, -1, 9]])
  rtd_labels = np.array([[0, 1, 0, 0, 1], [0, 0, 1, 1, 1]])
  mws_logits = np.array(
      [[[2.0, 1.0], [0.0, 1.0], [3.0, 1.0]], [[1.0, 0.0], [0.0, 5.0], [0, 9]]]
  )
  predictor = context_free.ContextFreePredictor(
      counts=np.ones(10, np.int64),
      mask_token_id=mask_id,
      mask_token_fraction=0.8,
      random_token_fraction=0.1,
      num_replacements=6,
  )
  metrics = dynamics_parity.held_out_metrics(
      [
          dict(
              mlm_logits=mlm_logits,
              rtd_logits=rtd_logits,
              rtd_labels=rtd_labels,
              mws_logits=mws_logits,
          )
      ],
      [batch],
      predictor,
  )
  # 5 real slots, 3 right; slots showing [MASK]: (0,0), (0,2), (1,1): 1 right.
  assert metrics['masked_lm_accuracy'] == pytest.approx(3 / 5)
  assert metrics['mask_token_accuracy'] == pytest.approx(1 / 3)
  # 8 real tokens (padding excluded), 3 positive: 2.0, -1, 3.0.
  real_logits = [-1.0, 2.0, -2.0, 0.5, -3.0, 1.0, 3.0, -1.0]
  real_labels = [0, 1, 0, 0, 0, 0, 1, 1]
  assert metrics['discriminator_accuracy'] == pytest.approx(5 / 8)
  assert metrics['discriminator_recall'] == pytest.approx(2 / 3)
  assert metrics['discriminator_auc'] == pytest.approx(
      test_discriminator_probe_lib.pairwise_auc(real_labels, real_logits)
  )
  expected_loss = np.mean(
      [
          np.log1p(np.exp(-z)) if y else np.log1p(np.exp(z))
          for z, y in zip(real_logits, real_labels)
      ]
  )
  assert metrics['discriminator_loss'] == pytest.approx(expected_loss)
  assert metrics['mws_accuracy'] == pytest.approx(3 / 5)  # 2 of 5 lose


def _welch(a, b):
  return dynamics_parity.welch(a, b, aggregation.compare(a, b))


def test_welchs_p_and_chance_flag_follow_its_t_distribution():
  # One side constant: Welch's degrees of freedom are n - 1 = 1, a Cauchy
  # distribution, P(|T| > t) = 1 - 2 atan(t) / pi. Gap 1, standard error 1.
  p, chance_flag = _welch([0.0, 2.0], [0.0, 0.0])
  assert p == pytest.approx(0.5)
  assert chance_flag == pytest.approx(1 - 2 * np.arctan(2) / np.pi)
  # Equal spreads, 3 and 3 seeds: 4 degrees of freedom, where
  # P(|T| > t) = 1 - t (6 + t^2) / (t^2 + 4)^1.5 (Student's t, nu = 4).
  p, chance_flag = _welch([1.0, 2.0, 3.0], [0.0, 1.0, 2.0])
  t = 1.0 / np.sqrt(2.0 / 3.0)
  assert p == pytest.approx(1 - t * (6 + t**2) / (t**2 + 4) ** 1.5)
  assert chance_flag == pytest.approx(1 - 2 * (6 + 4) / 8**1.5)
  # No spread: an equal gap is certain to be noise, another certain not to.
  assert _welch([0.0, 0.0], [0.0, 0.0]) == (1.0, 0.0)
  assert _welch([1.0, 1.0], [0.0, 0.0]) == (0.0, 0.0)


def _results():
  def curve(base):
    return {
        500: dict(masked_lm_accuracy=[base, base + 0.01, base + 0.02]),
        1000: dict(masked_lm_accuracy=[base + 0.1, base + 0.11, base + 0.1]),
    }

  return dict(
      masked_lm=dict(
          ours_static=curve(0.2),
          stock_static=curve(0.2),
          ours_dynamic=curve(0.3),
      )
  )


def test_comparisons_pair_the_variants_each_checkpoint_and_metric():
  rows = dynamics_parity.comparisons(_results())
  assert {(r['variant'], r['against'], r['step']) for r in rows} == {
      ('ours_static', 'stock_static', 500),
      ('ours_static', 'stock_static', 1000),
      ('ours_dynamic', 'ours_static', 500),
      ('ours_dynamic', 'ours_static', 1000),
  }
  by_key = {(r['variant'], r['step']): r for r in rows}
  assert by_key[('ours_static', 500)]['verdict'] == 'within noise'
  dynamic = by_key[('ours_dynamic', 1000)]
  # The verdict, gap and noise are aggregation.compare's.
  comparison = aggregation.compare([0.4, 0.41, 0.4], [0.3, 0.31, 0.3])
  assert (dynamic['verdict'], dynamic['gap'], dynamic['noise']) == (
      'ahead',
      pytest.approx(comparison.gap),
      pytest.approx(comparison.noise),
  )
  assert (dynamic['mean'], dynamic['against_mean']) == (
      pytest.approx(0.4033333),
      pytest.approx(0.3033333),
  )


def test_summary_names_what_differs_at_the_last_checkpoint_only():
  rows = dynamics_parity.comparisons(_results())
  lines = dynamics_parity.summary(rows)
  bullets = [line for line in lines if line.startswith('- ')]
  assert len(bullets) == 2  # one per comparison
  (dynamic,) = [b for b in bullets if 'ours_dynamic vs ours_static' in b]
  assert 'step 1,000' in dynamic
  assert 'ahead on masked_lm_accuracy (+0.1000' in dynamic
  assert '2 of 2 checks are ahead or behind' in dynamic
  (stock,) = [b for b in bullets if 'ours_static vs stock_static' in b]
  # Equal curves: the bullet says so instead of listing nothing.
  assert 'within noise on every metric' in stock and 'step 1,000' in stock


def _ceiling_by_count(record_dir, batches, batch_size):
  """Context-free hits over the first batches of the stored masks."""
  predictor = context_free.ContextFreePredictor.from_records(
      record_dir, 0.8, 0.1
  )
  metadata = records.load_metadata(record_dir)
  spec = records.feature_spec(metadata)
  hits = slots = 0
  for index, record in enumerate(
      tf.data.TFRecordDataset(records.split_files(metadata, record_dir, 'eval'))
  ):
    if index == batches * batch_size:
      break
    example = tf.io.parse_single_example(record, spec)
    ids = example['input_ids'].numpy()
    for position, original, weight in zip(
        example['masked_lm_positions'].numpy(),
        example['masked_lm_ids'].numpy(),
        example['masked_lm_weights'].numpy(),
    ):
      if weight > 0:
        slots += 1
        hits += int(predictor.table()[ids[position]] == original)
  return hits / slots, slots


def test_report_from_finished_runs(tmp_path, static_records):
  os.symlink(static_records, tmp_path / 'records_static')
  for objective, variant, seed in itertools.product(
      ['masked_lm'], ['ours_static', 'stock_static'], [1, 2]
  ):
    run = tmp_path / dynamics_parity.run_name(objective, variant, seed)
    run.mkdir()
    curve = {
        str(step): dict(
            masked_lm_accuracy=0.1 * step / 500 + 0.01 * seed,
            mask_token_accuracy=0.05 * seed,
        )
        for step in (500, 1000)
    }
    (run / 'curve.json').write_text(json.dumps(dict(curve=curve)))
  path = dynamics_parity.write_report(
      str(tmp_path),
      str(tmp_path / 'out'),
      ['masked_lm'],
      [1, 2],
      dynamics_parity.Schedule(train_steps=1000),
  )
  text = open(path).read()
  assert (
      '| masked_lm | ours_static vs stock_static | 1,000 | masked_lm_accuracy'
      in text
  )
  assert '| ours_static | 500 | 2 | 0.1150 ± 0.0071 |' in text
  # Seed by seed at the last checkpoint: 0.2 + 0.01 * seed.
  assert '- ours_static (step 1,000): 0.2100, 0.2200' in text
  # Equal curves: 0 of 4 checks beyond noise; each is by chance with
  # P(|t| > 2) at Welch's 2 degrees of freedom, 1 - 2 / sqrt(6).
  assert (
      f'0 of 4 checks are ahead or behind; {4 * (1 - 2 / np.sqrt(6)):.1f} '
      'would be by chance' in text
  )
  assert (tmp_path / 'out' / 'dynamics_parity_cpu_masked_lm.png').exists()
  data = json.loads((tmp_path / 'out' / 'dynamics_parity_cpu.json').read_text())
  assert len(data['comparisons']) == 4  # 2 steps x 2 metrics
  assert data['train_steps'] == 1000
  assert '1,000 steps (warmup a tenth)' in text
  expected, slots = _ceiling_by_count(
      static_records, 20, dynamics_parity.HELD_OUT_BATCH_SIZE
  )
  assert data['context_free']['slots'] == slots
  assert data['context_free']['context_free'] == pytest.approx(expected)
  assert f'scores {expected:.4f} on these {slots:,} held-out slots' in text


def _write_curve(runs_dir, objective, variant, seed, accuracy):
  run = runs_dir / dynamics_parity.run_name(objective, variant, seed)
  run.mkdir(parents=True)
  curve = {
      '500': dict(masked_lm_accuracy=accuracy, mask_token_accuracy=accuracy)
  }
  (run / 'curve.json').write_text(json.dumps(dict(curve=curve)))


def test_a_prior_reports_runs_count_and_are_not_trained_again(
    tmp_path, static_records
):
  schedule = dynamics_parity.Schedule(train_steps=500)
  first, second = tmp_path / 'first', tmp_path / 'second'
  for runs_dir in (first, second):
    runs_dir.mkdir()
    os.symlink(static_records, runs_dir / 'records_static')
  for seed, accuracy in ((1, 0.10), (2, 0.20), (4, 0.40)):
    _write_curve(first, 'masked_lm', 'ours_static', seed, accuracy)
    _write_curve(first, 'masked_lm', 'stock_static', seed, accuracy + 0.01)
  dynamics_parity.write_report(
      str(first), str(first / 'out'), ['masked_lm'], [1, 2, 4], schedule
  )
  prior_path = str(first / 'out' / 'dynamics_parity_cpu.json')
  # A new machine: seed 3 trained there; seed 2 of ours_static trained again
  # there too, which wins over the prior report's.
  _write_curve(second, 'masked_lm', 'ours_static', 3, 0.30)
  _write_curve(second, 'masked_lm', 'stock_static', 3, 0.31)
  _write_curve(second, 'masked_lm', 'ours_static', 2, 0.25)
  prior = dynamics_parity.read_prior_report(prior_path, schedule)
  assert len(prior.runs) == 6
  assert dynamics_parity.jobs_left(
      str(second), ['masked_lm'], [1, 2, 3], None, prior.runs
  ) == [
      ('masked_lm', 'ours_dynamic', 1),
      ('masked_lm', 'ours_dynamic', 2),
      ('masked_lm', 'ours_dynamic', 3),
  ]
  # Seeds 1-3 only: the prior report's seed 4 stays out of the statistics
  # but is kept in the new report's runs.
  path = dynamics_parity.write_report(
      str(second),
      str(second / 'out'),
      ['masked_lm'],
      [1, 2, 3],
      schedule,
      prior,
  )
  text = open(path).read()
  assert '- ours_static (step 500): 0.1000, 0.2500, 0.3000' in text
  assert '- stock_static (step 500): 0.1100, 0.2100, 0.3100' in text
  assert (
      f'Runs: 3 read from `{prior_path}` (trained by earlier invocations), 3 '
      'found under --runs_dir: masked_lm-ours_static-seed2, '
      'masked_lm-ours_static-seed3, masked_lm-stock_static-seed3.' in text
  )
  data = json.loads((second / 'out' / 'dynamics_parity_cpu.json').read_text())
  assert sorted(data['runs']) == sorted(
      dynamics_parity.run_name('masked_lm', v, s)
      for v in ('ours_static', 'stock_static')
      for s in (1, 2, 3, 4)
  )
  assert data['runs']['masked_lm-ours_static-seed4']['curve']['500'] == {
      'masked_lm_accuracy': 0.40,
      'mask_token_accuracy': 0.40,
  }


def test_a_prior_report_on_other_records_is_refused(tmp_path, static_records):
  schedule = dynamics_parity.Schedule(train_steps=500)
  os.symlink(static_records, tmp_path / 'records_static')
  for variant in ('ours_static', 'stock_static'):
    for seed in (1, 2):
      _write_curve(tmp_path, 'masked_lm', variant, seed, 0.1 * seed)
  path = dynamics_parity.write_report(
      str(tmp_path), str(tmp_path / 'out'), ['masked_lm'], [1, 2], schedule
  )
  prior_path = path.replace('.md', '.json')
  data = json.loads(open(prior_path).read())
  data['context_free']['slots'] += 1
  with open(prior_path, 'w') as f:
    json.dump(data, f)
  prior = dynamics_parity.read_prior_report(prior_path, schedule)
  with pytest.raises(cli.UserError, match='scored on other held-out records'):
    dynamics_parity.write_report(
        str(tmp_path),
        str(tmp_path / 'again'),
        ['masked_lm'],
        [1, 2],
        schedule,
        prior,
    )


def test_the_committed_reports_runs_give_its_curves():
  path = os.path.join(
      os.path.dirname(__file__),
      '..',
      '..',
      '..',
      'experiments',
      'reports',
      'dynamics_parity_cpu.json',
  )
  report = json.loads(open(path).read())
  prior = dynamics_parity.read_prior_report(path, dynamics_parity.Schedule())
  curves = dynamics_parity.collect(prior.runs)
  assert {
      o: {
          v: {str(step): m for step, m in curve.items()}
          for v, curve in by_variant.items()
      }
      for o, by_variant in curves.items()
  } == report['curves']


@pytest.mark.parametrize(
    'report, message',
    [
        (dict(train_steps=2000, eval_every=500, eval_batches=20), 'no `runs`'),
        (dict(runs={}), 'states no schedule'),
        (
            dict(train_steps=1000, eval_every=500, eval_batches=20, runs={}),
            '--train_steps, --eval_every',
        ),
        (
            dict(
                train_steps=2000,
                eval_every=500,
                eval_batches=20,
                runs={
                    'electra-ours_static-seed2': dict(
                        objective='electra',
                        variant='ours_static',
                        seed=1,
                        curve={},
                    )
                },
            ),
            "run 'electra-ours_static-seed2' is not the curve",
        ),
    ],
)
def test_a_prior_report_that_is_not_one_is_refused(tmp_path, report, message):
  path = tmp_path / 'report.json'
  path.write_text(json.dumps(report))
  with pytest.raises(cli.UserError, match=message):
    dynamics_parity.read_prior_report(str(path), dynamics_parity.Schedule())


def test_a_missing_prior_report_is_refused(tmp_path):
  with pytest.raises(
      cli.UserError, match='^--prior_report: .*missing.json does not exist'
  ):
    dynamics_parity.read_prior_report(
        str(tmp_path / 'missing.json'), dynamics_parity.Schedule()
    )


def test_a_prior_report_that_is_not_json_is_refused_by_flag(tmp_path):
  path = tmp_path / 'report.json'
  path.write_text('{"runs": ')
  with pytest.raises(
      cli.UserError, match='^--prior_report: .*report.json: not valid JSON'
  ):
    dynamics_parity.read_prior_report(str(path), dynamics_parity.Schedule())


# A one-layer model on the fixture's records (vocabulary 120, length 32).
_TINY = (
    'encoder.hidden_size = 16',
    'encoder.embedding_width = 16',
    'encoder.num_layers = 1',
    'encoder.num_attention_heads = 2',
    'encoder.intermediate_size = 32',
    'encoder.max_position_embeddings = 32',
    'pretrain_data.max_seq_length = 32',
    'pretrain_data.train_batch_size = 8',
    'pretrain_data.eval_batch_size = 8',
)


class _Killed(Exception):
  """Stands in for a kill after the run's first evaluation was saved."""


def _train(runs_dir, static_records, variant, bindings=_TINY):
  if not os.path.exists(runs_dir / 'records_static'):
    runs_dir.mkdir(exist_ok=True)
    os.symlink(static_records, runs_dir / 'records_static')
  try:
    dynamics_parity.train_one(
        str(runs_dir),
        'masked_lm',
        variant,
        1,
        dynamics_parity.Schedule(train_steps=6, eval_every=3, eval_batches=1),
        bindings,
    )
  finally:
    gin.clear_config()
  run = runs_dir / dynamics_parity.run_name('masked_lm', variant, 1)
  return json.loads((run / 'curve.json').read_text()), run


@pytest.mark.parametrize(
    'variant',
    # Model Garden's loader resumes by the same skip.
    ['ours_static', 'stock_static'],
)
def test_a_killed_run_resumes_where_it_stopped(
    tmp_path, static_records, monkeypatch, variant
):
  """Resumed at its last evaluation, the run ends where an unbroken one does.

  The masked LM at dropout 0 on static records has no randomness but its
  data order, so a resumption that restarted the weights or the data stream
  (ours', or Model Garden's loader) would change the second evaluation.
  """
  unbroken, _ = _train(tmp_path / 'unbroken', static_records, variant)
  write = dynamics_parity.write_progress

  def write_then_die(state_dir, progress):
    write(state_dir, progress)
    if progress['step'] == 6:  # the curve is written, its checkpoint not
      raise _Killed()

  monkeypatch.setattr(dynamics_parity, 'write_progress', write_then_die)
  with pytest.raises(_Killed):
    _train(tmp_path / 'killed', static_records, variant)
  monkeypatch.setattr(dynamics_parity, 'write_progress', write)
  resumed, run = _train(tmp_path / 'killed', static_records, variant)
  assert resumed['resumed_at'] == [3]
  assert unbroken['resumed_at'] == []
  assert sorted(resumed['curve']) == sorted(unbroken['curve']) == ['3', '6']
  for step in ('3', '6'):
    for name, value in unbroken['curve'][step].items():
      assert resumed['curve'][step][name] == pytest.approx(value, rel=1e-5), (
          step,
          name,
      )
  assert not (run / 'state').exists()


def test_a_state_of_another_model_is_not_resumed(
    tmp_path, static_records, monkeypatch
):
  write = dynamics_parity.write_progress

  def write_then_die(state_dir, progress):
    write(state_dir, progress)
    if progress['step'] == 6:  # after the checkpoint at step 3
      raise _Killed()

  monkeypatch.setattr(dynamics_parity, 'write_progress', write_then_die)
  with pytest.raises(_Killed):
    _train(tmp_path, static_records, 'ours_static')
  monkeypatch.setattr(dynamics_parity, 'write_progress', write)
  with pytest.raises(AssertionError, match='not bound to checkpointed values'):
    _train(
        tmp_path,
        static_records,
        'ours_static',
        _TINY + ('encoder.num_layers = 2',),
    )


def test_replay_shares_by_hand():
  # First epoch a..f; the second moves c, a, b, f, e, d by 2, 1, 1, 2, 0, 2
  # places, and z was not in the first.
  stream = list('abcdef') + list('cabfedz')
  shares = dynamics_parity.replay_shares(stream, epoch=6, batch_size=2)
  assert shares['within_one_batch'] == pytest.approx(3 / 7)
  assert shares['median_batches_moved'] == 1.0  # median of 0,1,1,2,2,2,inf


def test_a_curve_written_past_its_checkpoint_loses_its_later_points(tmp_path):
  """Killed between the curve and the checkpoint: the checkpoint's step wins.

  And a run is not resumed under another schedule.
  """
  schedule = dynamics_parity.Schedule(train_steps=9, eval_every=3)
  state_dir = str(tmp_path / 'state')
  progress = dynamics_parity.resumed_progress(state_dir, schedule, 0)
  assert progress['step'] == 0 and progress['curve'] == {}
  progress.update(step=6, seconds=2.0, curve={'3': {}, '6': {}})
  dynamics_parity.write_progress(state_dir, progress)
  resumed = dynamics_parity.resumed_progress(state_dir, schedule, 3)
  assert resumed['step'] == 3
  assert resumed['seconds'] == 2.0
  assert resumed['curve'] == {'3': {}}
  assert resumed['resumed_at'] == [3]
  with pytest.raises(cli.UserError, match='train_steps.: 9'):
    dynamics_parity.resumed_progress(
        state_dir, dynamics_parity.Schedule(train_steps=12, eval_every=3), 3
    )


def test_jobs_run_main_variants_by_seed_then_diagnostics_by_variant(
    tmp_path,
):
  (tmp_path / 'electra-ours_static-seed1').mkdir()
  (tmp_path / 'electra-ours_static-seed1' / 'curve.json').write_text('{}')
  jobs = dynamics_parity.jobs_left(str(tmp_path), ['electra'], [1, 2])
  assert jobs == [
      ('electra', 'stock_static', 1),
      ('electra', 'ours_dynamic', 1),
      ('electra', 'ours_static', 2),
      ('electra', 'stock_static', 2),
      ('electra', 'ours_dynamic', 2),
      ('electra', 'stock_static_our_shuffle', 1),
      ('electra', 'stock_static_our_shuffle', 2),
      ('electra', 'ours_dynamic_801010', 1),
      ('electra', 'ours_dynamic_801010', 2),
      ('electra', 'ours_static_85015', 1),
      ('electra', 'ours_static_85015', 2),
  ]
  assert dynamics_parity.jobs_left(
      str(tmp_path), ['electra'], [1, 2], ['ours_static', 'ours_dynamic']
  ) == [
      ('electra', 'ours_dynamic', 1),
      ('electra', 'ours_static', 2),
      ('electra', 'ours_dynamic', 2),
  ]


@pytest.mark.parametrize(
    'variant, tied', [('ours_static', True), ('ours_static_word_tied', False)]
)
def test_teams_ties_the_embedding_block_as_model_garden_unless_word_tied(
    tmp_path, static_records, variant, tied
):
  os.symlink(static_records, tmp_path / 'records_static')
  try:
    ours, _ = dynamics_parity.run_params(
        str(tmp_path), 'teams', variant, 1, dynamics_parity.Schedule()
    )
  finally:
    gin.clear_config()
  assert ours.task.model.tie_embeddings
  assert ours.task.model.tie_embedding_block is tied


def test_the_stock_task_shuffles_as_ours_in_its_variant(
    tmp_path, static_records
):
  """The variant gives Model Garden's loader our shuffle buffer, not 100.

  With a buffer of 2 examples, the second epoch puts most sequences back
  within a batch of their first-epoch place, in ours and in the stock task
  given our buffer; Model Garden's default buffer of 100 moves them
  further over the fixture's epoch.
  """
  os.symlink(static_records, tmp_path / 'records_static')
  bindings = (
      *_TINY,
      'pretrain_data.train_batch_size = 2',
      'pretrain_data.shuffle_buffer_size = 2',
  )
  try:
    shares = {
        v: dynamics_parity.epoch_replay(
            str(tmp_path), 'electra', v, batches=10, extra_bindings=bindings
        )
        for v in dynamics_parity.REPLAY_VARIANTS
    }
  finally:
    gin.clear_config()
  assert shares['ours_static']['within_one_batch'] > 0.5
  assert shares['stock_static_our_shuffle']['within_one_batch'] > 0.5
  assert shares['stock_static']['within_one_batch'] < 0.2


@pytest.mark.parametrize(
    'parallel, threads', [(1, '--threads=0'), (2, '--threads=1')]
)
def test_each_run_trains_in_its_own_job_and_a_failure_starts_no_more(
    tmp_path, monkeypatch, parallel, threads
):
  started = []

  def run_module(module, args, **kwargs):
    assert module == 'experiments.investigations.dynamics_parity'
    assert kwargs['log_path'].endswith('train.log')
    started.append(args)
    if len(started) == 2:
      raise commands.CommandError('the second run failed')
    time.sleep(0.5)  # a run takes longer than the failure takes to be seen

  monkeypatch.setattr(commands, 'run_module', run_module)
  with pytest.raises(commands.CommandError, match='second run'):
    dynamics_parity.run_all(
        str(tmp_path),
        ['masked_lm'],
        [1, 2],
        dynamics_parity.Schedule(),
        parallel,
    )
  # Of 6 runs, those started before the failure was seen, no more: with
  # two at once, the one beside it and the one its slot took meanwhile.
  assert 2 <= len(started) <= 1 + parallel
  assert all(threads in args for args in started)
  if parallel == 1:
    assert '--run=masked_lm:ours_static:1' in started[0]
