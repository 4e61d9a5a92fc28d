r"""Pseudo-log-likelihoods of sentences from a SCRIPT run or a masked LM.

  python -m official_repro.score --init_checkpoint=<pretraining model_dir> \
      --input=sentences.txt [--method=script|mlm|both] [--batch_size=32] \
      [--output=scores.tsv]

`script` is 004 Eq. 7, sum_t log p(t+ | x), in one pass (SCRIPT runs only);
`mlm` the masked-LM PLL of Salazar et al. (2020), one pass per token; `both`
the two with their time ratio (natural log, [CLS]/[SEP] excluded, timed after
a warm-up batch). A SCRIPT run is restored from its `ckpt-<step>`, which has
the MLM head its export lacks. `PllScorer` is a `lm_scores.Scorer`.
"""

import dataclasses
import os
import time
from typing import Dict, List, Optional, Sequence, Tuple

from absl import flags
import numpy as np
import tensorflow as tf

from official_repro.common import cli
from official_repro.common import json_files
from official_repro.common import progress
from official_repro.data import text_files
from official_repro.data import vocab
from official_repro.modeling.interchange import converted
from official_repro.modeling.networks import pretrained
from official_repro.modeling.pretrainers import script
from official_repro.tasks import script as script_task
from official_repro.training import experiment
from official_repro.training import saved_runs

FLAGS = flags.FLAGS
METHODS = ('script', 'mlm')


def _checkpoint_and_model_dir(init_checkpoint: str) -> Tuple[str, str]:
  """`(training checkpoint prefix, model_dir)` of `--init_checkpoint`."""
  if tf.io.gfile.isdir(init_checkpoint):
    checkpoint_path = tf.train.latest_checkpoint(init_checkpoint)
    if checkpoint_path is None:
      raise FileNotFoundError(
          f'--init_checkpoint {init_checkpoint}: no training checkpoint '
          '(ckpt-<step>) in it; expected the model_dir of a SCRIPT '
          'pretraining run.'
      )
    return checkpoint_path, init_checkpoint
  if not tf.io.gfile.exists(init_checkpoint + '.index'):
    raise FileNotFoundError(
        f'--init_checkpoint {init_checkpoint}: neither a directory nor a '
        f'checkpoint prefix ({init_checkpoint}.index does not exist).'
    )
  return init_checkpoint, os.path.dirname(init_checkpoint)


def _masked_lm_export(
    export_dir: str, given: str
) -> Tuple[script.ScriptPretrainer, pretrained.PretrainedEncoder]:
  """A converted masked LM as a SCRIPT model (encoder + `MaskedLM` head)."""
  heads_dir = os.path.join(export_dir, converted.HEADS_SUBDIR)
  heads_file = os.path.join(heads_dir, converted.HEADS_FILENAME)
  heads = json_files.read_json(heads_file, default={})
  if 'mlm' not in heads:
    held = f'only {", ".join(heads)}' if heads else 'no task head'
    raise cli.UserError(
        f'--init_checkpoint {given} has no masked-LM head (its encoder comes '
        f'with {held}); score and rescore need one: a masked LM saved with '
        'its head (a Hugging Face *ForMaskedLM folder, an original '
        'checkpoint with cls/predictions) or a SCRIPT run.'
    )
  encoder = pretrained.resolve(export_dir)
  model = script.ScriptPretrainer(
      encoder.config, mlm_activation=heads['mlm']['activation']
  )
  ids = tf.constant([[1, 2]], tf.int32)  # Creates the variables.
  model.token_logits(ids, tf.ones_like(ids), tf.zeros_like(ids))
  status = tf.train.Checkpoint(
      encoder=model.encoder, mlm_head=model.masked_lm
  ).read(os.path.join(heads_dir, converted.HEADS_PREFIX))
  status.assert_existing_objects_matched()
  status.expect_partial()
  return model, encoder


def load_model(
    init_checkpoint: str,
) -> Tuple[script.ScriptPretrainer, pretrained.PretrainedEncoder, bool]:
  """`(model, exported encoder, is its own critic)` of a run or masked LM."""
  if converted.detect(init_checkpoint):
    export_dir = converted.cached_export(converted.Source(init_checkpoint))
    return (*_masked_lm_export(export_dir, init_checkpoint), False)
  heads = os.path.join(converted.HEADS_SUBDIR, converted.HEADS_FILENAME)
  names = (heads, converted.CONVERSION_FILENAME)
  if any(tf.io.gfile.exists(os.path.join(init_checkpoint, n)) for n in names):
    return (*_masked_lm_export(init_checkpoint, init_checkpoint), False)
  checkpoint_path, model_dir = _checkpoint_and_model_dir(init_checkpoint)
  if not saved_runs.is_pretraining_run(model_dir):
    raise FileNotFoundError(
        f'--init_checkpoint: {model_dir} holds no config.gin and '
        f'{experiment.MODEL_CONFIG_FILENAME}; expected the model_dir of a '
        'pretraining run.'
    )
  # Refused before building: another objective's model warns as it builds.
  path = os.path.join(model_dir, experiment.MODEL_CONFIG_FILENAME)
  saved = json_files.read_json(path)
  fields = {f.name for f in dataclasses.fields(script_task.ScriptModelConfig)}
  unknown = sorted(set(saved) - fields)
  if unknown or 'encoder' not in saved:
    raise cli.UserError(
        f'{path} holds no SCRIPT model (fields {unknown} are not '
        'script.*); --init_checkpoint must be a run with experiment.objective '
        "= 'script'."
    )
  run = saved_runs.load(model_dir, checkpoint_path)
  return run.model, pretrained.resolve(model_dir), True


class PllScorer:
  """Pseudo-log-likelihoods of a SCRIPT model (a `lm_scores.Scorer`)."""

  def __init__(
      self,
      model: script.ScriptPretrainer,
      vocab_tokens: Sequence[str],
      lower_case: bool,
      method: str = 'script',
      batch_size: int = 32,
  ):
    """Wraps a restored model; `batch_size` sentences or masked copies."""
    if method not in METHODS:
      raise cli.UserError(f'--method must be one of {METHODS}, got {method!r}.')
    if batch_size < 1:
      raise cli.UserError(f'--batch_size must be >= 1, got {batch_size}.')
    self._model = model
    self._tokens = vocab.as_vocabulary(vocab_tokens)
    self._lower_case = lower_case
    self._special = vocab.SpecialTokenIds.from_vocab(self._tokens)
    encoder_config = model.get_config()['encoder_config']
    self._max_length = encoder_config['max_position_embeddings']
    self.method = method
    self.batch_size = batch_size
    # One trace for every batch shape.
    ids_spec = tf.TensorSpec([None, None], tf.int32)
    self._script_pll = tf.function(
        model.pseudo_log_likelihood, input_signature=[ids_spec] * 4
    )
    masked_signature = [ids_spec, ids_spec, tf.TensorSpec([None, 1], tf.int32)]
    self._masked_log_probability = tf.function(
        self._masked_token_log_probability,
        input_signature=[*masked_signature, tf.TensorSpec([None], tf.int32)],
    )

  @classmethod
  def from_checkpoint(
      cls,
      init_checkpoint: str,
      method: Optional[str] = None,
      batch_size: int = 32,
  ) -> 'PllScorer':
    """The scorer of a SCRIPT run ('script') or masked LM ('mlm') by default."""
    model, encoder, critic = load_model(init_checkpoint)
    method = check_method(method, critic, init_checkpoint)
    tokens = vocab.load_vocab(encoder.vocab_file)
    return cls(model, tokens, encoder.lower_case, method, batch_size)

  def __call__(
      self, sentences: Sequence[str], progress_label: str = ''
  ) -> np.ndarray:
    """float64 `[len(sentences)]` PLLs by `self.method` (natural log)."""
    token_ids = vocab.tokenize_with_vocab(
        list(sentences), self._tokens, self._lower_case
    )
    for index, ids in enumerate(token_ids):
      if len(ids) + 2 > self._max_length:
        raise cli.UserError(
            f'Sentence {index} ({sentences[index][:50]!r}...) has '
            f'{len(ids)} tokens; the model takes at most '
            f'{self._max_length - 2} besides [CLS] and [SEP].'
        )
    if self.method == 'script':
      return self._script_scores(token_ids, progress_label)
    return self._mlm_scores(token_ids, progress_label)

  def _pad(self, token_ids: Sequence[List[int]]) -> Tuple[np.ndarray, ...]:
    """int32 `[B, T]` padded ids, their mask, and 1 on the scored tokens."""
    length = max(len(ids) for ids in token_ids) + 2
    word_ids = np.full((len(token_ids), length), self._special.pad, np.int32)
    input_mask = np.zeros_like(word_ids)
    scored = np.zeros_like(word_ids)
    for row, ids in enumerate(token_ids):
      special = self._special
      word_ids[row, : len(ids) + 2] = [special.cls, *ids, special.sep]
      input_mask[row, : len(ids) + 2] = 1
      scored[row, 1 : len(ids) + 1] = 1
    return word_ids, input_mask, scored

  def _script_scores(
      self, token_ids: Sequence[List[int]], progress_label: str
  ) -> np.ndarray:
    reporter = progress.Progress(len(token_ids), progress_label, 'sentences')
    scores = []
    for start in range(0, len(token_ids), self.batch_size):
      word_ids, input_mask, scored = self._pad(
          token_ids[start : start + self.batch_size]
      )
      type_ids = np.zeros_like(word_ids)
      pll = self._script_pll(word_ids, input_mask, type_ids, scored)
      scores.append(pll.numpy())
      reporter.advance(len(scores[-1]))
    return np.concatenate(scores).astype(np.float64) if scores else np.zeros(0)

  def _masked_token_log_probability(
      self,
      word_ids: tf.Tensor,
      input_mask: tf.Tensor,
      positions: tf.Tensor,
      original_ids: tf.Tensor,
  ) -> tf.Tensor:
    """float32 `[N]` log softmax(s_t)[x_t]; `[N, T]` ids masked at `[N, 1]`."""
    logits = self._model.token_logits(
        word_ids, input_mask, tf.zeros_like(word_ids), positions, training=False
    )[:, 0]
    log_probabilities = tf.nn.log_softmax(tf.cast(logits, tf.float32))
    return tf.gather(log_probabilities, original_ids, batch_dims=1)

  def _mlm_scores(
      self, token_ids: Sequence[List[int]], progress_label: str
  ) -> np.ndarray:
    scores = np.zeros([len(token_ids)], np.float64)
    # One masked copy per (sentence, token), in sentence order.
    copies = [
        (sentence, position)
        for sentence, ids in enumerate(token_ids)
        for position in range(1, len(ids) + 1)
    ]
    reporter = progress.Progress(len(copies), progress_label, 'masked tokens')
    for start in range(0, len(copies), self.batch_size):
      chunk = copies[start : start + self.batch_size]
      sentences = [sentence for sentence, _ in chunk]
      word_ids, input_mask, _ = self._pad([token_ids[s] for s in sentences])
      rows = np.arange(len(chunk))
      positions = np.array([position for _, position in chunk], np.int32)
      original = word_ids[rows, positions].copy()
      word_ids[rows, positions] = self._special.mask
      values = self._masked_log_probability(
          word_ids, input_mask, positions[:, None], original
      ).numpy()
      np.add.at(scores, sentences, values)
      reporter.advance(len(chunk))
    return scores


def read_sentences(path: str) -> List[str]:
  """The non-blank lines of `path`, stripped (UserError if there are none)."""
  lines = text_files.read_lines(path, '--input')
  sentences = [line.strip() for line in lines if line.strip()]
  if not sentences:
    raise cli.UserError(f'--input {path} holds no sentence (one per line).')
  return sentences


def timed_scores(
    scorer: PllScorer, sentences: Sequence[str]
) -> Tuple[np.ndarray, float]:
  """The scores of `sentences` and their seconds, after a warm-up batch."""
  scorer(sentences[: scorer.batch_size])
  start = time.perf_counter()
  scores = scorer(sentences, progress_label=f'{scorer.method} PLL')
  return scores, time.perf_counter() - start


def check_method(
    method: Optional[str], critic: bool, init_checkpoint: str
) -> str:
  """The method to score with; 'script' needs a model trained as critic."""
  if method is None:
    return 'script' if critic else 'mlm'
  if method == 'script' and not critic:
    raise cli.UserError(
        f'--method=script: {init_checkpoint} is a masked LM that was not '
        "trained as its own critic (004 Eq. 7 needs SCRIPT's training); "
        'use --method=mlm.'
    )
  return method


def score_file(
    init_checkpoint: str,
    input_path: str,
    methods: Sequence[Optional[str]],
    batch_size: int = 32,
) -> Tuple[List[str], Dict[str, np.ndarray], Dict[str, float]]:
  """`(sentences, scores by method, seconds by method)` of `input_path`."""
  sentences = read_sentences(input_path)
  model, encoder, critic = load_model(init_checkpoint)
  methods = [check_method(m, critic, init_checkpoint) for m in methods]
  tokens = vocab.load_vocab(encoder.vocab_file)
  scores, seconds = {}, {}
  for method in methods:
    scorer = PllScorer(model, tokens, encoder.lower_case, method, batch_size)
    scores[method], seconds[method] = timed_scores(scorer, sentences)
  return sentences, scores, seconds


def format_lines(
    sentences: Sequence[str], scores: Dict[str, np.ndarray]
) -> List[str]:
  """`score<TAB>...<TAB>sentence` per sentence, methods in `scores` order."""
  return [
      '\t'.join([*(f'{scores[m][i]:.6f}' for m in scores), sentence])
      for i, sentence in enumerate(sentences)
  ]


def define_flags():
  """Defines the command-line flags."""
  flags.DEFINE_string(
      'init_checkpoint',
      None,
      'The model_dir of a SCRIPT pretraining run (or one ckpt-<step> '
      'prefix in it), or a masked LM with its MLM head: a release '
      '(Hugging Face folder, TF1 checkpoint) or its conversion.',
  )
  flags.DEFINE_string('input', None, 'Sentences to score, one per line.')
  flags.DEFINE_enum(
      'method',
      None,
      [*METHODS, 'both'],
      'default: script for a SCRIPT run, mlm for a masked LM. '
      'script: 004 Eq. 7 in one pass; mlm: masked-LM PLL, one '
      'pass per token; both: the two, with their time ratio.',
  )
  flags.DEFINE_integer(
      'batch_size',
      32,
      'Sentences (script) or masked copies (mlm) per pass.',
      lower_bound=1,
  )
  flags.DEFINE_string(
      'output', '', 'Write score<TAB>sentence lines here (default: stdout).'
  )
  cli.require_flags('init_checkpoint', 'input')


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  if FLAGS.output:
    json_files.check_writable(FLAGS.output, '--output')
  method = FLAGS.method
  methods = METHODS if method == 'both' else (method,)
  sentences, scores, seconds = score_file(
      FLAGS.init_checkpoint, FLAGS.input, methods, FLAGS.batch_size
  )
  lines = format_lines(sentences, scores)
  if FLAGS.output:
    json_files.write_text(FLAGS.output, '\n'.join(lines) + '\n')
  else:
    print('\n'.join(lines))
  for method in scores:
    print(
        f'{method}: {len(sentences)} sentences in {seconds[method]:.3f} s '
        f'({1e3 * seconds[method] / len(sentences):.2f} ms per sentence)'
    )
  if len(scores) == 2:
    print(f'time ratio mlm / script: {seconds["mlm"] / seconds["script"]:.2f}')


if __name__ == '__main__':
  define_flags()
  cli.run(main)
