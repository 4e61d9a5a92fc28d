r"""Converts a released checkpoint into this repository's export layout.

  python -m official_repro.convert --input=<path> --output_dir=<dir> \
      [--from=auto|huggingface|electra_tf1|convbert_tf1|teams] \
      [--network=discriminator|generator] [--config_file=<file>] \
      [--lower_case | --nolower_case]

Every command then takes `--init_checkpoint=<dir>` (or the release itself,
converted once into a cache: `modeling/interchange/converted.py`). Kinds: a
Hugging Face folder (BERT, ALBERT, ELECTRA with its RTD or MLM head,
ConvBERT), an original ELECTRA or ConvBERT TF1 checkpoint (`--network`
picks discriminator or generator), or a Model Garden TEAMS checkpoint with
its `params.yaml`. The architecture always comes from the release, never
gin; a release that does not match its own config is refused, unwritten.
"""

import json
import sys

from absl import flags

from official_repro.common import cli
from official_repro.modeling.interchange import converted

FLAGS = flags.FLAGS

flags.DEFINE_enum(
    'from', 'auto', ['auto', *converted.KINDS], 'The kind of release.'
)
flags.DEFINE_string('input', None, 'The release: a folder or a checkpoint.')
flags.DEFINE_string('output_dir', None, 'A new folder for the export layout.')
flags.DEFINE_enum(
    'network',
    'discriminator',
    ['discriminator', 'generator'],
    'TF1 and TEAMS checkpoints: the network to convert.',
)
flags.DEFINE_string(
    'config_file',
    None,
    'TF1: a Hugging Face config.json replacing what the shapes cannot say; '
    "TEAMS: the run's params.yaml (default: beside the checkpoint).",
)
flags.DEFINE_boolean(
    'lower_case',
    None,
    "The tokenizer's casing, when the release's files do not say it.",
)


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  record = converted.convert(
      converted.Source(
          path=FLAGS.input,
          kind=FLAGS['from'].value,
          network=FLAGS.network,
          config_file=FLAGS.config_file,
          lower_case=FLAGS.lower_case,
      ),
      FLAGS.output_dir,
  )
  print(
      f'{FLAGS.output_dir}: {record["kind"]} {record["model_type"]} '
      f'({", ".join(record["classes"]) or "no class named"}), heads: '
      f'{", ".join(record["heads"]) or "none"}'
  )
  if record['task_heads_not_converted']:
    print(
        'not converted (task heads): '
        + ', '.join(record['task_heads_not_converted']),
        file=sys.stderr,
    )
  print(json.dumps(record, indent=2))


if __name__ == '__main__':
  cli.require_flags('input', 'output_dir')
  cli.run(main)
