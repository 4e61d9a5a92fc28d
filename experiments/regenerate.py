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

Scales: `tiny` shrinks every compared model alike (gin/regenerate/tiny.gin,
fine-tuning `--tasks`, default a quarter epoch of SST-2, `--num_runs` seeds,
equal FLOPs where the paper compares at equal compute); `gpu` is the same
grid at small size (`--rehearse`: here, steps capped); `paper` is the run
plan (regeneration/plan.py), `--launch`ed on TPU VMs resumably, `--collect`ed,
or rehearsed against a fake gcloud. Writes <out>/<key>.md, .json, .png
(figures) and .plan.md/.plan.json. A killed grid resumes and refuses other
settings; pretraining runs in --runs_dir are keyed by a digest of what decides
their numbers, so tables share them. Runners: regeneration/target_runners.py.
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
  """Regenerates `request.table` by its runner; UsageError if refused."""
  try:
    target = registry.get(request.table)
  except KeyError as error:
    raise app.UsageError(str(error)) from error
  target_runners.run(target, request.absolute_paths())


def main(_):
  """Lists, plans, runs or collects the table named by --table."""
  if FLAGS.list:
    print(list_targets())
    return
  if not FLAGS.table:
    raise app.UsageError('Give --table=<key> or --list.')
  regenerate(dataclass_flags.from_flags(target_runners.Request, FLAGS))


if __name__ == '__main__':
  define_flags()
  cli.run(main)
