"""Linear probes of frozen encoders (investigations/feature_probe.py)."""

import numpy as np
import pytest
from scipy import optimize
from scipy import special
import tensorflow as tf

from experiments.investigations import feature_probe
from official_repro.modeling.networks import encoders

pytestmark = pytest.mark.slow

_WORDS = ['good', 'bad'] + [f'w{i}' for i in range(200)]
_VOCAB = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + _WORDS


def _independent(rng):
  inputs = rng.normal(size=(200, 3))
  noise = rng.normal(size=200)
  return inputs, (inputs @ [1.0, -2.0, 0.5] + noise > 0).astype(int)


def _correlated(rng):
  """60 near-copies of one feature, plus noise: an ill-conditioned design."""
  signal = rng.normal(size=(200, 1))
  inputs = signal + 0.1 * rng.normal(size=(200, 60))
  noise = 0.3 * rng.normal(size=200)
  return inputs, (signal[:, 0] + noise > 0).astype(int)


def _three_classes(rng):
  inputs = rng.normal(size=(200, 3))
  score = inputs @ [1.0, -2.0, 0.5] + rng.normal(size=200)
  return inputs, np.digitize(score, [-1.0, 1.0])


class _ReferenceProbe:
  """The probe's objective minimised by scipy: one weight vector per class.

  Mean negative log-likelihood plus 0.5 * l2 * |W|^2, the biases free, by
  L-BFGS on the exact gradient: the Newton fit the probe used before
  scikit-learn, computed independently of scikit-learn's parametrisation.
  """

  def __init__(self, inputs, labels, l2):
    design = np.concatenate([inputs, np.ones((len(inputs), 1))], axis=1)
    num_classes = labels.max() + 1
    targets = np.eye(num_classes)[labels]
    penalty = np.ones((design.shape[1], 1))
    penalty[-1] = 0.0

    def loss(flat):
      weights = flat.reshape(design.shape[1], num_classes)
      logits = design @ weights
      nll = np.mean(special.logsumexp(logits, axis=1) - logits[targets > 0])
      gradient = design.T @ (special.softmax(logits, axis=1) - targets)
      gradient = gradient / len(labels) + l2 * penalty * weights
      return (
          nll + 0.5 * l2 * np.sum(penalty * weights**2),
          gradient.ravel(),
      )

    fitted = optimize.minimize(
        loss,
        np.zeros(design.shape[1] * num_classes),
        jac=True,
        method='L-BFGS-B',
        options=dict(gtol=1e-12, ftol=1e-15, maxiter=10000),
    )
    self._weights = fitted.x.reshape(design.shape[1], num_classes)

  def predict_proba(self, inputs):
    design = np.concatenate([inputs, np.ones((len(inputs), 1))], axis=1)
    return special.softmax(design @ self._weights, axis=1)

  def score(self, inputs, labels):
    return float((self.predict_proba(inputs).argmax(axis=1) == labels).mean())


_DATASETS = [_independent, _correlated, _three_classes]


@pytest.mark.parametrize('make_data', _DATASETS)
@pytest.mark.parametrize('l2', feature_probe.L2_GRID)
def test_the_probe_is_the_optimum_of_its_objective(make_data, l2):
  """scikit-learn's fit, C mapped from l2, is the objective's minimiser."""
  inputs, labels = make_data(np.random.default_rng(0))
  np.testing.assert_allclose(
      feature_probe.fit_probe(inputs, labels, l2).predict_proba(inputs),
      _ReferenceProbe(inputs, labels, l2).predict_proba(inputs),
      atol=1e-4,
  )


@pytest.mark.parametrize('make_data', _DATASETS)
def test_the_probes_accuracy_is_the_reference_fits(make_data, monkeypatch):
  """The penalty chosen and the dev accuracy, as with the reference fit."""
  inputs, labels = make_data(np.random.default_rng(2))
  split = (inputs[:150], labels[:150], inputs[150:], labels[150:])
  accuracy = feature_probe.probe_accuracy(*split)
  monkeypatch.setattr(feature_probe, 'fit_probe', _ReferenceProbe)
  assert accuracy == pytest.approx(feature_probe.probe_accuracy(*split))


def test_mean_pooling_skips_padding():
  class Echo(tf.Module):
    """An 'encoder' whose sequence output is its word ids, as floats."""

    def __call__(self, inputs, training=False):
      ids = tf.cast(inputs['input_word_ids'], tf.float32)[..., None]
      return {'sequence_output': tf.concat([ids, 2 * ids], axis=-1)}

  features = dict(
      input_word_ids=np.array([[2, 5, 7, 0], [2, 9, 0, 0]], np.int32),
      input_mask=np.array([[1, 1, 1, 0], [1, 1, 0, 0]], np.int32),
      input_type_ids=np.zeros((2, 4), np.int32),
  )
  pooled = feature_probe.pooled_features(Echo(), features, batch_size=1)
  np.testing.assert_allclose(pooled['cls'], [[2, 4], [2, 4]])
  expected = [[14 / 3, 28 / 3], [11 / 2, 11]]
  np.testing.assert_allclose(pooled['mean'], expected)


def _write_glue(glue_dir, rng):
  """SST-2 whose label is whether 'good' (1) or 'bad' (0) occurs."""
  for split, size in (('train', 40), ('dev', 60)):
    rows = ['sentence\tlabel']
    for _ in range(size):
      label = int(rng.integers(2))
      words = list(rng.choice(_WORDS[2:], size=19))
      words.insert(int(rng.integers(20)), 'good' if label else 'bad')
      rows.append(f'{" ".join(words)}\t{label}')
    (glue_dir / 'SST-2').mkdir(exist_ok=True)
    (glue_dir / 'SST-2' / f'{split}.tsv').write_text('\n'.join(rows) + '\n')


def _label_encoder():
  """An encoder whose features are the label and nothing else.

  Its word, position and type embeddings are zero but for the two label
  words (opposite, zero-mean patterns, which the embedding layer
  normalisation keeps), so its mean-pooled features take one value per
  label. A random encoder's mix the label word with 19 random ones.
  """
  config = encoders.EncoderConfig(
      backbone='bert',
      hidden_size=16,
      num_layers=1,
      num_attention_heads=2,
      intermediate_size=32,
      vocab_size=len(_VOCAB),
      max_position_embeddings=24,
  )
  encoder = encoders.build_encoder(config)
  for variable in encoder.trainable_variables:
    if 'position_embedding' in variable.name or 'type_embed' in variable.name:
      variable.assign(tf.zeros_like(variable))
  table = encoder.get_embedding_table()
  values = np.zeros(table.shape, np.float32)
  pattern = np.resize([1.0, -1.0], table.shape[1])
  values[_VOCAB.index('good')] = pattern
  values[_VOCAB.index('bad')] = -pattern
  table.assign(values)
  return encoder, config


@pytest.fixture(scope='module')
def probed(tmp_path_factory, export_encoder_with_vocab):
  glue_dir = tmp_path_factory.mktemp('glue')
  _write_glue(glue_dir, np.random.default_rng(0))
  model_dir = export_encoder_with_vocab(
      str(tmp_path_factory.mktemp('model')), *_label_encoder(), _VOCAB, 1
  )
  return feature_probe.feature_probe(
      model_dir,
      str(glue_dir),
      'sst2',
      max_train_examples=30,
      random_seeds=2,
      max_seq_length=24,
  )


def test_the_pretrained_weights_are_the_ones_probed(probed):
  assert probed['num_train_examples'] == 30
  assert probed['num_dev_examples'] == 60
  rows = {row['encoder']: row for row in probed['rows']}
  assert list(rows) == ['pretrained', 'random seed 0', 'random seed 1']
  # Only the restored encoder's features are the label itself.
  assert rows['pretrained'] == dict(encoder='pretrained', cls=1.0, mean=1.0)
  for name in ('random seed 0', 'random seed 1'):
    assert max(rows[name]['cls'], rows[name]['mean']) < 0.9
  assert rows['random seed 0'] != rows['random seed 1']


def test_table_has_every_encoder_and_the_random_spread(probed):
  text = feature_probe.format_result(probed)
  assert '| pretrained | ' in text
  assert '| random, mean ± std | ' in text
  assert f'majority class {probed["majority"]:.3f}' in text


def test_cli_refuses_a_regression_task(
    tmp_path, export_encoder_with_vocab, python_m
):
  model_dir = export_encoder_with_vocab(
      str(tmp_path), *_label_encoder(), _VOCAB, 1
  )
  completed = python_m(
      [
          'experiments.investigations.feature_probe',
          f'--init_checkpoint={model_dir}',
          f'--glue_dir={tmp_path}',
          '--task=stsb',
      ]
  )
  assert completed.returncode == 2
  lines = completed.stderr.strip().splitlines()
  assert lines[-1] == (
      'experiments.investigations.feature_probe: error: --task=stsb is a '
      'regression task; probe a classification task.'
  )
