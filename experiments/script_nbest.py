r"""SCRIPT's one-pass pseudo-log-likelihood on synthetic N-best lists.

  python -m experiments.script_nbest \
    --corpus=/data/corpus/gutenberg --vocab_file=/data/bert_uncased_vocab.txt \
    --sentences=/data/corpus/wikitext-2.valid.tokens.txt \
    --work_dir=/tmp/script_nbest --train_steps=500
  python -m experiments.script_nbest --init_checkpoint=<SCRIPT run> \
    --sentences=/data/corpus/wikitext-2.valid.tokens.txt \
    --work_dir=/tmp/script_nbest

Stages, each skipped when its output is in `--work_dir` (1-2 also with
`--init_checkpoint`, a finished SCRIPT run): 1. records of the books
(`corpus_records.books_records`); 2. `official_repro.train` on
`gin/pretrain/script.gin`, small, the critic started at its base rate
(`--initial_positive_probability`: a run this short does not leave a zero
bias's start); 3. N-best lists of WikiText-2 sentences, `--num_distractors`
one-edit hypotheses each (`EDITS[k % 3]`), scored by the one-pass PLL (004
Eq. 7), per list and per word; 4. the T-pass masked-LM PLL and the Spearman
correlation of the two; 5. `official_repro.rescore` with a random first pass.
"""

import collections
import dataclasses
import json
import math
import os
import random
import re
from typing import Any, Dict, List, Sequence

from absl import app
from absl import flags
import numpy as np
from scipy import stats
import tensorflow as tf

from experiments import commands
from official_repro.common import cli
from experiments import corpus_records
from experiments import provenance
from official_repro import score
from official_repro.common import json_files
from official_repro.common import markdown

EDITS = ('substitute', 'delete', 'swap')
_SENTENCE_END = ' . '
_EXCLUDED = re.compile(r'<unk>|@|=')
_MAX_ATTEMPTS = 100

FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True)
class Hypothesis:
  """One N-best entry: its text and the edit that made it (None: true)."""

  text: str
  edit: str = None


def wikitext_sentences(
    lines: Sequence[str], min_words: int, max_words: int
) -> List[str]:
  """Sentences of `min_words` to `max_words` words (the final '.' included).

  Headings and sentences with `<unk>`, `@` or `=` are left out; each ends
  with ' .'.
  """
  sentences = []
  for line in lines:
    line = line.strip()
    if not line or line.startswith('='):  # Blank or a heading.
      continue
    for part in (line + ' ').split(_SENTENCE_END):
      words = part.split()
      if not words:
        continue
      sentence = ' '.join(words + ['.'])
      if min_words <= len(words) + 1 <= max_words and not _EXCLUDED.search(
          sentence
      ):
        sentences.append(sentence)
  return sentences


def _edit(
    words: List[str], edit: str, rng: random.Random, vocabulary: Sequence[str]
) -> List[str]:
  """`words` changed by one `edit` at a random position."""
  words = list(words)
  if edit == 'substitute':
    position = rng.randrange(len(words))
    replacement = words[position]
    while replacement == words[position]:
      replacement = rng.choice(vocabulary)
    words[position] = replacement
  elif edit == 'delete':
    del words[rng.randrange(len(words))]
  elif edit == 'swap':
    pairs = [i for i in range(len(words) - 1) if words[i] != words[i + 1]]
    position = rng.choice(pairs)
    words[position], words[position + 1] = words[position + 1], words[position]
  else:
    raise ValueError(f'Unknown edit {edit!r}; expected one of {EDITS}.')
  return words


def build_nbest(
    sentences: Sequence[str],
    num_distractors: int,
    rng: random.Random,
    vocabulary: Sequence[str],
) -> List[List[Hypothesis]]:
  """Per sentence, it and `num_distractors` distinct one-edit hypotheses.

  Substituted words are drawn from `vocabulary` (repetitions weight them).

  Raises:
    ValueError: a sentence too short to edit (under 3 words or 2 distinct),
      a vocabulary of one word, or no new hypothesis in 100 draws.
  """
  if len(set(vocabulary)) < 2:
    raise ValueError('The substitution vocabulary needs two different words.')
  nbest = []
  for sentence in sentences:
    words = sentence.split()
    if len(words) < 3 or len(set(words)) < 2:
      raise ValueError(f'Sentence {sentence!r} is too short to edit.')
    hypotheses = [Hypothesis(sentence)]
    seen = {sentence}
    for k in range(num_distractors):
      edit = EDITS[k % len(EDITS)]
      text = sentence
      for _ in range(_MAX_ATTEMPTS):
        if text not in seen:
          break
        text = ' '.join(_edit(words, edit, rng, vocabulary))
      else:
        raise ValueError(
            f'No new {edit!r} hypothesis of {sentence!r} in '
            f'{_MAX_ATTEMPTS} draws; use fewer distractors.'
        )
      seen.add(text)
      hypotheses.append(Hypothesis(text, edit))
    nbest.append(hypotheses)
  return nbest


def ranking_summary(
    nbest: Sequence[Sequence[Hypothesis]], scores: Sequence[Sequence[float]]
) -> Dict[str, float]:
  """How often the true hypothesis (first of each list) scores highest.

  Returns:
    `top1` (above every distractor), `chance` (1 / list length) and
    `<edit>_win_rate` (above a distractor made by that edit).
  """
  top1 = 0
  wins, counts = collections.Counter(), collections.Counter()
  for hypotheses, values in zip(nbest, scores):
    true_score = values[0]
    top1 += all(true_score > value for value in values[1:])
    for hypothesis, value in zip(hypotheses[1:], values[1:]):
      counts[hypothesis.edit] += 1
      wins[hypothesis.edit] += true_score > value
  summary = dict(
      num_lists=len(nbest), top1=top1 / len(nbest), chance=1.0 / len(nbest[0])
  )
  for edit in EDITS:
    if counts[edit]:
      summary[f'{edit}_win_rate'] = wins[edit] / counts[edit]
  return summary


def per_word(
    nbest: Sequence[Sequence[Hypothesis]], scores: Sequence[Sequence[float]]
) -> List[List[float]]:
  """Each score divided by its hypothesis' number of words."""
  return [
      [
          value / len(hypothesis.text.split())
          for hypothesis, value in zip(hypotheses, values)
      ]
      for hypotheses, values in zip(nbest, scores)
  ]


def _read_lines(path: str) -> List[str]:
  """A UTF-8 text file's lines, split as Python's text files split them."""
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f'--sentences file {path} does not exist.')
  with tf.io.gfile.GFile(path, 'rb') as f:
    text = f.read().decode('utf-8')
  return text.replace('\r\n', '\n').replace('\r', '\n').split('\n')


def _pretrain(records_dir: str, model_dir: str) -> Dict:
  """`official_repro.train`'s result (resuming in `model_dir`; train.log)."""
  params = [
      f"pretrain_data.input_path = '{records_dir}'",
      'pretrain_data.max_seq_length = 128',
      f'pretrain_data.train_batch_size = {FLAGS.batch_size}',
      'pretrain_data.eval_batch_size = 64',
      'pretrain_data.masking = "dynamic"',
      'pretrain_data.mask_rate = 0.15',
      'pretrain_data.mask_token_fraction = 0.8',
      'pretrain_data.random_token_fraction = 0.1',
      'pretrain_data.seed = 1',
      f'encoder.hidden_size = {FLAGS.hidden_size}',
      f'encoder.num_layers = {FLAGS.num_layers}',
      f'encoder.num_attention_heads = {FLAGS.hidden_size // 64}',
      f'encoder.intermediate_size = {4 * FLAGS.hidden_size}',
      'encoder.max_position_embeddings = 128',
      f'experiment.train_steps = {FLAGS.train_steps}',
      f'experiment.steps_per_loop = {math.gcd(FLAGS.train_steps, 50)}',
      f'experiment.checkpoint_interval = {FLAGS.train_steps}',
      f'experiment.validation_interval = {FLAGS.train_steps}',
      'optimization.optimizer = "adamw"',
      f'optimization.learning_rate = {FLAGS.learning_rate}',
      f'optimization.warmup_steps = {FLAGS.warmup_steps}',
      'optimization.weight_decay_rate = 0.01',
      'optimization.global_clipnorm = 1.0',
      'script.initial_positive_probability = '
      f'{FLAGS.initial_positive_probability or None}',
      f'script.critic_loss_weight = {FLAGS.critic_loss_weight}',
  ]
  args = [
      '--gin_file=gin/pretrain/script.gin',
      f'--model_dir={model_dir}',
      '--mode=train_and_eval',
      '--strategy=cpu',
      *(f'--gin_param={param}' for param in params),
  ]
  stdout = commands.run_module(
      'official_repro.train',
      args,
      log_path=os.path.join(FLAGS.work_dir, 'train.log'),
      stdout_only=True,
  )
  # Orbit prints its progress to stdout before the result: the result is
  # the JSON object from the line holding only '{' to the gin config.
  result = ('\n' + stdout).split('Operative gin config:')[0]
  return json.loads(result[result.index('\n{\n') :])


def spearman(first: Sequence[float], second: Sequence[float]) -> float:
  """Spearman's rank correlation (ties take their mean rank)."""
  return float(stats.spearmanr(first, second).statistic)


def first_pass_lists(
    nbest: Sequence[Sequence[Hypothesis]], rng: np.random.Generator, prefix: str
) -> Dict:
  """mlm-scoring JSON of `nbest` with standard-normal first-pass scores.

  Returns:
    {'<prefix>-<index>': {'ref': true text, 'hyp_<N>': {'score', 'text'} of
    the N-th best first-pass score}}.
  """
  lists = {}
  for index, hypotheses in enumerate(nbest):
    first_pass = rng.standard_normal(len(hypotheses))
    order = np.argsort(-first_pass)
    entry = {'ref': hypotheses[0].text}
    for rank, position in enumerate(order, start=1):
      entry[f'hyp_{rank}'] = dict(
          score=float(first_pass[position]), text=hypotheses[position].text
      )
    lists[f'{prefix}-{index:04d}'] = entry
  return lists


def _rescore(nbest: Sequence[Sequence[Hypothesis]], model_dir: str) -> Dict:
  """`official_repro.rescore`'s JSON on dev.json and test.json (half each)."""
  rng = np.random.default_rng(FLAGS.seed)
  half = len(nbest) // 2
  paths = {}
  for name, lists in (('dev', nbest[:half]), ('test', nbest[half:])):
    paths[name] = os.path.join(FLAGS.work_dir, f'{name}.json')
    json_files.write_json(paths[name], first_pass_lists(lists, rng, name))
  output = os.path.join(FLAGS.work_dir, 'rescore.json')
  args = [
      *(f'--nbest={name}={path}' for name, path in paths.items()),
      f'--init_checkpoint={model_dir}',
      '--dev_set=dev',
      '--weights=0:4:0.25',
      '--length_bonuses=-4:4:0.5',
      f'--output_json={output}',
  ]
  printed = commands.run_module(
      'official_repro.rescore', args, stdout_only=True
  )
  return dict(
      json_files.read_json(output),
      command=' '.join(['-m', 'official_repro.rescore', *args]),
      printed=printed,
  )


def format_report(result: Dict, command: str) -> str:
  """Markdown of the ranking, agreement with the T-pass PLL and rescoring."""
  lines = [
      '## SCRIPT scoring from a trained run',
      '',
      command,
      '',
      f'Model: `{result["model_dir"]}` (checkpoint '
      f'`{result["checkpoint"]}`); {result["nbest"]["num_lists"]} '
      f'WikiText-2 validation sentences (of '
      f'{result["num_candidate_sentences"]} usable), each with '
      f'{round(1 / result["nbest"]["chance"]) - 1} one-edit '
      "distractors (a word substituted from the sentences' unigram "
      'distribution, a word deleted, two adjacent words swapped).',
      '',
  ]
  rows = []
  for key, name in (
      ('nbest', 'one-pass PLL (004 Eq. 7)'),
      ('nbest_per_word', 'one-pass PLL per word'),
      ('nbest_mlm', 'T-pass masked-LM PLL'),
  ):
    summary = result[key]
    rows.append(
        [name, f'{summary["top1"]:.3f}', f'{summary["chance"]:.3f}']
        + [
            f'{summary.get(f"{edit}_win_rate", float("nan")):.3f}'
            for edit in EDITS
        ]
    )
  header = ['score', 'true sentence ranked first', 'chance']
  header += ['beats substitution', 'beats deletion', 'beats swap']
  lines += [
      *markdown.table(header, rows),
      '',
      'Spearman correlation of the one-pass and the T-pass PLL: '
      f'{result["spearman_true_sentences"]:.3f} over the true '
      f'sentences, {result["spearman_all_hypotheses"]:.3f} over all '
      'hypotheses.',
  ]
  rescored = result.get('rescore')
  if rescored:
    lines += [
        '',
        'Rescoring (`official_repro.rescore`; first-pass scores '
        'drawn from a standard normal, so the first pass picks a '
        f'random list member): `{rescored["command"]}`',
        '',
        f'Chosen on dev: PLL weight {rescored["weight"]:g}, length '
        f'bonus {rescored["length_bonus"]:g}.',
        '',
    ]
    for entry in rescored['sets'].values():
      lines += [entry['markdown'], '']
  return '\n'.join(lines) + '\n'


def _model_dir(result: Dict[str, Any]) -> str:
  """The SCRIPT run to score with: --init_checkpoint, or one trained here."""
  if FLAGS.init_checkpoint:
    return FLAGS.init_checkpoint
  for name in ('corpus', 'vocab_file'):
    if not getattr(FLAGS, name):
      raise app.UsageError(f'--{name} is required without --init_checkpoint.')
  records_dir = os.path.join(FLAGS.work_dir, 'records')
  metadata = corpus_records.books_records(
      FLAGS.corpus, FLAGS.vocab_file, records_dir
  )
  model_dir = os.path.join(FLAGS.work_dir, 'model')
  run = _pretrain(records_dir, model_dir)
  result.update(
      records={
          split: metadata['splits'][split]['num_examples']
          for split in ('train', 'eval')
      },
      pretraining=dict(global_step=run['global_step'], eval=run.get('eval')),
  )
  return model_dir


def _scored_lists(nbest, scores) -> List[List[Dict[str, Any]]]:
  """Every hypothesis of every list with its edit and both PLLs."""
  return [
      [
          dict(text=h.text, edit=h.edit, script=s, mlm=m)
          for h, s, m in zip(hs, ss, ms)
      ]
      for hs, ss, ms in zip(
          nbest, scores['script'].tolist(), scores['mlm'].tolist()
      )
  ]


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  tf.io.gfile.makedirs(FLAGS.work_dir)
  result = {}
  model_dir = _model_dir(result)
  candidates = wikitext_sentences(
      _read_lines(FLAGS.sentences), FLAGS.min_words, FLAGS.max_words
  )
  rng = random.Random(FLAGS.seed)
  sentences = rng.sample(candidates, FLAGS.num_sentences)
  vocabulary = [word for sentence in candidates for word in sentence.split()]
  nbest = build_nbest(sentences, FLAGS.num_distractors, rng, vocabulary)
  texts = [h.text for hypotheses in nbest for h in hypotheses]
  scores = {}
  for method in ('script', 'mlm'):
    scorer = score.PllScorer.from_checkpoint(model_dir, method)
    scores[method] = np.reshape(scorer(texts), [len(nbest), -1])
  script_scores = scores['script'].tolist()
  result.update(
      model_dir=model_dir,
      checkpoint=tf.train.latest_checkpoint(model_dir),
      nbest=ranking_summary(nbest, script_scores),
      nbest_per_word=ranking_summary(nbest, per_word(nbest, script_scores)),
      nbest_mlm=ranking_summary(nbest, scores['mlm'].tolist()),
      spearman_true_sentences=spearman(
          scores['script'][:, 0], scores['mlm'][:, 0]
      ),
      spearman_all_hypotheses=spearman(
          scores['script'].ravel(), scores['mlm'].ravel()
      ),
      num_candidate_sentences=len(candidates),
  )
  if FLAGS.rescore:
    result['rescore'] = _rescore(nbest, model_dir)
  printed = {key: value for key, value in result.items() if key != 'rescore'}
  print(json.dumps(printed, indent=2, sort_keys=True, default=float))
  if FLAGS.rescore:
    print(result['rescore']['printed'])
  if FLAGS.output_markdown:
    command = provenance.provenance('experiments.script_nbest')
    json_files.write_text(FLAGS.output_markdown, format_report(result, command))
  if FLAGS.output_json:
    json_files.write_json(
        FLAGS.output_json, dict(result, lists=_scored_lists(nbest, scores))
    )


def define_flags():
  """Defines the command-line flags."""
  flags.DEFINE_string(
      'init_checkpoint',
      None,
      'A finished SCRIPT pretraining run to score with '
      '(skips the records and the pretraining).',
  )
  flags.DEFINE_string(
      'corpus',
      None,
      'Corpus directory (Gutenberg books); without --init_checkpoint.',
  )
  flags.DEFINE_string(
      'vocab_file',
      None,
      'WordPiece vocabulary (uncased); without --init_checkpoint.',
  )
  flags.DEFINE_string('sentences', None, 'WikiText token file.')
  flags.DEFINE_string(
      'work_dir',
      '/tmp/script_nbest',
      'Records, model and outputs (stages are reused).',
  )
  flags.DEFINE_integer('hidden_size', 128, 'Encoder width (heads of 64).')
  flags.DEFINE_integer('num_layers', 4, 'Encoder depth.')
  flags.DEFINE_integer('batch_size', 32, 'Pretraining batch size.')
  flags.DEFINE_float('learning_rate', 5e-4, 'Peak learning rate.')
  flags.DEFINE_integer('warmup_steps', 100, 'Linear warmup steps.')
  flags.DEFINE_integer('train_steps', 500, 'Pretraining steps.')
  flags.DEFINE_float(
      'critic_loss_weight',
      50.0,
      'alpha, the weight of the critic loss (004: 50).',
  )
  flags.DEFINE_float(
      'initial_positive_probability',
      0.85,
      "The critic's p(t+) at initialization, in (0, 1); 0 "
      "keeps Model Garden's zero output bias.",
  )
  flags.DEFINE_integer('num_sentences', 200, 'N-best lists.')
  flags.DEFINE_integer('num_distractors', 4, 'Distractors per list.')
  flags.DEFINE_integer('min_words', 8, 'Shortest sentence kept.')
  flags.DEFINE_integer('max_words', 30, 'Longest sentence kept.')
  flags.DEFINE_integer('seed', 0, 'Seeds the sentence draw and the edits.')
  flags.DEFINE_boolean(
      'rescore', True, 'Rescore the lists with official_repro.rescore.'
  )
  flags.DEFINE_string(
      'output_json', None, 'Also write the summary and every scored list here.'
  )
  flags.DEFINE_string(
      'output_markdown',
      None,
      'Also write the summary as a markdown report here.',
  )
  cli.require_flags('sentences')


if __name__ == '__main__':
  define_flags()
  cli.run(main)
