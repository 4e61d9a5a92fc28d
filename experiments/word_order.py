r"""Does a pretrained masked LM use word order? Held-out text, then shuffled.

  python -m experiments.word_order --model_dir=<pretraining run> \
    --records=<its record directory> [--steps=50] [--output_json=...]

Held-out masked-LM accuracy in order and with each segment's words shuffled
(same masks), beside the best a context-free model scores on the same slots.
"""

from absl import flags

from official_repro.common import cli
from official_repro.common import json_files
from official_repro.training import word_order

FLAGS = flags.FLAGS


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  if FLAGS.output_json:
    json_files.check_writable(FLAGS.output_json, '--output_json')
  result = word_order.word_order(
      FLAGS.model_dir, FLAGS.records, FLAGS.steps, FLAGS.seed
  )
  print(word_order.format_result(result))
  if FLAGS.output_json:
    json_files.write_json(FLAGS.output_json, result)


if __name__ == '__main__':
  flags.DEFINE_string('model_dir', None, 'The pretraining run.')
  flags.DEFINE_string('records', None, 'Its record directory.')
  flags.DEFINE_integer('steps', 50, 'Eval batches (-1: the whole split).')
  flags.DEFINE_integer('seed', 0, 'Seed of the shuffles.')
  flags.DEFINE_string('output_json', None, 'Where to write the results.')
  cli.require_flags('model_dir', 'records')
  cli.run(main)
