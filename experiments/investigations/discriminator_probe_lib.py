"""What a replaced-token detector detects: probes of a pretraining checkpoint.

A held-out AUC says little alone: the detector may miss only plausible
replacements, or score tokens by identity alone. This scores a checkpoint's
detector (ELECTRA's discriminator or SCRIPT's critic) on held-out records under
three replacement sources at the same slots (`generator`, `unigram`,
`uniform`), beside the best identity-only scorer, and the generator's
replacements by band of its probability. `discriminator_probe.py` reports it.
"""

import dataclasses
import os
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from sklearn import metrics
import tensorflow as tf

from official_repro.common import cli
from official_repro.metrics import context_free
from official_repro.modeling.pretrainers import electra
from official_repro.modeling.pretrainers import script
from official_repro.training import reproducibility
from official_repro.training import saved_runs

SOURCES = ('generator', 'unigram', 'uniform')
# Bands of the generator's probability of its sampled token.
PLAUSIBILITY_EDGES = (0.0, 0.01, 0.1, 0.3, 1.0)


@dataclasses.dataclass
class DetectedTokens:
  """The real tokens of the probed batches under one source, flattened.

  Arrays `[n]`: each token's sequence, id, label (1: replaced), detector
  logit and generator probability (NaN but on generator replacements); and
  counts of masked slots and of those whose draw kept the original.
  """

  sequence: np.ndarray
  token_ids: np.ndarray
  labels: np.ndarray
  logits: np.ndarray
  generator_probability: np.ndarray
  masked: int
  unchanged: int


def _flatten(
    first_sequence: int,
    batch: Dict[str, np.ndarray],
    corrupted: np.ndarray,
    labels: np.ndarray,
    logits: np.ndarray,
    replacements: np.ndarray,
    probabilities: Optional[np.ndarray],
) -> DetectedTokens:
  """One batch's real tokens under one source.

  `corrupted`, `labels`, `logits` are `[B, T]`; `replacements` and
  `probabilities` (None for context-free sources) `[B, P]`.
  """
  real = batch['input_mask'] > 0
  weights = batch['masked_lm_weights'] > 0
  on_sequence = np.full(corrupted.shape, np.nan)
  if probabilities is not None:
    rows = np.nonzero(weights)[0]
    on_sequence[rows, batch['masked_lm_positions'][weights]] = probabilities[
        weights
    ]
  return DetectedTokens(
      sequence=(first_sequence + np.nonzero(real)[0]).astype(np.int64),
      token_ids=corrupted[real],
      labels=labels[real],
      logits=logits[real].astype(np.float64),
      generator_probability=np.where(
          labels[real] > 0, on_sequence[real], np.nan
      ),
      masked=int(weights.sum()),
      unchanged=int(
          (replacements[weights] == batch['masked_lm_ids'][weights]).sum()
      ),
  )


def _concatenate(parts: Sequence[DetectedTokens]) -> DetectedTokens:
  """Several batches' tokens as one: arrays joined, counts summed."""
  merged = {}
  for field in dataclasses.fields(DetectedTokens):
    values = [getattr(p, field.name) for p in parts]
    is_array = field.type is np.ndarray
    merged[field.name] = np.concatenate(values) if is_array else sum(values)
  return DetectedTokens(**merged)


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
  """Exact ROC AUC of float `[n]` scores for `[n]` labels (> 0: positive).

  As google-research/electra's `disc_auc` judges the detector; not Model
  Garden's streaming `tf_keras.metrics.AUC`, which approximates it on 200
  thresholds. Ties count one half; NaN when either class is empty.
  """
  positives = np.asarray(labels) > 0
  if positives.all() or not positives.any():
    return float('nan')
  return float(metrics.roc_auc_score(positives, np.asarray(scores, np.float64)))


def identity_auc(
    tokens: DetectedTokens, vocab_size: int
) -> Tuple[float, float]:
  """`(identity_auc, detector_auc)` on the odd sequences.

  Each id scores its smoothed replaced rate in the even sequences.
  """
  fit = tokens.sequence % 2 == 0
  replaced = np.bincount(
      tokens.token_ids[fit], tokens.labels[fit], minlength=vocab_size
  )
  seen = np.bincount(tokens.token_ids[fit], minlength=vocab_size)
  rate = (replaced + 1.0) / (seen + 2.0)
  scored = ~fit
  return (
      auc(tokens.labels[scored], rate[tokens.token_ids[scored]]),
      auc(tokens.labels[scored], tokens.logits[scored]),
  )


def detector_metrics(
    labels: np.ndarray, logits: np.ndarray
) -> Dict[str, float]:
  """AUC, recall, accuracy of `[n]` logits (> 0: replaced) on `[n]` labels."""
  replaced = labels > 0
  said_replaced = logits > 0
  return dict(
      auc=auc(labels, logits),
      recall=float(said_replaced[replaced].mean()),
      accuracy=float((said_replaced == replaced).mean()),
  )


def detection_metrics(
    tokens: DetectedTokens, vocab_size: int
) -> Dict[str, float]:
  """AUC, recall, accuracy and the identity baseline of one source."""
  identity, detector_on_half = identity_auc(tokens, vocab_size)
  return dict(
      tokens=int(tokens.labels.size),
      replaced_share=float((tokens.labels > 0).mean()),
      unchanged_share_of_masked=tokens.unchanged / max(1, tokens.masked),
      **detector_metrics(tokens.labels, tokens.logits),
      identity_auc=identity,
      auc_on_identity_half=detector_on_half,
  )


def plausibility_bands(tokens: DetectedTokens) -> List[Dict[str, float]]:
  """Recall and AUC of the generator's replacements, by its probability."""
  original = tokens.labels == 0
  bands = []
  edges = PLAUSIBILITY_EDGES
  for low, high in zip(edges[:-1], edges[1:]):
    probability = tokens.generator_probability
    upper = probability <= high if high == edges[-1] else probability < high
    band = (tokens.labels > 0) & (probability >= low) & upper
    bands.append(
        dict(
            low=low,
            high=high,
            replaced=int(band.sum()),
            recall=float((tokens.logits[band] > 0).mean())
            if band.any()
            else float('nan'),
            auc=auc(
                np.concatenate([np.ones(band.sum()), np.zeros(original.sum())]),
                np.concatenate([tokens.logits[band], tokens.logits[original]]),
            ),
        )
    )
  return bands


def _context_free_draws(
    counts: np.ndarray, special_ids: Sequence[int], seed: int
) -> Dict[str, Callable[[Tuple[int, ...]], np.ndarray]]:
  """{source: draw(shape)}: int ids by training frequency or uniformly."""
  rng = np.random.default_rng(seed)
  unigram = counts / counts.sum()
  ordinary = np.setdiff1d(np.arange(len(counts)), special_ids)
  return dict(
      unigram=lambda shape: rng.choice(len(unigram), shape, p=unigram),
      uniform=lambda shape: rng.choice(ordinary, shape),
  )


def _checkpoint_prefix(model_dir: str, checkpoint: str) -> str:
  """`checkpoint` (a prefix, file or bare name in `model_dir`) as a prefix.

  One found nowhere is refused by `saved_runs.load`, naming those there are.
  """
  prefix = re.sub(r'\.(index|data-\d+-of-\d+)$', '', checkpoint)
  if not tf.io.gfile.exists(prefix + '.index'):
    prefix = os.path.join(model_dir, os.path.basename(prefix))
  return prefix


def _probed_functions(run: saved_runs.SavedRun):
  """The run's `(generate, detect)`; UserError for a run with neither.

  `generate(batch)`: logits `[B, P, V]` and sampled ids `[B, P]`;
  `detect(batch, replacements)`: corrupted ids, labels and log-odds of
  "replaced", `[B, T]` (SCRIPT's critic: 004 Eq. 4-5).
  """
  model = run.model
  if isinstance(model, electra.ElectraPretrainer):

    def generate(batch):
      logits, _ = model.generator_logits(batch, training=False)
      return logits, model.sample_replacements(logits, batch, training=False)

    def detect(batch, replacements):
      corrupted, labels = model.corrupt(batch, replacements)
      outputs = model.discriminate(corrupted, batch, training=False)
      return corrupted, labels, tf.cast(model.rtd_logits(outputs), tf.float32)

    return generate, detect
  if isinstance(model, script.ScriptPretrainer):

    def generate(batch):
      logits = model.mlm_logits(batch, training=False)
      sampled, _ = model.sample_replacements(logits, training=False)
      return logits, sampled

    def detect(batch, replacements):
      corrupted, labels = electra.ElectraPretrainer.corrupt(batch, replacements)
      log_positive, log_negative = script.critic_log_probabilities(
          model.critic_logits(corrupted, batch, training=False)
      )
      return corrupted, labels, log_negative - log_positive

    return generate, detect
  raise cli.UserError(
      f'--model_dir {run.model_dir}: a {run.objective.name} run has no '
      'replaced-token detector to probe; give an ELECTRA, ALE, TEAMS or '
      'SCRIPT run.'
  )


def _detect(
    dataset: tf.data.Dataset,
    sample: Callable[[Dict[str, tf.Tensor]], Tuple[tf.Tensor, tf.Tensor]],
    detect: Callable[..., Tuple[tf.Tensor, tf.Tensor, tf.Tensor]],
    draws: Dict[str, Callable[[Tuple[int, ...]], np.ndarray]],
) -> Tuple[Dict[str, DetectedTokens], int]:
  """({source: its tokens over every batch}, batches) through the detector."""
  parts = {source: [] for source in SOURCES}
  batches = sequences = 0
  for batch in dataset:
    batches += 1
    numpy_batch = {k: v.numpy() for k, v in batch.items()}
    sampled, probabilities = sample(batch)
    by_source = dict(generator=(sampled.numpy(), probabilities.numpy()))
    shape = numpy_batch['masked_lm_ids'].shape
    for source in SOURCES[1:]:
      by_source[source] = (draws[source](shape).astype(np.int32), None)
    for source, (replacements, probability) in by_source.items():
      corrupted, labels, logits = detect(batch, tf.constant(replacements))
      parts[source].append(
          _flatten(
              sequences,
              numpy_batch,
              corrupted.numpy(),
              labels.numpy(),
              logits.numpy(),
              replacements,
              probability,
          )
      )
    sequences += len(numpy_batch['input_mask'])
  if not batches:
    return {}, 0
  return {source: _concatenate(p) for source, p in parts.items()}, batches


def probe(
    model_dir: str,
    record_dir: Optional[str] = None,
    steps: int = 20,
    checkpoint: Optional[str] = None,
    seed: int = 0,
) -> Dict[str, Any]:
  """Probes a run's detector on `steps` held-out batches (-1: all).

  Returns:
    `checkpoint`, `step`, `steps`, `batches`, `sources` ({source:
    `detection_metrics`}) and `plausibility` (`plausibility_bands`).
  """
  if checkpoint is not None:
    checkpoint = _checkpoint_prefix(model_dir, checkpoint)
  run = saved_runs.load(model_dir, checkpoint)
  generate, detect = _probed_functions(run)
  params, task = saved_runs.pretraining_task(model_dir, record_dir)
  record_dir = params.task.validation_data.input_path
  counts, special_ids = context_free.token_counts(record_dir, 'train')
  draws = _context_free_draws(counts, special_ids, seed)
  tf.random.set_seed(seed)

  @tf.function
  def sample(batch):
    logits, sampled = generate(batch)
    probabilities = tf.nn.softmax(tf.cast(logits, tf.float32))
    return sampled, tf.gather(probabilities, sampled, batch_dims=2)

  detect_step = tf.function(detect)
  dataset = task.build_inputs(params.task.validation_data)
  if steps > 0:
    dataset = dataset.take(steps)
  tokens, batches = _detect(dataset, sample, detect_step, draws)
  if not batches:
    raise cli.UserError(f'{record_dir}: the eval split holds no batch.')
  vocab_size = len(counts)
  return dict(
      model_dir=model_dir,
      records=record_dir,
      checkpoint=run.checkpoint,
      step=reproducibility.checkpoint_step(run.checkpoint),
      steps=steps,
      batches=batches,
      seed=seed,
      sources={
          source: detection_metrics(tokens[source], vocab_size)
          for source in SOURCES
      },
      plausibility=plausibility_bands(tokens['generator']),
  )
