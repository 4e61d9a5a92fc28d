r"""Pretraining speed and first-step loss in float32 against mixed precision.

  python -m experiments.investigations.precision_speed \
    --configs=electra_small=gin/papers/001_ale/electra_small.gin \
    --configs=convbert_small=gin/papers/002_convbert/small.gin \
    --gin_param=pretrain_data.train_batch_size=16 \
    --output_markdown=experiments/reports/mixed_precision_cpu.md

For each gin configuration and each precision this runs
`experiments.benchmark_pretraining`'s measurement of our task (one subprocess
per point, the same seeded initial weights and the same first batch) and
reports steps/s, the first step's loss and its relative difference from
float32's: what the mixed-precision path costs on a CPU, and that it
computes the same loss (nothing about a GPU or TPU). Which precision is
faster differs between CPUs, so the report names the CPU and its vector
extensions (`cpu_line`) and the load at the start.
"""

import os
import platform
from typing import Dict, List, Optional, Sequence, Tuple

from absl import flags
import tensorflow as tf

from experiments import commands
from experiments import provenance
from official_repro.common import cli
from official_repro.common import json_files
from official_repro.common import markdown
from official_repro.training import precision

FLAGS = flags.FLAGS

# The vector extensions a timing report names, in /proc/cpuinfo's spelling:
# AVX2 and AVX-512 for float32, AVX-512 BF16 and AMX for bfloat16.
SPEED_EXTENSIONS = ('avx2', 'avx512f', 'avx512_bf16', 'amx_bf16')


def cpu_line(cpuinfo: Optional[str] = None) -> str:
  """The report line naming the CPU and its `SPEED_EXTENSIONS`.

  `cpuinfo` is the text of /proc/cpuinfo (None: this machine's).

  Returns:
    `CPU: <model>; extensions: <present> (none of <absent>).`, or that the
    CPU is unknown where there is no /proc/cpuinfo.
  """
  if cpuinfo is None:
    try:
      # The kernel's description of this machine: a local file, never gs://.
      with open('/proc/cpuinfo') as f:
        cpuinfo = f.read()
    except OSError:
      return f'CPU: unknown ({platform.processor() or platform.machine()}).'
  fields = {}
  for line in cpuinfo.splitlines():
    key, separator, value = line.partition(':')
    if separator:
      fields.setdefault(key.strip(), value.strip())
  cpu_flags = set(fields.get('flags', '').split())
  present = [e for e in SPEED_EXTENSIONS if e in cpu_flags]
  absent = [e for e in SPEED_EXTENSIONS if e not in cpu_flags]
  model = fields.get('model name') or platform.processor() or 'unknown'
  listed = ', '.join(present) or f'none of {", ".join(absent)}'
  if present and absent:
    listed += f' (none of {", ".join(absent)})'
  return f'CPU: {model}; extensions: {listed}.'


def define_flags() -> None:
  """Defines the command-line flags."""
  flags.DEFINE_multi_string(
      'configs',
      [],
      'name=gin_file[,gin_file...], one per configuration to measure.',
  )
  flags.DEFINE_multi_string('gin_param', [], 'Bindings for every config.')
  flags.DEFINE_list(
      'precisions',
      ['float32', 'bfloat16'],
      'Precisions to measure; the first is the reference.',
  )
  flags.DEFINE_integer('steps', 10, 'Timed steps per point.')
  flags.DEFINE_integer('warmup_steps', 3, 'Untimed steps after the first.')
  flags.DEFINE_integer('seed', 1, 'Seed of the initial weights (all points).')
  flags.DEFINE_string(
      'work_dir',
      '/tmp/official_repro_precision_speed',
      'Records are built here once.',
  )
  flags.DEFINE_string('output_markdown', None, 'Write the table here.')
  flags.DEFINE_string('output_json', None, 'Write the measurements here.')


def parse_configs(specs: Sequence[str]) -> List[Tuple[str, List[str]]]:
  """`name=gin_file[,gin_file...]` specs as `(name, gin_files)` pairs.

  Raises:
    cli.UserError: no spec, a spec without a name or a gin file, or a
      missing gin file.
  """
  if not specs:
    raise cli.UserError('--configs: give at least one name=gin_file.')
  configs = []
  for spec in specs:
    name, separator, files = spec.partition('=')
    gin_files = [f for f in files.split(',') if f]
    if not separator or not name or not gin_files:
      raise cli.UserError(f'--configs={spec}: expected name=gin_file.')
    for gin_file in gin_files:
      if not tf.io.gfile.exists(gin_file):
        raise cli.UserError(f'--configs={spec}: no gin file {gin_file}.')
    configs.append((name, gin_files))
  return configs


def measure(gin_files: Sequence[str], mixed_precision: str) -> Dict:
  """One point of benchmark_pretraining's `ours` variant, in a subprocess.

  Its records are built once under --work_dir.
  """
  output_json = os.path.join(
      FLAGS.work_dir, f'{os.getpid()}_{mixed_precision}.json'
  )
  args = [
      *(f'--gin_file={gin_file}' for gin_file in gin_files),
      '--variants=ours',
      f'--mixed_precision={mixed_precision}',
      f'--steps={FLAGS.steps}',
      f'--warmup_steps={FLAGS.warmup_steps}',
      f'--work_dir={FLAGS.work_dir}',
      f'--output_json={output_json}',
      f'--gin_param=experiment.seed={FLAGS.seed}',
      *(f'--gin_param={p}' for p in FLAGS.gin_param),
  ]
  commands.run_module('experiments.benchmark_pretraining', args)
  (result,) = json_files.read_json(output_json)['results']
  tf.io.gfile.remove(output_json)
  return result


def format_table(points: List[Dict], header: str) -> str:
  """The measurements as markdown, each precision against the first."""
  reference, rows = {}, []
  for point in points:
    base = reference.setdefault(point['config'], point)
    loss, reference_loss = point['first_step_loss'], base['first_step_loss']
    difference = abs(loss - reference_loss) / abs(reference_loss)
    rows.append(
        [
            point['config'],
            point['precision'],
            f'{point["steps_per_second"]:.2f}',
            f'{point["steps_per_second"] / base["steps_per_second"]:.2f}x',
            f'{point["first_step_loss"]:.5f}',
            f'{difference:.2e}',
        ]
    )
  header_cells = (
      'config | precision | steps/s | vs float32 | first-step loss '
      '| relative difference'
  ).split(' | ')
  lines = [
      '## Pretraining steps/s and first-step loss by precision',
      '',
      header,
      '',
      *markdown.table(header_cells, rows),
  ]
  return '\n'.join(lines) + '\n'


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  configs = parse_configs(FLAGS.configs)
  unknown = sorted(set(FLAGS.precisions) - set(precision.CHOICES))
  if unknown:
    raise cli.UserError(
        f'--precisions: unknown {unknown}; choose from '
        f'{list(precision.CHOICES)}.'
    )
  load = provenance.load_average()
  points = []
  for name, gin_files in configs:
    for mixed_precision in FLAGS.precisions:
      result = measure(gin_files, mixed_precision)
      point = dict(config=name, gin_files=gin_files, precision=mixed_precision)
      points.append(dict(result, **point))
      print(
          f'{name} {mixed_precision}: {result["steps_per_second"]:.2f} '
          f'steps/s, first-step loss {result["first_step_loss"]:.5f}',
          flush=True,
      )
  cpu = cpu_line()
  command = provenance.provenance('experiments.investigations.precision_speed')
  table = format_table(
      points, ' '.join((command, cpu, provenance.load_line(load)))
  )
  print(table)
  if FLAGS.output_markdown:
    json_files.write_text(FLAGS.output_markdown, table)
  if FLAGS.output_json:
    json_files.write_json(
        FLAGS.output_json, dict(points=points, cpu=cpu, load_average=load)
    )


if __name__ == '__main__':
  define_flags()
  cli.run(main)
