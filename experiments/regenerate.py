r"""Regenerates one paper table or figure: ours beside the paper's.

  python -m experiments.regenerate --list
  python -m experiments.regenerate --table=001.IV --scale=tiny \
    --corpus=/data/corpus/gutenberg --vocab_file=/data/vocab.txt \
    --glue_dir=/data/glue --runs_dir=/tmp/regenerate/runs \
    --out=/tmp/regenerate/001.IV
  python -m experiments.regenerate --table=001.IV --scale=paper \
    --bucket=gs://my-bucket/runs --records=128-dynamic=gs://my-bucket/r128 \
    --glue_dir=gs://my-bucket/glue --tpu_names=a,b --zone=europe-west4-a \
    --out=/tmp/001.IV [--launch [--confirm] | --collect] [--rehearse]

Scales:
  tiny   every compared model of the table, shrunk alike by
         gin/regenerate/tiny.gin, pretrained on --corpus and fine-tuned on
         the --tasks of --glue_dir (task:epochs; default SST-2 for a
         quarter epoch) with gin/regenerate/tiny_finetune.gin over each
         task's paper cells (batch 32, learning rate 1e-3, length 64: the
         papers' SST-2 cells left every tiny model at the majority class)
         and --num_runs seeds aggregated by the paper's protocol; equal
         training FLOPs where the paper compares at equal compute.
  gpu    the same grid at the small models' size with gin/regenerate/gpu.gin
         (batch 128, 5000 reference steps, float16 with loss scaling),
         meant for about 30 minutes per table on one GPU (not measured on
         one); --rehearse runs it here with capped steps.
  paper  the run plan (experiments/regeneration/plan.py: per run its jobs,
         FLOPs, TPU-hours, VM, per-replica batch and memory); --launch runs
         it on TPU VMs to the end and writes the table (launch.py), resumably;
         --collect prints each run's state and the table so far; --rehearse
         runs the launch here against a fake gcloud (rehearsal.py).

Output: <out>/<key>.md and <key>.json (ours, the paper's value, the
difference, steps, scale, seeds and aggregation), <key>.png for figures,
and the plan as <key>.plan.md / .plan.json. After each job (one pretraining
seed of a run, with its fine-tuning) a line gives the jobs done, of those to
do, and the time left. A killed grid resumes where it stopped (finished runs
are read back) and refuses to mix results of other settings. Pretraining
runs are kept in --runs_dir by a digest of what decides their numbers, so
tables given the same --runs_dir pretrain a model they share once (004
Tables 1 and 2 and Fig. 2; 003 Table 1 and Fig. 3);
at paper scale the model directories under --bucket are named the same way
(see experiments/regeneration/runner.py and plan.py).

This module reads the flags; the registry entry of the table names the
runner that regenerates it (experiments/regeneration/target_runners.py and
command_runners.py).
"""

from absl import app
from absl import flags

from official_repro.common import cli
from official_repro.common import dataclass_flags
from official_repro.common import markdown
from experiments.regeneration import registry
from experiments.regeneration import target_runners

FLAGS = flags.FLAGS


def define_flags():
  """Defines --list and the flags of `target_runners.Request`."""
  flags.DEFINE_boolean('list', False, 'List the tables and figures.')
  dataclass_flags.define_flags(target_runners.Request)


def list_targets() -> str:
  """The registry as a markdown table."""
  rows = [
      [target.key, target.kind, target.description]
      for target in registry.TARGETS.values()
  ]
  return '\n'.join(markdown.table(['key', 'kind', 'what'], rows))


def regenerate(request: target_runners.Request) -> None:
  """Regenerates the table `request.table` by the runner its entry names.

  Raises:
    UsageError: no such table, or the runner refused the request.
  """
  try:
    target = registry.get(request.table)
  except KeyError as error:
    raise app.UsageError(str(error)) from error
  target_runners.run(target, request.absolute_paths())


def main(argv):
  """Lists, plans, runs or collects the table named by --table."""
  cli.refuse_positional(argv)
  if FLAGS.list:
    print(list_targets())
    return
  if not FLAGS.table:
    raise app.UsageError('Give --table=<key> or --list.')
  regenerate(dataclass_flags.from_flags(target_runners.Request, FLAGS))


if __name__ == '__main__':
  define_flags()
  cli.run(main)
