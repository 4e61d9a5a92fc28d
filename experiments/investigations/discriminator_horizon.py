r"""Where a discriminator leaves the call-everything-original phase.

  python -m experiments.investigations.discriminator_horizon --run=electra \
    --records=/data/records_cpu --model_dir=/tmp/horizon/electra \
    --output_dir=experiments/reports [--mixed_precision=bfloat16] \
    [--stop_at_step=6000] [--report_only]

Early in ELECTRA-style pretraining the detector calls almost every token
original. This trains one cpu-scale run (`RUNS`) on a long schedule, evaluating
and probing (`discriminator_probe_lib`) each checkpoint, until recall and AUC
reach their targets or the schedule ends; rerun to resume. Writes
`discriminator_horizon_<run>.md`, `.json` and `.png`, beside the reference
code's `PUBLIC_POINTS`. The job is its own `subprocess.Popen`, not
`commands.run_module`: its evaluations are read while it runs, and an
interrupt waits for its checkpoint (longer than `commands.stop`'s grace).
"""

import dataclasses
import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from absl import flags
import tensorflow as tf

from experiments.investigations import discriminator_probe as probe_report
from experiments import provenance
from experiments.regeneration import held_out
from experiments.regeneration import registry
from experiments.regeneration import report as plots
from experiments.regeneration import runner
from official_repro.common import cli
from official_repro.common import json_files
from official_repro.common import markdown
from experiments.investigations import discriminator_probe_lib
from official_repro.training import gin_utils

FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True)
class HorizonRun:
  """One objective's long cpu-scale run; `bindings` come after the scale's."""

  name: str
  description: str
  gin_file: str
  bindings: Tuple[str, ...] = ()


_ELECTRA_SMALL = 'gin/papers/001_ale/electra_small.gin'
_ADAMW = (
    "optimization.optimizer = 'adamw'",
    'optimization.learning_rate = 2e-3',
)

RUNS: Dict[str, HorizonRun] = {
    h.name: h
    for h in (
        HorizonRun(
            'electra',
            "001's ELECTRA_small model and objective (temperature 0.8, a "
            "64-wide generator sharing the discriminator's whole embedding "
            "block) trained with AdamW at 2e-3 (the cpu scale's "
            "optimizer of 002, 003 and 004; 001's betas, epsilon and weight "
            "decay kept) instead of 001's LAMB at 2e-2, under which one run "
            "of this schedule lost its generator's accuracy once the rate "
            'neared its peak (`discriminator_horizon_electra_lamb.md`)',
            _ELECTRA_SMALL,
            bindings=_ADAMW,
        ),
        HorizonRun(
            'electra_word_tied',
            'As --run=electra, with the generator tied to the discriminator '
            "by the word table only, as Model Garden's `ElectraPretrainTask` "
            "ties them (001's gin file ties the whole embedding block, as "
            'google-research/electra does)',
            _ELECTRA_SMALL,
            bindings=(*_ADAMW, 'electra.tie_embedding_block = False'),
        ),
        HorizonRun(
            'electra_lamb',
            "001's ELECTRA_small recipe (LAMB at 2e-2, temperature 0.8, a "
            '64-wide generator), its generator tied to the discriminator by '
            'the word table only (the run predates the whole-block tying of '
            "001's gin file); steps 1-3,000 ran in bfloat16, 3,001-4,000 in "
            'float32',
            _ELECTRA_SMALL,
            bindings=('electra.tie_embedding_block = False',),
        ),
        HorizonRun(
            'script',
            "004's SCRIPT-small recipe (AdamW; one network is generator and "
            'critic)',
            'gin/papers/004_script/small.gin',
        ),
    )
}

# Held-out metrics drawn, with their labels.
CURVE_METRICS: Tuple[Tuple[str, str], ...] = (
    ('discriminator_auc', 'discriminator AUC'),
    ('discriminator_recall', 'discriminator recall'),
    ('discriminator_accuracy', 'discriminator accuracy'),
    ('masked_lm_accuracy', 'masked-LM accuracy'),
)


@dataclasses.dataclass(frozen=True)
class PublicPoint:
  """A published discriminator measurement of the reference code."""

  source: str
  model: str
  step: int
  auc: float
  recall: float
  accuracy: Optional[float] = None
  masked_lm_accuracy: Optional[float] = None


PUBLIC_POINTS: Tuple[PublicPoint, ...] = (
    PublicPoint(
        'google-research/electra issue #81',
        'ELECTRA (reference code), early in a run',
        5000,
        auc=0.68,
        recall=0.048,
        accuracy=0.867,
        masked_lm_accuracy=0.032,
    ),
    PublicPoint(
        'a released ConvBERT-small trained with that code',
        'ConvBERT-small, 1M steps',
        1000000,
        auc=0.94,
        recall=0.49,
        masked_lm_accuracy=0.54,
    ),
    PublicPoint(
        'a released ConvBERT-base trained with that code',
        'ConvBERT-base, 1M steps',
        1000000,
        auc=0.88,
        recall=0.27,
        masked_lm_accuracy=0.62,
    ),
)


def define_flags() -> None:
  """Defines the command's flags."""
  flags.DEFINE_enum('run', None, list(RUNS), 'The objective to continue.')
  flags.DEFINE_string('records', None, "The cpu scale's record directory.")
  flags.DEFINE_string('model_dir', None, 'The run (resumed when present).')
  flags.DEFINE_string(
      'output_dir', None, 'Where the report goes (default: --model_dir).'
  )
  flags.DEFINE_integer('max_steps', 30000, 'The schedule, in steps.')
  flags.DEFINE_integer(
      'stop_at_step',
      0,
      'Stop once this step, or the first evaluated step after it, is '
      'evaluated, keeping the --max_steps schedule (0: run the schedule); '
      'rerun with a later one to continue.',
  )
  flags.DEFINE_integer(
      'eval_every', 1000, 'Steps between checkpoints and evaluations.'
  )
  flags.DEFINE_integer('held_out_steps', 20, 'Held-out batches per evaluation.')
  flags.DEFINE_float('recall_target', 0.2, 'Stop once recall exceeds this...')
  flags.DEFINE_float('auc_target', 0.8, '...and the AUC reaches this.')
  flags.DEFINE_enum(
      'mixed_precision',
      'float32',
      ['float32', 'bfloat16'],
      'Compute precision of the run.',
  )
  flags.DEFINE_integer(
      'poll_seconds', 30, 'Seconds between reads of the evaluations.'
  )
  flags.DEFINE_boolean(
      'report_only',
      False,
      'Write the report from the run as it stands (probing the checkpoints '
      'not yet probed on --probe_steps batches, unless --probe_steps=0).',
  )
  flags.DEFINE_integer(
      'probe_steps',
      20,
      'Held-out batches of each checkpoint probe (0: no probes; -1: the '
      'whole eval split).',
  )
  cli.require_flags('run', 'model_dir')


def train_command(
    horizon: HorizonRun,
    records: str,
    model_dir: str,
    max_steps: int,
    eval_every: int,
    held_out_steps: int,
    mixed_precision: str,
) -> List[str]:
  """The `official_repro.train` command that trains (or resumes) the run.

  The paper gin file, the cpu scale's includes, then the long schedule
  (warmup over a tenth, as regenerate's) and the run's bindings.
  """
  run = registry.Run(horizon.name, horizon.name, (horizon.gin_file,))
  gin_files = (horizon.gin_file,) + runner.scale_gin_files(run, 'cpu')
  bindings = (
      f"pretrain_data.input_path='{records}'",
      f'experiment.train_steps = {max_steps}',
      f'optimization.warmup_steps = {max_steps // 10}',
      f'experiment.checkpoint_interval = {eval_every}',
      f'experiment.steps_per_loop = {eval_every}',
      f'experiment.validation_interval = {eval_every}',
      f'experiment.validation_steps = {held_out_steps}',
      'experiment.max_to_keep = 5',
      *horizon.bindings,
  )
  return [
      sys.executable,
      '-m',
      'official_repro.train',
      *(f'--gin_file={path}' for path in gin_files),
      *(f'--gin_param={b}' for b in bindings),
      f'--model_dir={model_dir}',
      '--mode=train_and_eval',
      '--strategy=cpu',
      f'--mixed_precision={mixed_precision}',
  ]


def first_step_meeting(
    curve: Dict[int, Dict[str, float]], recall_target: float, auc_target: float
) -> Optional[int]:
  """The first evaluated step with recall > target and AUC >= target."""
  for step, metrics in sorted(curve.items()):
    if (
        metrics.get('discriminator_recall', 0.0) > recall_target
        and metrics.get('discriminator_auc', 0.0) >= auc_target
    ):
      return step
  return None


# Probes of the run's checkpoints, kept because the run keeps only its last
# five checkpoints: <model_dir>/probes/step_<N>.json.
PROBES_SUBDIR = 'probes'


def read_probes(model_dir: str) -> Dict[int, Dict[str, Any]]:
  """{step: probe result} of every checkpoint probed so far, in step order."""
  pattern = os.path.join(model_dir, PROBES_SUBDIR, 'step_*.json')
  probes = [json_files.read_json(p) for p in tf.io.gfile.glob(pattern)]
  return dict(sorted((int(p['step']), p) for p in probes))


def probe_checkpoints(
    model_dir: str, probe_steps: int
) -> Dict[int, Dict[str, Any]]:
  """Probes each checkpoint not yet probed on `probe_steps` batches.

  A checkpoint the run deletes while probed is skipped. Returns every kept
  probe by step (`read_probes`).
  """
  kept = read_probes(model_dir)
  state = tf.train.get_checkpoint_state(model_dir)
  for checkpoint in state.all_model_checkpoint_paths if state else ():
    checkpoint = os.path.join(model_dir, os.path.basename(checkpoint))
    step = _checkpoint_step(checkpoint)
    path = os.path.join(model_dir, PROBES_SUBDIR, f'step_{step}.json')
    probe = kept.get(step)
    # The `steps` a kept probe ran with (older probes: its batches).
    if probe and probe.get('steps', probe['batches']) == probe_steps:
      continue
    try:
      result = discriminator_probe_lib.probe(
          model_dir, steps=probe_steps, checkpoint=checkpoint
      )
    except (tf.errors.NotFoundError, cli.UserError):
      if tf.io.gfile.exists(checkpoint + '.index'):
        raise
      continue
    tf.io.gfile.makedirs(os.path.dirname(path))
    json_files.write_json(path, result)
    print(f'probed step {step}', flush=True)
  return read_probes(model_dir)


def train_until_targets(
    command: Sequence[str],
    model_dir: str,
    max_steps: int,
    recall_target: float,
    auc_target: float,
    poll_seconds: float,
    probe_steps: int = 0,
    stop_at_step: int = 0,
) -> Dict[int, Dict[str, float]]:
  """Runs `command` until the targets, `stop_at_step` or the schedule's end.

  Meeting the targets sends SIGTERM (the job checkpoints and exits). At
  `stop_at_step` the job is killed if that step is its last checkpoint, so a
  rerun resumes exactly there (tests/training/test_reproducibility.py), and
  gets SIGTERM otherwise. The job logs to `horizon.log`; RuntimeError if it
  fails. Returns the held-out curve.
  """
  last_step = min(stop_at_step, max_steps) if stop_at_step else max_steps
  curve = held_out.read_curve(model_dir)
  if first_step_meeting(curve, recall_target, auc_target) is not None or (
      curve and max(curve) >= last_step
  ):
    return curve

  def stop_signal(curve: Dict[int, Dict[str, float]]) -> Optional[int]:
    if first_step_meeting(curve, recall_target, auc_target) is not None:
      return signal.SIGTERM
    if last_step < max_steps and curve and max(curve) >= last_step:
      latest = tf.train.latest_checkpoint(model_dir)
      at_checkpoint = latest and _checkpoint_step(latest) == max(curve)
      return signal.SIGKILL if at_checkpoint else signal.SIGTERM
    return None

  tf.io.gfile.makedirs(model_dir)
  log_path = os.path.join(model_dir, 'horizon.log')
  print('  $ ' + ' '.join(command), flush=True)
  # A child's stdout needs an operating-system file: local directories only.
  with open(log_path, 'a') as log:
    process = subprocess.Popen(
        list(command),
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=gin_utils.REPO_ROOT,
    )
    try:
      sent = _watch(
          process, model_dir, set(curve), poll_seconds, probe_steps, stop_signal
      )
    except BaseException:
      process.send_signal(signal.SIGTERM)
      process.wait()
      raise
  stopped = {
      code for sig in (signal.SIGTERM, sent) for code in (-sig, 128 + sig)
  }
  if process.returncode and process.returncode not in stopped:
    raise RuntimeError(
        f'training failed (exit {process.returncode}); see {log_path}.'
    )
  return held_out.read_curve(model_dir)


def _watch(
    process: subprocess.Popen,
    model_dir: str,
    seen: Set[int],
    poll_seconds: float,
    probe_steps: int,
    stop_signal: Callable[[Dict[int, Dict[str, float]]], Optional[int]],
) -> int:
  """Polls, prints and probes until the job ends or `stop_signal` names one.

  A failed probe is printed (the next poll retries). Returns the signal sent
  (SIGTERM when the job ended by itself).
  """
  while process.poll() is None:
    time.sleep(poll_seconds)
    curve = held_out.read_curve(model_dir)
    for step in sorted(set(curve) - seen):
      values = ', '.join(
          f'{label} {curve[step][name]:.3f}'
          for name, label in CURVE_METRICS
          if name in curve[step]
      )
      print(f'step {step}: {values}', flush=True)
    sent = stop_signal(curve)
    if sent is not None:
      process.send_signal(sent)
      process.wait()
      return sent
    if probe_steps and set(curve) - seen:
      try:
        probe_checkpoints(model_dir, probe_steps)
      except Exception as error:  # pylint: disable=broad-except
        print(f'probe failed, training continues: {error}', flush=True)
    seen = set(curve)
  return signal.SIGTERM


def _checkpoint_step(prefix: str) -> int:
  """The step in a checkpoint prefix the trainer names `ckpt-<step>`."""
  return int(prefix.rsplit('-', 1)[-1])


_PRECISION = {
    'float32': 'float32',
    'bfloat16': 'mixed bfloat16 (float32 variables)',
}


def _curve_table(curve: Dict[int, Dict[str, float]]) -> List[str]:
  """The held-out curve as markdown lines: a row per evaluated step."""
  return markdown.table(
      ['step', *(label for _, label in CURVE_METRICS)],
      [
          [
              f'{step:,}',
              *(plots.number(metrics.get(name)) for name, _ in CURVE_METRICS),
          ]
          for step, metrics in curve.items()
      ],
  )


def _public_points_table() -> List[str]:
  """`PUBLIC_POINTS` as markdown lines."""
  return markdown.table(
      (
          'source | model | step | AUC | recall | accuracy | masked-LM '
          'accuracy'
      ).split(' | '),
      [
          [
              *f'{p.source}|{p.model}|{p.step:,}|{p.auc:.2f}'.split('|'),
              *(
                  plots.number(x)
                  for x in (p.recall, p.accuracy, p.masked_lm_accuracy)
              ),
          ]
          for p in PUBLIC_POINTS
      ],
  )


def write_report(
    horizon: HorizonRun,
    curve: Dict[int, Dict[str, float]],
    command: Sequence[str],
    output_dir: str,
    recall_target: float,
    auc_target: float,
    max_steps: int,
    mixed_precision: Optional[str] = None,
    probes: Optional[Dict[int, Dict[str, Any]]] = None,
) -> str:
  """Writes the markdown, JSON and PNG reports; returns the markdown path.

  Float32 runs' files end in `_float32` (others are bfloat16's).
  """
  met = first_step_meeting(curve, recall_target, auc_target)
  tf.io.gfile.makedirs(output_dir)
  suffix = '_float32' if mixed_precision == 'float32' else ''
  stem = os.path.join(
      output_dir, f'discriminator_horizon_{horizon.name}{suffix}'
  )
  plot_curve(horizon, curve, stem + '.png')
  lines = [
      f'# Where the discriminator leaves the all-original phase: '
      f'{horizon.name}',
      '',
      f'{horizon.description}, at the cpu scale (`gin/regenerate/cpu.gin`: '
      'hidden 128, 2 layers, length 64, batch 128), on a schedule of '
      f'{max_steps:,} steps (warmup a tenth), computed in '
      f'{_PRECISION.get(mixed_precision, "a precision not recorded")}, '
      'evaluated on held-out books at every checkpoint.',
      '',
      provenance.provenance('experiments.investigations.discriminator_horizon'),
      '',
      '## Verdict',
      '',
      f'Held-out recall > {recall_target} and AUC >= {auc_target} first '
      f'at step {met:,}.'
      if met is not None
      else f'Not met by step {max(curve) if curve else 0:,}: recall > '
      f'{recall_target} and AUC >= {auc_target}.',
      '',
      '## Held-out curve',
      '',
      *_curve_table(curve),
      '',
      '## Public points of the reference code',
      '',
      'At other sizes, batches and corpora: they say where the phase '
      'ends for the reference code, not a value to match.',
      '',
      *_public_points_table(),
      '',
      f'![curve]({os.path.basename(stem)}.png)',
      '',
      *(probe_lines(probes) if probes else []),
  ]
  json_files.write_json(
      stem + '.json',
      dict(
          run=horizon.name,
          command=list(command),
          max_steps=max_steps,
          mixed_precision=mixed_precision,
          recall_target=recall_target,
          auc_target=auc_target,
          first_step_meeting_targets=met,
          curve={str(step): metrics for step, metrics in curve.items()},
          probes={str(step): probe for step, probe in (probes or {}).items()},
      ),
  )
  json_files.write_text(stem + '.md', '\n'.join(lines))
  return stem + '.md'


def probe_lines(probes: Dict[int, Dict[str, Any]]) -> List[str]:
  """The report's probe section: a row per checkpoint, then the last."""
  edges = discriminator_probe_lib.PLAUSIBILITY_EDGES
  bands = ' / '.join(f'{low:g}-{high:g}' for low, high in zip(edges, edges[1:]))
  lines = [
      '## What the detector detects, checkpoint by checkpoint',
      '',
      '`experiments.investigations.discriminator_probe` on each checkpoint '
      '(the run keeps its last five; each probe is kept in '
      '`<model_dir>/probes/`): the '
      "detector's held-out AUC on its generator's replacements and on "
      'unigram replacements at the same slots, on the odd sequences beside '
      'the best identity-only scorer fit on the even ones; its AUC on '
      "uniform replacements; and its recall on the generator's replacements "
      "by the generator's probability of them at temperature 1 "
      f'({bands}).',
      '',
      *markdown.table(
          (
              'step | generator AUC (odd half) | identity-only | unigram AUC '
              '(odd half) | identity-only | unigram recall | uniform AUC | '
              'recall by generator probability | held-out batches'
          ).split(' | '),
          [_probe_row(step, probe) for step, probe in probes.items()],
      ),
  ]
  last = probes[max(probes)]
  lines += ['', f'### The probe at step {last["step"]:,}', '']
  lines += [
      line.replace('## ', '#### ', 1) if line.startswith('## ') else line
      for line in probe_report.report_lines(last)
  ]
  return lines + ['']


def _probe_row(step: int, probe: Dict[str, Any]) -> List[str]:
  """A checkpoint's row of the probe table."""
  cell = probe_report.cell
  generator, unigram = (probe['sources'][k] for k in ('generator', 'unigram'))
  return [
      f'{step:,}',
      *(
          cell(source[key])
          for source in (generator, unigram)
          for key in ('auc_on_identity_half', 'identity_auc')
      ),
      cell(unigram['recall']),
      cell(probe['sources']['uniform']['auc']),
      ' / '.join(cell(band['recall']) for band in probe['plausibility']),
      probe['batches'],
  ]


def plot_curve(
    horizon: HorizonRun, curve: Dict[int, Dict[str, float]], path: str
) -> None:
  """The held-out curves, with the public points as markers."""
  pyplot = plots.pyplot_module()
  figure, axes = pyplot.subplots(1, 2, figsize=(11, 4))
  steps = list(curve)
  for name, label in CURVE_METRICS:
    values = [curve[s].get(name) for s in steps]
    if any(v is not None for v in values):
      axes[0].plot(steps, values, marker='o', markersize=3, label=label)
  axes[0].set_xlabel('step (cpu scale)')
  axes[0].set_ylim(0, 1)
  axes[0].grid(True, alpha=0.3)
  axes[0].legend(fontsize=8)
  axes[0].set_title(f'{horizon.name}: held-out curve')
  for point in PUBLIC_POINTS:
    axes[1].scatter(point.recall, point.auc, label=point.model)
  axes[1].plot(
      [curve[s].get('discriminator_recall', 0.0) for s in steps],
      [curve[s].get('discriminator_auc', 0.0) for s in steps],
      marker='.',
      color='gray',
      label='ours, by step',
  )
  axes[1].set_xlabel('discriminator recall')
  axes[1].set_ylabel('discriminator AUC')
  axes[1].set_xlim(0, 1)
  axes[1].set_ylim(0.5, 1)
  axes[1].grid(True, alpha=0.3)
  axes[1].legend(fontsize=7)
  axes[1].set_title('recall against AUC, beside the public points')
  plots.save_png(pyplot, figure, path, dpi=100)


RUN_FILENAME = 'horizon_run.json'


def claim_model_dir(
    model_dir: str, horizon: HorizonRun, mixed_precision: str
) -> None:
  """Marks `model_dir` as `horizon`'s run; refuses another run's directory.

  `official_repro.train` does not tell optimizers or precisions apart.
  """
  path = os.path.join(model_dir, RUN_FILENAME)
  mine = dict(
      run=horizon.name,
      bindings=list(horizon.bindings),
      mixed_precision=mixed_precision,
  )
  theirs = read_claim(model_dir)
  if theirs is None:
    tf.io.gfile.makedirs(model_dir)
    json_files.write_json(path, mine)
    return
  if 'mixed_precision' not in theirs:  # claimed before precisions were kept
    theirs = dict(theirs, mixed_precision=mixed_precision)
  if theirs != mine:
    raise cli.UserError(
        f'--model_dir {model_dir} holds the horizon run '
        f'{theirs["run"]!r} ({theirs["bindings"]}) in '
        f'{theirs.get("mixed_precision")}, not --run={horizon.name} in '
        f'--mixed_precision={mixed_precision}; give its own directory, or '
        'its precision.'
    )


def read_claim(model_dir: str) -> Optional[Dict[str, Any]]:
  """The run `model_dir` holds (`claim_model_dir`), or None."""
  return json_files.read_json(os.path.join(model_dir, RUN_FILENAME), None)


def main(_) -> None:
  """Runs the command with the parsed flags (the absl entry point)."""
  horizon = RUNS[FLAGS.run]
  if not FLAGS.report_only and not FLAGS.records:
    raise cli.UserError("--records: give the cpu scale's record directory.")
  if not 0 <= FLAGS.stop_at_step <= FLAGS.max_steps:
    raise cli.UserError(
        f'--stop_at_step={FLAGS.stop_at_step}: give a step up to '
        f'--max_steps={FLAGS.max_steps}, or 0 for the whole schedule.'
    )
  if not FLAGS.report_only:
    claim_model_dir(FLAGS.model_dir, horizon, FLAGS.mixed_precision)
  claim = read_claim(FLAGS.model_dir) or {}
  command = train_command(
      horizon,
      FLAGS.records or '<records>',
      FLAGS.model_dir,
      FLAGS.max_steps,
      FLAGS.eval_every,
      FLAGS.held_out_steps,
      FLAGS.mixed_precision,
  )
  if FLAGS.report_only:
    curve = held_out.read_curve(FLAGS.model_dir)
  else:
    curve = train_until_targets(
        command,
        FLAGS.model_dir,
        FLAGS.max_steps,
        FLAGS.recall_target,
        FLAGS.auc_target,
        FLAGS.poll_seconds,
        FLAGS.probe_steps,
        FLAGS.stop_at_step,
    )
  probes = (
      probe_checkpoints(FLAGS.model_dir, FLAGS.probe_steps)
      if FLAGS.probe_steps
      else read_probes(FLAGS.model_dir)
  )
  path = write_report(
      horizon,
      curve,
      sys.argv,
      FLAGS.output_dir or FLAGS.model_dir,
      FLAGS.recall_target,
      FLAGS.auc_target,
      FLAGS.max_steps,
      claim.get('mixed_precision'),
      probes,
  )
  print(f'report: {path}')


if __name__ == '__main__':
  define_flags()
  cli.run(main)
