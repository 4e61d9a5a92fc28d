"""GLUE fine-tuning under the original's options, against a plain loop.

google-research/electra's fine-tuning (`run_finetuning.py`,
`finetune/classification/classification_tasks.py`, `model/optimization.py`):
logits = dense(sequence_output[:, 0]) after dropout; loss = sum over the
batch of the per-example cross-entropy; gradients clipped to global norm 1;
`AdamWeightDecayOptimizer` without bias correction at rate
lr * (1 - t/T) * min(1, t/W) * 0.8 ** (L + 2 - depth), weight decay on all
but LayerNorm and biases. `_original_steps` is that loop, written here from
those lines on an encoder with dropout off; ours is `GlueTask.train_step`.
"""

import re

import numpy as np
import pytest
import tensorflow as tf

from official.modeling import optimization
from official_repro.modeling.networks import encoders
from official_repro.optimization import optimizer_config
from official_repro.tasks import finetuning_base
from official_repro.tasks import glue

_VOCAB = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
_VOCAB += ['a', 'cat', 'sat', 'dog', 'ran', 'the', 'mat']
_LR, _STEPS, _WARMUP, _WD, _DECAY, _LAYERS = 1e-3, 6, 2, 0.01, 0.8, 2
_B1, _B2, _EPS = 0.9, 0.999, 1e-6
_ORIGINAL = dict(
    head='first_token',
    summed_loss=True,
    adam_bias_correction=False,
    warmup_times_decay=True,
)


def _mrpc_dir(tmp_path, rows=8):
  words = _VOCAB[5:]  # Row i's sentences spell i in base 7: all distinct.
  folder = tmp_path / 'MRPC'
  folder.mkdir(parents=True)
  lines = ['Quality\t#1 ID\t#2 ID\t#1 String\t#2 String']
  for i in range(rows):
    digits = [words[(i // 7**d) % 7] for d in range(8)]
    first, second = ' '.join(digits[:4]), ' '.join(digits[4:])
    lines.append(f'{i % 2}\t{i}\t{i}\t{first}\t{second}')
  for split in ('train', 'dev'):
    (folder / f'{split}.tsv').write_text('\n'.join(lines) + '\n')
  vocab = tmp_path / 'vocab.txt'
  vocab.write_text('\n'.join(_VOCAB) + '\n')
  return str(tmp_path), str(vocab)


def _encoder_config():
  return encoders.validate(
      encoders.EncoderConfig(
          backbone='bert',
          hidden_size=8,
          num_layers=_LAYERS,
          num_attention_heads=2,
          intermediate_size=16,
          vocab_size=len(_VOCAB),
          max_position_embeddings=16,
          dropout_rate=0.0,
          attention_dropout_rate=0.0,
      )
  )


def _task(tmp_path, rows=8, **options):
  data_dir, vocab = _mrpc_dir(tmp_path, rows)
  config = glue.GlueTaskConfig(
      task='mrpc',
      data_dir=data_dir,
      vocab_file=vocab,
      max_seq_length=16,
      encoder=_encoder_config(),
      head_dropout_rate=0.0,
      learning_rate=_LR,
      layerwise_lr_decay=_DECAY,
      weight_decay_rate=_WD,
      gradient_clip_norm=1.0,
      **options,
  )
  return glue.GlueTask(config)


def _batch(task):
  arrays, _ = task.load_features('train')
  features = {
      key: tf.constant(arrays[key])
      for key in ('input_word_ids', 'input_mask', 'input_type_ids')
  }
  return features, {'label_ids': tf.constant(arrays['label_ids'])}


def _ours(task, initial):
  """Our weights after `_STEPS` of `task.train_step`, by variable name."""
  model = task.build_model()
  for variable in model.trainable_variables:
    variable.assign(initial[variable.name])
  optimizer = task.create_optimizer(
      optimization.OptimizationConfig(
          {
              'optimizer': {'type': 'adamw'},
              **optimizer_config.learning_rate_config(_STEPS, _LR, _WARMUP),
          }
      )
  )
  batch = _batch(task)
  for _ in range(_STEPS):
    task.train_step(batch, model, optimizer)
  return {v.name: v.numpy() for v in model.trainable_variables}


def _depth(name):
  """ELECTRA's depth: embeddings 0, layer k at k + 1, the rest L + 2."""
  layer = re.match(r'transformer/layer_(\d+)/', name)
  if layer:
    return int(layer.group(1)) + 1
  if re.match(r'(word|position|type)_embeddings?/|embeddings/', name):
    return 0
  return _LAYERS + 2


def _original_steps(task, initial):
  """The original's loop: the weights, each step's grad norm, what trained."""
  encoder = encoders.build_encoder(task.task_config.encoder)
  params = {name: value.astype(np.float64) for name, value in initial.items()}
  head = tuple(f'sentence_prediction/logits/{v}:0' for v in ('kernel', 'bias'))
  names = [v.name for v in encoder.trainable_variables] + list(head)
  m = {name: np.zeros_like(params[name]) for name in names}
  v = {name: np.zeros_like(params[name]) for name in names}
  features, labels = _batch(task)
  norms = []
  for step in range(_STEPS):
    for variable in encoder.trainable_variables:
      variable.assign(params[variable.name].astype(np.float32))
    kernel, bias = (tf.constant(params[n], tf.float32) for n in head)
    with tf.GradientTape() as tape:
      tape.watch([kernel, bias])
      sequence = encoder(features)['sequence_output']
      logits = tf.matmul(sequence[:, 0], kernel) + bias
      loss = tf.reduce_sum(
          tf.nn.sparse_softmax_cross_entropy_with_logits(
              labels['label_ids'], logits
          )
      )
    sources = encoder.trainable_variables + [kernel, bias]
    # The original has no pooler (no gradient); the embeddings' sparse
    # gradient is dense in the original's `m` and `v`.
    grads = {
        name: tf.convert_to_tensor(g).numpy().astype(np.float64)
        for name, g in zip(names, tape.gradient(loss, sources))
        if g is not None
    }
    norm = np.sqrt(sum(np.sum(g**2) for g in grads.values()))
    norms.append(norm)
    rate = _LR * (1 - step / _STEPS) * min(1.0, step / _WARMUP)
    for name, grad in grads.items():
      grad = grad / max(norm, 1.0)
      m[name] = _B1 * m[name] + (1 - _B1) * grad
      v[name] = _B2 * v[name] + (1 - _B2) * grad**2
      update = m[name] / (np.sqrt(v[name]) + _EPS)
      if not any(p in name for p in ('LayerNorm', 'layer_norm', 'bias')):
        update = update + _WD * params[name]
      multiplier = _DECAY ** (_LAYERS + 2 - _depth(name))
      params[name] = params[name] - rate * multiplier * update
  return params, norms, sorted(grads)


def _initial(tmp_path):
  tf.random.set_seed(3)
  model = _task(tmp_path / 'init', **_ORIGINAL).build_model()
  return {v.name: v.numpy() for v in model.trainable_variables}


def _max_difference(ours, expected):
  return max(np.abs(ours[name] - expected[name]).max() for name in expected)


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
  """The initial weights and the original loop's (weights, norms, trained)."""
  root = tmp_path_factory.mktemp('original')
  initial = _initial(root)
  return initial, _original_steps(_task(root / 'ref', **_ORIGINAL), initial)


def test_the_original_recipe_equals_a_plain_recomputation(tmp_path, reference):
  initial, (expected, norms, trained) = reference
  assert min(norms) > 1.0  # Clipping acts on every step.
  assert len(trained) == len(initial) - 2  # All but the unused pooler.
  for name in trained:
    if name.endswith('key/bias:0'):
      continue  # Softmax ignores a bias shared by all keys: no gradient.
    assert np.abs(expected[name] - initial[name]).max() > 1e-5, name
  ours = _ours(_task(tmp_path, **_ORIGINAL), initial)
  assert _max_difference(ours, expected) < 1e-6


@pytest.mark.parametrize(
    'mutation',
    [
        dict(summed_loss=False),
        dict(adam_bias_correction=True),
        dict(warmup_times_decay=False),
    ],
    ids=['mean_loss', 'bias_correction', 'warmup_ramp'],
)
def test_each_departure_from_the_original_is_detected(
    tmp_path, reference, mutation
):
  initial, (expected, _, _) = reference
  ours = _ours(_task(tmp_path, **{**_ORIGINAL, **mutation}), initial)
  assert _max_difference(ours, expected) > 1e-4


def _epoch_drift(task, rows):
  """Mean |(second position - first position) - rows| of each example."""
  dataset = task.build_inputs(
      finetuning_base.FinetuneDataConfig(
          is_training=True, global_batch_size=1, seed=5
      )
  )
  positions = {}
  for position, (features, _) in enumerate(dataset.take(3 * rows)):
    key = features['input_word_ids'].numpy().tobytes()
    positions.setdefault(key, []).append(position)
  assert len(positions) == rows  # Every example drawn, none lost.
  return np.mean([abs(p[1] - p[0] - rows) for p in positions.values()])


def test_the_original_order_keeps_one_permutation_through_a_small_buffer(
    tmp_path,
):
  """Once shuffled, a 100-example buffer moves each example little per epoch.

  The original permutes once and then draws through a 100-example buffer, so
  an example's place in the second epoch is about its place in the first; a
  full reshuffle per epoch moves it by a third of the epoch on average.
  """
  rows = 1000
  original = _task(tmp_path / 'original', rows, data_order='original')
  reshuffle = _task(tmp_path / 'reshuffle', rows)
  assert _epoch_drift(original, rows) < 150
  assert _epoch_drift(reshuffle, rows) > 250


# Each head's logits from the first token's output `x`, by variable name.
def _encoder_pooler(x, w):
  pooled = np.tanh(
      x @ w['pooler_transform/kernel:0'] + w['pooler_transform/bias:0']
  )
  return (
      pooled @ w['sentence_prediction/logits/kernel:0']
      + w['sentence_prediction/logits/bias:0']
  )


def _head_pooler(x, w):
  inner = np.tanh(
      x @ w['sentence_prediction/pooler_dense/kernel:0']
      + w['sentence_prediction/pooler_dense/bias:0']
  )
  return (
      inner @ w['sentence_prediction/logits/kernel:0']
      + w['sentence_prediction/logits/bias:0']
  )


def _first_token(x, w):
  return (
      x @ w['sentence_prediction/logits/kernel:0']
      + w['sentence_prediction/logits/bias:0']
  )


@pytest.mark.parametrize(
    'head, logits_of',
    [
        ('encoder_pooler', _encoder_pooler),
        ('head_pooler', _head_pooler),
        ('first_token', _first_token),
    ],
)
def test_each_head_computes_its_logits(tmp_path, head, logits_of):
  task = _task(tmp_path, head=head)
  model = task.build_model()
  features, _ = _batch(task)
  weights = {v.name: v.numpy() for v in model.trainable_variables}
  encoder = encoders.build_encoder(task.task_config.encoder)
  encoder(features)
  for variable in encoder.trainable_variables:
    variable.assign(weights[variable.name])
  first = encoder(features)['sequence_output'][:, 0].numpy()
  np.testing.assert_allclose(
      model(features, training=False).numpy(),
      logits_of(first, weights),
      rtol=1e-5,
      atol=1e-5,
  )
