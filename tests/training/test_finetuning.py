"""Fine-tuning end to end on tiny fixtures: every task type, resume, restore."""

import dataclasses
import functools
import json
import os
import random
import signal
import time

import gin
import numpy as np
import pytest
import tensorflow as tf

from official.core import task_factory
from official_repro.common import cli
from official_repro.modeling.heads import first_token
from official_repro.modeling.networks import pretrained
from official_repro.tasks import finetuning_base
from official_repro.tasks import finetuning_registry
from official_repro.tasks import finetuning_schedule
from official_repro.training import finetuning
from official_repro.training import gin_utils
from official_repro.training import preemption
from official_repro.training import trainer as trainer_lib

REPO_ROOT = gin_utils.REPO_ROOT
_WORDS = (
    'the quick brown fox jumps over a lazy dog while birds sing in the '
    'old trees near the river and children play games'
).split()
_TAGS = ('DT', 'JJ', 'NN', 'VBZ', 'IN')


def _sentence(rng, length=6):
  return ' '.join(rng.choice(_WORDS) for _ in range(length))


def _write_glue(root, rng):
  """MRPC (BOM header) and STS-B folders with 12 train and 6 dev rows."""
  mrpc = root / 'MRPC'
  stsb = root / 'STS-B'
  mrpc.mkdir(parents=True)
  stsb.mkdir(parents=True)
  for split, rows in (('train', 12), ('dev', 6)):
    lines = ['\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String']
    lines += [
        f'{i % 2}\t{i}\t{i + 100}\t{_sentence(rng)}\t{_sentence(rng)}'
        for i in range(rows)
    ]
    (mrpc / f'{split}.tsv').write_text('\n'.join(lines) + '\n')
    header = (
        'index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\t'
        'sentence1\tsentence2\tscore'
    )
    lines = [header] + [
        f'{i}\tmain\tf\t2012\t{i}\tnone\tnone\t{_sentence(rng)}\t'
        f'{_sentence(rng)}\t{rng.uniform(0, 5):.3f}'
        for i in range(rows)
    ]
    (stsb / f'{split}.tsv').write_text('\n'.join(lines) + '\n')
  return str(root)


def _write_squad(root, rng, version):
  """`{train,dev}-v<version>.json` with answers taken from the context."""
  root.mkdir(parents=True)
  for split, num_questions in (('train', 8), ('dev', 4)):
    paragraphs = []
    for index in range(num_questions):
      context = _sentence(rng, 30)
      words = context.split()
      start_word = rng.randrange(0, 25)
      answer = ' '.join(words[start_word : start_word + 2])
      answer_start = len(' '.join(words[:start_word])) + (start_word > 0)
      impossible = version == '2.0' and index % 2 == 1
      question = dict(
          id=f'{split}-{index}',
          question=_sentence(rng, 4),
          answers=[]
          if impossible
          else [dict(text=answer, answer_start=answer_start)],
      )
      if version == '2.0':
        question['is_impossible'] = impossible
      paragraphs.append(dict(context=context, qas=[question]))
    data = dict(version=version, data=[dict(title='t', paragraphs=paragraphs)])
    (root / f'{split}-v{version}.json').write_text(json.dumps(data))
  return str(root)


def _write_race(root, rng):
  for split, files in (('train', 3), ('dev', 2)):
    for level in ('middle', 'high'):
      folder = root / split / level
      folder.mkdir(parents=True)
      for index in range(files):
        content = dict(
            id=f'{level}{index}.txt',
            article=_sentence(rng, 20),
            questions=[_sentence(rng, 4), _sentence(rng, 3) + ' _ .'],
            options=[[_sentence(rng, 2) for _ in range(4)] for _ in range(2)],
            answers=[rng.choice('ABCD') for _ in range(2)],
        )
        (folder / f'{index}.txt').write_text(json.dumps(content))
  return str(root)


def _write_pos(root, rng):
  root.mkdir(parents=True)
  for split, sentences in (('train', 10), ('dev', 4)):
    lines = []
    for _ in range(sentences):
      lines += [
          f'{rng.choice(_WORDS)} {rng.choice(_TAGS)}'
          for _ in range(rng.randint(3, 8))
      ]
      lines.append('')
    (root / f'{split}.txt').write_text('\n'.join(lines))
  return str(root)


DATA_WRITERS = {
    'mrpc': _write_glue,
    'stsb': _write_glue,
    'squad11': lambda root, rng: _write_squad(root, rng, '1.1'),
    'squad20': lambda root, rng: _write_squad(root, rng, '2.0'),
    'race': _write_race,
    'pos': _write_pos,
}


def _finetune(
    task,
    encoder,
    data_dir,
    model_dir,
    num_epochs=1,
    num_runs=1,
    seeds=None,
    deterministic=False,
    **task_params,
):
  gin.clear_config()
  try:
    gin_utils.parse_config(
        [], [f'{name} = {value!r}' for name, value in task_params.items()]
    )
    schedule = finetuning_schedule.FinetuningSchedule(
        task=task,
        learning_rate=1e-3,
        train_batch_size=4,
        num_epochs=num_epochs,
        warmup_fraction=0.1,
        layerwise_lr_decay=0.8,
        max_seq_length=64,
    )
    protocol = finetuning_schedule.RunProtocol(
        num_runs=num_runs,
        aggregation='median',
        selection='best',
        deterministic=deterministic,
    )
    return finetuning.run(
        schedule,
        protocol,
        encoder,
        data_dir,
        model_dir,
        tf.distribute.get_strategy(),
        seeds=seeds,
    )
  finally:
    gin.clear_config()


@pytest.mark.parametrize(
    'task, task_params, expected_metrics',
    [
        ('mrpc', {}, {'accuracy', 'f1', 'score'}),
        ('stsb', {}, {'pearson', 'spearman', 'score'}),
        (
            'squad11',
            {'squad.doc_stride': 16, 'squad.max_query_length': 16},
            {'exact_match', 'f1'},
        ),
        pytest.param(
            'squad20',
            {'squad.doc_stride': 16, 'squad.max_query_length': 16},
            {'best_f1', 'best_f1_thresh', 'HasAns_f1', 'NoAns_f1'},
            marks=pytest.mark.slow,
        ),
        ('race', {}, {'accuracy_middle', 'accuracy_high', 'accuracy_all'}),
        ('pos', {}, {'accuracy'}),
        ('pos', {'pos.use_crf': True}, {'accuracy'}),
    ],
)
def test_every_task_type_trains_and_evaluates(
    exported_encoder, tmp_path, task, task_params, expected_metrics
):
  data_dir = DATA_WRITERS[task](tmp_path / 'data', random.Random(0))
  encoder = pretrained.resolve(exported_encoder)
  results = _finetune(
      task, encoder, data_dir, str(tmp_path / 'ft'), **task_params
  )
  (run,) = results['runs']
  assert expected_metrics <= set(run['selected'])
  assert all(np.isfinite(value) for value in run['selected'].values())
  assert run['history'][-1]['step'] == run['train_steps'] > 0
  assert results['score'] == run['score']
  with open(tmp_path / 'ft' / 'results.json') as f:
    assert json.load(f)['task'] == task
  table = (tmp_path / 'ft' / 'results.md').read_text()
  assert f'### {task}: median of 1 runs' in table


def test_finetuning_starts_from_the_pretrained_encoder(
    exported_encoder, tmp_path
):
  """The first evaluation sees the exported weights, not a random encoder."""
  from official_repro.tasks import glue  # pylint: disable=g-import-not-at-top

  data_dir = _write_glue(tmp_path / 'glue', random.Random(1))
  encoder = pretrained.resolve(exported_encoder)
  config = finetuning.build_task_config(
      finetuning_schedule.FinetuningSchedule(
          task='mrpc', learning_rate=1e-3, train_batch_size=4, num_epochs=1
      ),
      finetuning_schedule.RunProtocol(),
      encoder,
      data_dir,
  )
  task = glue.GlueTask(config)
  model = task.build_model()
  task.initialize(model)
  reader = tf.train.load_checkpoint(encoder.checkpoint_path)
  table = reader.get_tensor(
      'encoder/layer_with_weights-0/embeddings/.ATTRIBUTES/VARIABLE_VALUE'
  )
  np.testing.assert_array_equal(
      model.checkpoint_items['encoder'].get_embedding_table().numpy(), table
  )


@pytest.mark.slow
def test_finetuning_learns_a_separable_task(exported_encoder, tmp_path):
  """Labels set by which word fills the first sentence are learnt exactly."""
  mrpc = tmp_path / 'glue' / 'MRPC'
  mrpc.mkdir(parents=True)
  rng = random.Random(3)
  for split, rows in (('train', 48), ('dev', 16)):
    lines = ['Quality\t#1 ID\t#2 ID\t#1 String\t#2 String']
    for i in range(rows):
      label = i % 2
      word = ('fox', 'dog')[label]
      lines.append(
          f'{label}\t{i}\t{i + 100}\t{" ".join([word] * 4)}\t'
          f'{_sentence(rng, 4)}'
      )
    (mrpc / f'{split}.tsv').write_text('\n'.join(lines) + '\n')
  results = _finetune(
      'mrpc',
      pretrained.resolve(exported_encoder),
      str(tmp_path / 'glue'),
      str(tmp_path / 'ft'),
      num_epochs=10,
  )
  history = results['runs'][0]['history']
  # From the 0.02-stddev pooler and classifier the loss sits near ln 2 for
  # a few epochs (as in ELECTRA, whose pooler is not pretrained either).
  assert history[-1]['accuracy'] == 1.0
  assert history[-1]['validation_loss'] < 0.6 < history[0]['validation_loss']


@tf.autograph.experimental.do_not_convert
def _wait_for_the_step_gate():
  """Until the signal's thread has set the gate (eagerly, in a py_function)."""
  deadline = time.monotonic() + 30
  while not preemption.step_gate().numpy():
    assert time.monotonic() < deadline
    time.sleep(0.01)


@pytest.mark.slow
def test_a_seed_stopped_inside_a_loop_resumes_bit_identical(
    exported_encoder, tmp_path, monkeypatch
):
  """SIGTERM at step 5 of 6 (loops of 3): the resumed seed ends identical.

  Fails if the resumed run restarts the data order (each epoch's batches
  come from one seeded shuffle), or draws other dropout masks.
  """
  data_dir = _write_glue(tmp_path / 'glue', random.Random(2))
  encoder = pretrained.resolve(exported_encoder)
  finetune = functools.partial(
      _finetune, 'mrpc', encoder, data_dir, num_epochs=2, deterministic=True
  )
  whole = finetune(str(tmp_path / 'whole'))['runs'][0]
  one_step = trainer_lib.Trainer._one_step  # pylint: disable=protected-access

  def signal_at_step_5(trainer, iterator):
    one_step(trainer, iterator)

    def signal_once(step):
      if int(step) == 5:
        os.kill(os.getpid(), signal.SIGTERM)
        _wait_for_the_step_gate()

    tf.py_function(signal_once, [trainer.global_step], [])

  monkeypatch.setattr(trainer_lib.Trainer, '_one_step', signal_at_step_5)
  with pytest.raises(preemption.TrainingStopped) as stopped:
    finetune(str(tmp_path / 'resumed'))
  assert stopped.value.step == 5
  monkeypatch.undo()
  resumed = finetune(str(tmp_path / 'resumed'))['runs'][0]
  assert resumed['history'] == whole['history']
  weights = [
      tf.train.load_checkpoint(
          tf.train.latest_checkpoint(str(tmp_path / name / 'seed_0'))
      )
      for name in ('whole', 'resumed')
  ]
  names = [
      name
      for name in weights[0].get_variable_to_shape_map()
      if name.startswith('model/')
  ]
  assert names
  for name in names:
    np.testing.assert_array_equal(
        weights[1].get_tensor(name), weights[0].get_tensor(name), name
    )


@pytest.mark.slow
def test_seeds_aggregate_and_resume(exported_encoder, tmp_path):
  data_dir = _write_glue(tmp_path / 'glue', random.Random(2))
  encoder = pretrained.resolve(exported_encoder)
  model_dir = str(tmp_path / 'ft')
  results = _finetune(
      'mrpc', encoder, data_dir, model_dir, num_epochs=2, num_runs=3
  )
  scores = [run['score'] for run in results['runs']]
  assert [run['seed'] for run in results['runs']] == [0, 1, 2]
  assert results['score'] == pytest.approx(float(np.median(scores)))
  assert results['summary']['n'] == 3
  # Two evaluations per run (one per epoch); 'best' picks the higher.
  for run in results['runs']:
    assert [entry['step'] for entry in run['history']] == [3, 6]
    assert run['score'] == max(entry['score'] for entry in run['history'])

  # A finished run is not repeated: its result file is what counts.
  seed_1 = os.path.join(model_dir, 'seed_1', finetuning.RESULT_FILENAME)
  with open(seed_1) as f:
    finished = json.load(f)
  finished['score'] = 123.0
  with open(seed_1, 'w') as f:
    json.dump(finished, f)
  # A run killed after its last checkpoint, before its last evaluation,
  # resumes from the checkpoint and only evaluates.
  seed_2 = os.path.join(model_dir, 'seed_2')
  os.remove(os.path.join(seed_2, finetuning.RESULT_FILENAME))
  history_path = os.path.join(seed_2, finetuning.HISTORY_FILENAME)
  with open(history_path) as f:
    history = json.load(f)
  with open(history_path, 'w') as f:
    json.dump(history[:1], f)
  checkpoint = tf.train.latest_checkpoint(seed_2)

  resumed = _finetune(
      'mrpc', encoder, data_dir, model_dir, num_epochs=2, num_runs=3
  )
  assert resumed['runs'][1]['score'] == 123.0
  assert tf.train.latest_checkpoint(seed_2) == checkpoint
  assert [entry['step'] for entry in resumed['runs'][2]['history']] == [3, 6]
  assert resumed['runs'][2]['history'][1]['score'] == pytest.approx(
      history[1]['score'], abs=1e-6
  )


def test_bad_init_checkpoint(tmp_path):
  with pytest.raises(FileNotFoundError, match='no checkpoint'):
    pretrained.resolve(str(tmp_path))
  with pytest.raises(FileNotFoundError, match='missing.index'):
    pretrained.resolve(str(tmp_path / 'missing'))


@pytest.mark.slow
def test_glue_suite_command(exported_encoder, tmp_path, python_m):
  data_dir = _write_glue(tmp_path / 'glue', random.Random(3))
  model_dir = tmp_path / 'suite'
  overrides = [
      'run_protocol.num_runs = 1',
      'finetuning.num_epochs = 1',
      'finetuning.train_batch_size = 4',
      'finetuning.max_seq_length = 32',
  ]
  command = [
      'experiments.glue_suite',
      '--paper=001_ale',
      f'--init_checkpoint={exported_encoder}',
      f'--glue_dir={data_dir}',
      f'--model_dir={model_dir}',
      '--published_row=ELECTRA_small',
      '--strategy=cpu',
  ] + [f'--gin_param={p}' for p in overrides]
  completed = python_m(command)
  assert completed.returncode == 0, completed.stderr[-3000:]
  output = completed.stdout
  assert '| model | mrpc | stsb | Avg. |' in output
  assert '| 001_ale ELECTRA_small | 0.824 | 0.840 | 0.832 |' in output
  with open(model_dir / 'glue_results.json') as f:
    scores = json.load(f)['scores']
  assert set(scores) == {'mrpc', 'stsb'}
  assert os.path.exists(model_dir / 'mrpc' / 'operative_config.gin')


@pytest.mark.parametrize('task', ['mrpc', 'squad11', 'race', 'pos'])
def test_each_task_feeds_the_segments_its_registry_entry_names(
    exported_encoder, tmp_path, task
):
  data_dir = DATA_WRITERS[task](tmp_path / task, random.Random(0))
  config = finetuning.build_task_config(
      finetuning_schedule.FinetuningSchedule(
          task=task, learning_rate=1e-3, train_batch_size=4, num_epochs=1
      ),
      finetuning_schedule.RunProtocol(),
      pretrained.resolve(exported_encoder),
      data_dir,
  )
  features, _ = task_factory.get_task(config).load_features('train')
  segments = int(np.max(features['input_type_ids'])) + 1
  assert segments == finetuning_registry.get(task).segments


def test_an_encoder_of_one_token_type_is_refused_for_pairs(exported_encoder):
  encoder = pretrained.resolve(exported_encoder)
  one_type = dataclasses.replace(
      encoder, config=encoder.config.replace(type_vocab_size=1)
  )
  for task, refused in (('mrpc', True), ('sst2', False), ('pos', False)):
    schedule = finetuning_schedule.FinetuningSchedule(
        task=task, learning_rate=1e-3, train_batch_size=4, num_epochs=1
    )
    build = functools.partial(
        finetuning.build_task_config,
        schedule,
        finetuning_schedule.RunProtocol(),
        one_type,
        '/data',
    )
    if refused:
      with pytest.raises(ValueError, match='type_vocab_size = 1; fine-tune'):
        build()
    else:
      build()


def test_the_original_update_options_reach_the_optimizer(exported_encoder):
  """`finetuning.adam_bias_correction` and `warmup_times_decay` in the task."""
  encoder = pretrained.resolve(exported_encoder)
  for original in (False, True):
    schedule = finetuning_schedule.FinetuningSchedule(
        task='mrpc',
        learning_rate=1e-4,
        train_batch_size=4,
        num_epochs=1,
        warmup_fraction=0.1,
        adam_bias_correction=not original,
        warmup_times_decay=original,
    )
    config = finetuning.build_task_config(
        schedule, finetuning_schedule.RunProtocol(), encoder, '/no/data'
    )
    task = task_factory.get_task(config)
    task.build_model()
    optimizer = task.create_optimizer(
        finetuning._optimization_config(schedule, 100, 10)  # pylint: disable=protected-access
    )
    rate = optimizer._get_hyper('learning_rate')  # pylint: disable=protected-access
    assert optimizer.bias_correction is not original
    # At step 5 of 10 warmup steps: the original's 0.5 * 1e-4 * (1 - 5/100);
    # Model Garden's ramp 0.5 * 1e-4 * (1 - 10/100).
    expected = 0.5e-4 * (0.95 if original else 0.9)
    assert float(rate(5)) == pytest.approx(expected, rel=1e-5)


def test_the_original_loss_order_and_head_reach_the_task(
    exported_encoder, clean_gin
):
  """`finetuning.summed_loss`, `finetuning.data_order` and `glue.head`."""
  gin.parse_config(["glue.head = 'first_token'"])
  schedule = finetuning_schedule.FinetuningSchedule(
      task='mrpc',
      learning_rate=1e-4,
      train_batch_size=4,
      num_epochs=1,
      summed_loss=True,
      data_order='original',
  )
  config = finetuning.build_task_config(
      schedule,
      finetuning_schedule.RunProtocol(),
      pretrained.resolve(exported_encoder),
      '/no/data',
  )
  assert config.summed_loss and config.data_order == 'original'
  model = task_factory.get_task(config).build_model()
  assert isinstance(model.classifier, first_token.FirstTokenHead)
  gin.parse_config(["glue.head = 'pooler'"])
  with pytest.raises(cli.UserError, match='glue.head must be one of'):
    finetuning.build_task_config(
        schedule,
        finetuning_schedule.RunProtocol(),
        pretrained.resolve(exported_encoder),
        '/no/data',
    )


@pytest.mark.parametrize('replicas', [1, 2])
def test_a_resumed_stream_starts_at_the_batch_its_step_would_take(
    exported_encoder, tmp_path, replicas
):
  """Step k of a run on `replicas` replicas takes batches k*r .. k*r + r-1."""
  data_dir = _write_glue(tmp_path / 'glue', random.Random(2))
  schedule = finetuning_schedule.FinetuningSchedule(
      task='mrpc', learning_rate=1e-4, train_batch_size=2, num_epochs=1
  )
  config = finetuning.build_task_config(
      schedule,
      finetuning_schedule.RunProtocol(),
      pretrained.resolve(exported_encoder),
      data_dir,
  )
  task = task_factory.get_task(config)
  context = tf.distribute.InputContext(
      num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=replicas
  )

  def batches(start_step, count):
    data = finetuning_base.FinetuneDataConfig(
        split='train',
        is_training=True,
        seed=3,
        global_batch_size=2 * replicas,
        start_step=start_step,
    )
    stream = task.build_inputs(data, context).take(count)
    return [features['input_word_ids'].numpy() for features, _ in stream]

  whole = batches(0, 5 * replicas)
  resumed = batches(3, replicas)
  for got, expected in zip(resumed, whole[3 * replicas :]):
    np.testing.assert_array_equal(got, expected)
