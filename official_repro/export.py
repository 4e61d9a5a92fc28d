r"""Exports a trained model as a Hugging Face folder or a SavedModel.

  python -m official_repro.export --model_dir=<run or export dir> \
      --format=huggingface|saved_model --output_dir=<dir>

`--model_dir` is a pretraining run (latest `ckpt-<step>` or `--checkpoint`),
one seed of a GLUE fine-tuning, an exported encoder, a conversion or a
release. `huggingface` writes the `transformers` class computing the same
function: masked LM and SCRIPT as `BertForMaskedLM`/`ElectraForMaskedLM`;
ELECTRA as `ElectraForPreTraining` (generator in `generator/`); ALE,
ConvBERT-ELECTRA and TEAMS' discriminator as base models (no RTD/MWS class
there); a GLUE classifier as `*ForSequenceClassification` (ELECTRA's and
ConvBERT's classes use a GELU layer instead of our tanh pooler, so those are
refused). What a class cannot hold, and where a Hugging Face head computes
otherwise (with its effect on probe logits), is printed. `saved_model`
follows Model Garden's `export_base` (`serve`, `serve_text`). The folder is
staged and renamed into place when complete (`staging.whole_folder`).
"""

import os
import sys
from typing import Any, List, Optional, Tuple

from absl import flags
import numpy as np
import tensorflow as tf

from official_repro.common import cli
from official_repro.common import staging
from official_repro.data import vocab as vocab_lib
from official_repro.modeling.interchange import converted
from official_repro.modeling.interchange import hf_config
from official_repro.modeling.interchange import hf_models
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks import export_layout
from official_repro.modeling.networks import pretrained
from official_repro.training import saved_runs
from official_repro.training import serving

FLAGS = flags.FLAGS

FORMATS = ('huggingface', 'saved_model')
GENERATOR_SUBDIR = 'generator'

flags.DEFINE_string('model_dir', None, 'A pretraining run or an export dir.')
flags.DEFINE_enum('format', None, list(FORMATS), 'What to write.')
flags.DEFINE_string('output_dir', None, 'A new folder for the export.')
flags.DEFINE_string(
    'checkpoint', None, "A pretraining run's ckpt-<step> (default: latest)."
)
flags.DEFINE_integer(
    'max_seq_length',
    None,
    'saved_model: the length serve_text pads to (default: the positions).',
)


def _probe_difference(
    head, head_activation: str, encoder, config, model_type: str
) -> Optional[str]:
  """How far Hugging Face's MLM head computes from ours on a probe batch."""
  difference = hf_models.mlm_head_difference(
      model_type, config.hidden_activation, head_activation
  )
  if difference is None:
    return None
  theirs_activation = config.hidden_activation
  if model_type in ('electra', 'convbert'):
    theirs_activation = 'gelu_erf'
  theirs_head = hf_models.build_mlm_head(encoder, theirs_activation)
  theirs_head.set_weights(head.get_weights())
  rng = np.random.RandomState(0)
  ids = tf.constant(rng.randint(5, config.vocab_size, (2, 8)), tf.int32)
  inputs = dict(input_word_ids=ids, input_mask=tf.ones_like(ids))
  inputs['input_type_ids'] = tf.zeros_like(ids)
  sequence = encoder(inputs)['sequence_output']
  positions = tf.constant(np.tile(np.arange(8, dtype=np.int32), (2, 1)))
  ours = head(sequence, masked_positions=positions).numpy()
  theirs = theirs_head(sequence, masked_positions=positions).numpy()
  gap = float(np.max(np.abs(ours - theirs)))
  return f'{difference}: logits differ by up to {gap:.2e} on a probe batch'


def _export_hf(
    path: str,
    encoder,
    config: encoders.EncoderConfig,
    vocab: Tuple[List[str], bool],
    electra: bool = False,
    mlm: Optional[Tuple[Any, str]] = None,
    rtd_head=None,
) -> List[str]:
  """Writes one folder; returns the lines to print about it.

  `vocab` is `(tokens, lower_case)`, `mlm` `(MLM head, its activation)`.
  """
  model_type = hf_config.model_type_for(config, electra or rtd_head is not None)
  lines = []
  if rtd_head is not None and model_type != 'electra':
    lines.append(
        f'not exported: the RTD head (Hugging Face {model_type} has no '
        'replaced-token-detection class)'
    )
    rtd_head = None
  written = hf_models.export(
      path,
      encoder,
      config,
      *vocab,
      electra=electra,
      mlm_head=mlm[0] if mlm else None,
      rtd_head=rtd_head,
  )
  lines.insert(0, f'{path}: {written["class"]} ({written["model_type"]})')
  if mlm is not None:
    note = _probe_difference(*mlm, encoder, config, model_type)
    lines += [note] if note else []
  return lines


def _export_run(run: saved_runs.SavedRun, out: str, vocab) -> List[str]:
  """The networks of a pretraining run, by objective, into `out`."""
  model, config = run.model, run.model_config
  name = run.objective.name
  if name in ('masked_lm', 'script'):
    encoder = model.encoder_network if name == 'masked_lm' else model.encoder
    mlm = (model.masked_lm, config.mlm_activation)
    lines = _export_hf(out, encoder, config.encoder, vocab, mlm=mlm)
    if name == 'script':
      lines.append(
          'the critic (004 Eq. 4-5) is a reading of these MLM logits, '
          "p(t+) = sigmoid(logsumexp(s_t)); Hugging Face's class gives the "
          'logits'
      )
    return lines
  encoder_config = run.objective.exported_encoder_config(config)
  if name in ('electra', 'teams'):
    rtd_head = model.rtd_head if name == 'electra' else None
    lines = _export_hf(
        out,
        model.discriminator,
        encoder_config,
        vocab,
        electra=True,
        rtd_head=rtd_head,
    )
    if name == 'teams':
      lines.append(
          'not exported: the MWS head and the RTD side (its task layer and '
          'head); the encoder is the MWS side TEAMS fine-tunes'
      )
    return lines + _export_hf(
        os.path.join(out, GENERATOR_SUBDIR),
        model.generator,
        config.generator(),
        vocab,
        electra=True,
        mlm=(model.mlm_head, config.mlm_activation),
    )
  encoder = model.checkpoint_items['encoder']
  lines = _export_hf(out, encoder, encoder_config, vocab)
  return lines + [f"not exported: the {name} objective's heads"]


def _export_classifier(run: saved_runs.FinetunedRun, out: str) -> List[str]:
  """A fine-tuned GLUE classifier, in the format asked for, into `out`."""
  if FLAGS.format == 'saved_model':
    serving.export(
        run.classifier,
        out,
        run.vocab_file,
        run.lower_case,
        FLAGS.max_seq_length or run.encoder_config.max_position_embeddings,
    )
    return [f'{out}: SavedModel of the {run.task} classifier (logits)']
  written = hf_models.export(
      out,
      run.classifier.checkpoint_items['encoder'],
      run.encoder_config,
      vocab_lib.load_vocab(run.vocab_file),
      run.lower_case,
      classifier=run.classifier,
      labels=run.labels,
  )
  return [
      f'{out}: {written["class"]} ({written["model_type"]}), '
      f'{run.task} labels {run.labels}'
  ]


def _encoder_of(source: pretrained.PretrainedEncoder):
  encoder = encoders.build_encoder(source.config)
  pretrained.restore(encoder, source.checkpoint_path)
  return encoder


def _export(source: str, out: str) -> List[str]:
  """Writes the export of `source` into `out`; the lines to print."""
  if saved_runs.is_finetuning_run(source):
    return _export_classifier(saved_runs.load_finetuned(source), out)
  seeds = tf.io.gfile.glob(os.path.join(source, 'seed_*'))
  if seeds:
    raise cli.UserError(
        f'--model_dir {source} holds {len(seeds)} fine-tuning runs; give one: '
        f'--model_dir={sorted(seeds)[0]}.'
    )
  run = None
  if saved_runs.is_pretraining_run(source):
    run = saved_runs.load(source, FLAGS.checkpoint)
  elif converted.detect(source):
    source = converted.cached_export(converted.Source(source))
  description = pretrained.resolve(
      os.path.join(source, export_layout.ENCODER_SUBDIR)
      if run is not None
      else source
  )
  vocab = (vocab_lib.load_vocab(description.vocab_file), description.lower_case)
  if FLAGS.format == 'saved_model':
    encoder = (
        run.model.checkpoint_items['encoder']
        if run is not None
        else _encoder_of(description)
    )
    serving.export(
        encoder,
        out,
        description.vocab_file,
        description.lower_case,
        FLAGS.max_seq_length or description.config.max_position_embeddings,
    )
    return [f'{out}: SavedModel, signatures serve and serve_text']
  if run is not None:
    return _export_run(run, out, vocab)
  return _export_hf(out, _encoder_of(description), description.config, vocab)


def main(_):
  """Runs the command with the parsed flags (the absl entry point)."""
  out = FLAGS.output_dir.rstrip('/')
  if tf.io.gfile.exists(out) and tf.io.gfile.listdir(out):
    raise cli.UserError(f'--output_dir {out} is not empty; give a new folder.')
  with staging.whole_folder(out) as temporary:
    lines = [
        line.replace(temporary, out)
        for line in _export(FLAGS.model_dir, temporary)
    ]
  print(lines[0])
  for line in lines[1:]:
    print(line, file=sys.stderr)


if __name__ == '__main__':
  cli.require_flags('model_dir', 'format', 'output_dir')
  cli.run(main)
