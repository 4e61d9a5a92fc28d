r"""Fine-tunes a pretrained encoder on one task, over the paper's seeds.

  python -m official_repro.finetune \
    --gin_file=gin/finetune/001_ale/mrpc.gin \
    --init_checkpoint=/tmp/electra_small/encoder \
    --data_dir=/data/glue --model_dir=/tmp/ft/mrpc

--init_checkpoint is an exported encoder (or its pretraining run), or any
`tf.train.Checkpoint(encoder=...)` whose architecture gin gives and
vocabulary --vocab_file. --data_dir is the GLUE, SQuAD, RACE or POS folder.
Seeds, per-run evaluation and aggregation follow gin `run_protocol`; a killed
command resumes. Results go to --model_dir/results.json and results.md.
"""

import json

from absl import flags
import gin

from official_repro.common import cli
from official_repro.modeling.networks import pretrained
from official_repro.tasks import encoder_gin
from official_repro.tasks import finetuning_schedule
from official_repro.training import distribute
from official_repro.training import finetuning
from official_repro.training import gin_utils
from official_repro.training import precision

FLAGS = flags.FLAGS

flags.DEFINE_multi_string('gin_file', [], 'Gin config files, in order.')
flags.DEFINE_multi_string(
    'gin_param', [], 'Gin bindings applied after the files.'
)
flags.DEFINE_string(
    'init_checkpoint',
    None,
    'Pretrained encoder (export folder, pretraining model_dir '
    'or checkpoint prefix). Empty: random initialization.',
)
flags.DEFINE_string(
    'vocab_file',
    None,
    'WordPiece vocabulary; default: the one exported with '
    '--init_checkpoint.',
)
flags.DEFINE_string(
    'data_dir',
    None,
    'The GLUE root (CoLA/, MRPC/, ...), the SQuAD folder, the RACE root or '
    'the POS folder (see the module docstring).',
)
flags.DEFINE_string('model_dir', None, 'Run folders and results.')
flags.DEFINE_list(
    'seeds', None, 'Seeds to run instead of 0 .. run_protocol.num_runs - 1.'
)
flags.register_validator(
    'seeds',
    lambda seeds: seeds is None
    or (bool(seeds) and all(seed.isdigit() for seed in seeds)),
    message='--seeds takes seeds separated by commas, e.g. --seeds=0,1,2.',
)
distribute.define_flags()
precision.define_flags()


def configured_encoder() -> pretrained.PretrainedEncoder:
  """The encoder --init_checkpoint (or gin, for foreign checkpoints) names."""
  try:
    gin.query_parameter('encoder.hidden_size')
  except ValueError:  # No `encoder` bindings: the checkpoint must carry one.
    config = None
  else:
    config = encoder_gin.encoder_config()
  try:
    return pretrained.resolve(
        FLAGS.init_checkpoint, vocab_file=FLAGS.vocab_file, config=config
    )
  except pretrained.NoArchitectureError as error:
    raise cli.UserError(
        f'{error} Give it with gin: include a gin/sizes/*.gin file and set '
        'encoder.backbone.'
    ) from error


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  strategy = distribute.strategy_from_flags()
  gin_utils.parse_config(FLAGS.gin_file, FLAGS.gin_param)
  with gin.unlock_config():
    schedule = finetuning_schedule.FinetuningSchedule()
    protocol = finetuning_schedule.RunProtocol()
    encoder = configured_encoder()
  seeds = [int(seed) for seed in FLAGS.seeds] if FLAGS.seeds else None
  results = finetuning.run(
      schedule,
      protocol,
      encoder,
      FLAGS.data_dir,
      FLAGS.model_dir,
      strategy,
      seeds=seeds,
      mixed_precision=precision.resolve(FLAGS.mixed_precision, strategy),
  )
  gin_utils.save_config(FLAGS.model_dir, 'operative_config.gin', operative=True)
  print(finetuning.results_table(results))
  keys = ('task', 'score', 'summary', 'init_checkpoint')
  summary = {key: results[key] for key in keys}
  print(json.dumps(summary, indent=2, sort_keys=True))
  print('Operative gin config:')
  print(gin.operative_config_str())


if __name__ == '__main__':
  cli.require_flags('gin_file', 'data_dir', 'model_dir')
  cli.run(main)
