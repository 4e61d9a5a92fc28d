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
         gin/regenerate/tiny.gin, pretrained on --corpus, fine-tuned on the
         --tasks of --glue_dir (task:epochs; default SST-2 for a quarter
         epoch) with gin/regenerate/tiny_finetune.gin, --num_runs seeds
         aggregated by the paper's protocol; equal training FLOPs where the
         paper compares at equal compute.
  gpu    the same grid at the small models' size (gin/regenerate/gpu.gin);
         --rehearse runs it here with capped steps.
  paper  the run plan (experiments/regeneration/plan.py); --launch runs it
         on TPU VMs to the end, resumably (launch.py); --collect prints each
         run's state and the table so far; --rehearse runs the launch here
         against a fake gcloud (rehearsal.py).

Writes <out>/<key>.md and .json (ours beside the paper's), <key>.png for
figures, and the plan as <key>.plan.md / .plan.json. A killed grid resumes
where it stopped and refuses to mix results of other settings; pretraining
runs are kept in --runs_dir by a digest of what decides their numbers, so
tables sharing a model pretrain it once. The table's registry entry names
the runner (experiments/regeneration/target_runners.py, command_runners.py).
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
