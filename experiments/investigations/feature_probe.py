r"""Linear probes of a frozen encoder on a GLUE task: pretrained vs random.

  python -m experiments.investigations.feature_probe \
    --init_checkpoint=<export or model_dir> \
    --glue_dir=<GLUE root> [--task=sst2] [--max_train_examples=8000] \
    [--random_seeds=3] [--output_json=...] [--output_markdown=...]

Do the pretrained encoder's frozen features carry more of a task's signal
than the same architecture's at random initialisation (`--random_seeds` of
them)? The last layer's [CLS] vector and mean over real tokens, standardised,
feed scikit-learn's logistic regression (L2 penalty chosen on held-out
training examples), scored on dev. Regression tasks (STS-B) are refused.
"""

from typing import Dict

from absl import flags
import numpy as np
from sklearn import linear_model
import tensorflow as tf
import tf_keras

from experiments import provenance
from official.nlp.tools import tokenization
from official_repro.common import cli
from official_repro.common import json_files
from official_repro.common import markdown
from official_repro.data import glue
from official_repro.metrics import aggregation
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import pretrained

FLAGS = flags.FLAGS

POOLINGS = ('cls', 'mean')
# The probes' L2 penalties, chosen per probe on held-out training examples.
L2_GRID = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)


def pooled_features(
    encoder: tf_keras.Model, features: Dict[str, np.ndarray], batch_size: int
) -> Dict[str, np.ndarray]:
  """{'cls': [N, H], 'mean': [N, H]}: last-layer [CLS] and real-token mean.

  `features` are the encoder's three int inputs, `[N, L]`.
  """
  pooled = {name: [] for name in POOLINGS}
  num_examples = len(features['input_word_ids'])
  for start in range(0, num_examples, batch_size):
    batch = {
        key: tf.constant(features[key][start : start + batch_size])
        for key in ('input_word_ids', 'input_mask', 'input_type_ids')
    }
    sequence = encoder(batch, training=False)['sequence_output'].numpy()
    mask = batch['input_mask'].numpy()[..., None].astype(np.float64)
    pooled['cls'].append(sequence[:, 0].astype(np.float64))
    pooled['mean'].append((sequence * mask).sum(1) / mask.sum(1))
  return {name: np.concatenate(parts) for name, parts in pooled.items()}


def fit_probe(
    inputs: np.ndarray, labels: np.ndarray, l2: float
) -> linear_model.LogisticRegression:
  """Multinomial logistic regression on `[N, D]` inputs, penalty 0.5 l2 |W|^2.

  scikit-learn's C = 1 / (l2 N); two classes fit one v = w_1 - w_0 whose
  penalty at w_1 = -w_0 is 0.25 l2 |v|^2, so C = 2 / (l2 N).
  """
  binary = len(np.unique(labels)) == 2
  return linear_model.LogisticRegression(
      C=(2.0 if binary else 1.0) / (l2 * len(inputs)), tol=1e-10, max_iter=10000
  ).fit(inputs, labels)


def probe_accuracy(
    train_inputs: np.ndarray,
    train_labels: np.ndarray,
    dev_inputs: np.ndarray,
    dev_labels: np.ndarray,
) -> float:
  """Dev accuracy of a probe on standardised features.

  The penalty is chosen from `L2_GRID` on a seeded fifth of the training
  examples (the first wins a tie), then the probe is refit on all.
  """
  mean = train_inputs.mean(axis=0)
  scale = train_inputs.std(axis=0) + 1e-6
  train_inputs = (train_inputs - mean) / scale
  dev_inputs = (dev_inputs - mean) / scale
  order = np.random.default_rng(0).permutation(len(train_inputs))
  held_out, fitted = order[: len(order) // 5], order[len(order) // 5 :]
  best = max(
      L2_GRID,
      key=lambda l2: fit_probe(
          train_inputs[fitted], train_labels[fitted], l2
      ).score(train_inputs[held_out], train_labels[held_out]),
  )
  model = fit_probe(train_inputs, train_labels, best)
  return float(model.score(dev_inputs, dev_labels))


def _features(task, glue_dir, split, tokenizer, max_seq_length, limit, seed):
  """The tokenized features of one split, a seeded sample of `limit`."""
  examples, _ = glue.read_examples(glue_dir, task, split)
  if limit and len(examples) > limit:
    keep = np.random.default_rng(seed).choice(len(examples), limit, False)
    examples = [examples[i] for i in sorted(keep)]
  features, _ = glue.convert_examples_to_features(
      examples, tokenizer, max_seq_length
  )
  return features


def _probe_row(source, name: str, seed, train, dev, batch_size: int):
  """One encoder's accuracy per pooling (seed None: the pretrained one)."""
  tf_keras.utils.set_random_seed(0 if seed is None else seed)
  encoder = encoders.build_encoder(source.config)
  if seed is None:
    pretrained.restore(encoder, source.checkpoint_path)
  train_pooled = pooled_features(encoder, train, batch_size)
  dev_pooled = pooled_features(encoder, dev, batch_size)
  train_labels = train['label_ids'].astype(np.int64)
  dev_labels = dev['label_ids'].astype(np.int64)
  return dict(
      encoder=name,
      **{
          p: probe_accuracy(
              train_pooled[p], train_labels, dev_pooled[p], dev_labels
          )
          for p in POOLINGS
      },
  )


def feature_probe(
    init_checkpoint: str,
    glue_dir: str,
    task: str,
    max_train_examples: int,
    random_seeds: int,
    max_seq_length: int,
    batch_size: int = 256,
) -> Dict[str, object]:
  """Probes the pretrained encoder and `random_seeds` random ones.

  Returns the task, example counts, the `majority` baseline and a row per
  encoder ('pretrained' or 'random seed <s>') with an accuracy per pooling.
  """
  spec = glue.get_task_spec(task)
  if spec.is_regression:
    raise cli.UserError(
        f'--task={task} is a regression task; probe a classification task.'
    )
  source = pretrained.resolve(init_checkpoint)
  tokenizer = tokenization.FullTokenizer(
      source.vocab_file, do_lower_case=source.lower_case
  )
  train, dev = (
      _features(task, glue_dir, split, tokenizer, max_seq_length, limit, 0)
      for split, limit in (
          ('train', max_train_examples),
          (spec.dev_splits[0], 0),
      )
  )
  train_labels = train['label_ids'].astype(np.int64)
  dev_labels = dev['label_ids'].astype(np.int64)
  majority = float((dev_labels == np.bincount(train_labels).argmax()).mean())
  rows = [
      _probe_row(source, name, seed, train, dev, batch_size)
      for name, seed in [('pretrained', None)]
      + [(f'random seed {s}', s) for s in range(random_seeds)]
  ]
  return dict(
      task=task,
      num_train_examples=len(train_labels),
      num_dev_examples=len(dev_labels),
      majority=majority,
      rows=rows,
  )


def format_result(result: Dict[str, object], header: str = '') -> str:
  """A markdown table of the probes' dev accuracies."""
  rows = [
      [row['encoder'], *(f'{row[p]:.3f}' for p in POOLINGS)]
      for row in result['rows']
  ]
  random_rows = [r for r in result['rows'] if r['encoder'] != 'pretrained']
  if len(random_rows) > 1:
    spreads = [
        aggregation.summarize([r[p] for r in random_rows]) for p in POOLINGS
    ]
    rows.append(
        [
            'random, mean ± std',
            *(f'{s["mean"]:.3f} ± {s["std"]:.3f}' for s in spreads),
        ]
    )
  lines = [header, ''] if header else []
  lines += [
      f'Linear probes on {result["task"]}: '
      f'{result["num_train_examples"]} training examples, '
      f'{result["num_dev_examples"]} dev examples, majority class '
      f'{result["majority"]:.3f}.',
      '',
      *markdown.table(['encoder', *(f'{p} accuracy' for p in POOLINGS)], rows),
  ]
  return '\n'.join(lines) + '\n'


def main(_) -> None:
  """Runs the command with the parsed flags (the absl entry point)."""
  result = feature_probe(
      FLAGS.init_checkpoint,
      FLAGS.glue_dir,
      FLAGS.task,
      FLAGS.max_train_examples,
      FLAGS.random_seeds,
      FLAGS.max_seq_length,
  )
  text = format_result(
      result, provenance.provenance('experiments.investigations.feature_probe')
  )
  print(text)
  if FLAGS.output_json:
    json_files.write_json(FLAGS.output_json, result)
  if FLAGS.output_markdown:
    json_files.write_text(FLAGS.output_markdown, text)


def define_flags() -> None:
  """Defines the command's flags."""
  flags.DEFINE_string(
      'init_checkpoint', None, 'Pretrained encoder (export or model_dir).'
  )
  flags.DEFINE_string('glue_dir', None, 'The GLUE root.')
  flags.DEFINE_string('task', 'sst2', 'A GLUE classification task.')
  flags.DEFINE_integer(
      'max_train_examples',
      8000,
      'Seeded sample of the training split (0: all of it).',
      lower_bound=0,
  )
  flags.DEFINE_integer(
      'random_seeds', 3, 'Randomly initialised encoders.', lower_bound=1
  )
  flags.DEFINE_integer(
      'max_seq_length', 64, 'Tokens per example.', lower_bound=3
  )
  flags.DEFINE_string('output_json', None, 'Where to write the results.')
  flags.DEFINE_string('output_markdown', None, 'Where to write the table.')
  cli.require_flags('init_checkpoint', 'glue_dir')


if __name__ == '__main__':
  define_flags()
  cli.run(main)
