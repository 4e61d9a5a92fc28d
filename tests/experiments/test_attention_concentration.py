"""002 Table 1 driver (experiments/attention_concentration.py), tiny."""

import json
import math

import pytest

from experiments import attention_concentration
from official_repro.modeling.networks import encoders

_WORDS = 'the quick brown fox jumps over a lazy dog near river'.split()
_VOCAB = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'] + _WORDS
# MRPC dev rows; the last pair is 5 tokens long ([CLS] a [SEP] b [SEP]), too
# short for window 4, so its maps have no concentration.
_PAIRS = [
    ('the quick brown fox jumps', 'a lazy dog near the river'),
    ('a dog jumps over the fox', 'the fox jumps over a dog'),
    ('near the river', 'the quick brown dog jumps over a lazy fox'),
    ('the lazy fox', 'a quick dog'),
    ('fox', 'dog'),
]
_NUM_LAYERS = 2
_SEQ_LENGTH = 16
# (backbone, heads configured, attention maps per layer).
_MODELS = {'bert': ('bert', 4, 4), 'convbert': ('convbert', 4, 2)}


def _encoder(backbone, num_heads, **options):
  """A random encoder of `backbone` and its config."""
  fields = dict(
      backbone=backbone,
      hidden_size=16,
      num_layers=_NUM_LAYERS,
      num_attention_heads=num_heads,
      intermediate_size=32,
      vocab_size=len(_VOCAB),
      max_position_embeddings=_SEQ_LENGTH,
  )
  if backbone == 'convbert':
    fields.update(options=dict(kernel_size=3, **options))
  config = encoders.EncoderConfig(**fields)
  return encoders.build_encoder(config), config


@pytest.fixture(scope='module')
def fixture_dirs(tmp_path_factory, export_encoder_with_vocab):
  """The GLUE root with MRPC/dev.tsv, and one pretraining model_dir each."""
  glue_dir = tmp_path_factory.mktemp('glue')
  (glue_dir / 'MRPC').mkdir()
  lines = ['\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String']
  lines += [
      f'{i % 2}\t{i}\t{i + 100}\t{a}\t{b}' for i, (a, b) in enumerate(_PAIRS)
  ]
  (glue_dir / 'MRPC' / 'dev.tsv').write_text('\n'.join(lines) + '\n')
  model_dirs = {
      name: export_encoder_with_vocab(
          str(tmp_path_factory.mktemp(name)),
          *_encoder(backbone, heads),
          _VOCAB,
          3,
      )
      for name, (backbone, heads, _) in _MODELS.items()
  }
  return str(glue_dir), model_dirs


@pytest.mark.slow
def test_cli_prints_and_writes_both_rows(fixture_dirs, tmp_path, python_m):
  glue_dir, model_dirs = fixture_dirs
  output_file = tmp_path / 'out' / 'table1.json'
  command = [
      'experiments.attention_concentration',
      f"--init_checkpoint={model_dirs['bert']}",
      '--label=BERT',
      f"--init_checkpoint={model_dirs['convbert']}/encoder",
      '--label=ConvBERT',
      f'--glue_dir={glue_dir}',
      f'--max_seq_length={_SEQ_LENGTH}',
      '--batch_size=2',
      f'--output_file={output_file}',
  ]
  result = python_m(command, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  with open(output_file) as f:
    rows = json.load(f)['rows']
  assert [row['label'] for row in rows] == ['BERT', 'ConvBERT']
  for row, (backbone, _, heads) in zip(rows, _MODELS.values()):
    assert row['backbone'] == backbone
    assert row['paper'] == attention_concentration.published()[backbone]
    assert (row['num_layers'], row['num_heads']) == (_NUM_LAYERS, heads)
    assert row['num_examples'] == len(_PAIRS)
    assert row['num_maps'] == len(_PAIRS) * _NUM_LAYERS * heads
    assert row['num_excluded'] == _NUM_LAYERS * heads  # The 5-token pair.
    assert math.isfinite(row['mean_concentration'])
    assert row['mean_concentration'] > 0 and row['mass_ratio'] > 0
    # Freshly initialised (0.02-stddev) weights attend almost uniformly.
    assert row['mean_concentration'] == pytest.approx(
        row['uniform_concentration'], rel=0.05
    )
    assert [layer['num_maps'] for layer in row['per_layer']] == [
        len(_PAIRS) * heads
    ] * _NUM_LAYERS
    assert f"| {row['label']} | {backbone} | {_NUM_LAYERS} x {heads} |" in (
        result.stdout
    )


@pytest.mark.slow
def test_max_examples_and_window(fixture_dirs):
  glue_dir, model_dirs = fixture_dirs
  results = attention_concentration.run(
      attention_concentration.Settings(
          init_checkpoints=(model_dirs['convbert'],),
          glue_dir=glue_dir,
          max_seq_length=_SEQ_LENGTH,
          max_examples=2,
          window=1,
      )
  )
  (row,) = results['rows']
  assert row['label'] == model_dirs['convbert']
  assert (
      row['num_examples'],
      row['num_maps'],
      row['num_excluded'],
      row['window'],
  ) == (2, 2 * _NUM_LAYERS * 2, 0, 1)
  assert 'ConvBERT 0.608' in attention_concentration.format_table(results)


def test_bad_input_names_the_flag_or_file(
    fixture_dirs, tmp_path, export_encoder_with_vocab
):
  glue_dir, model_dirs = fixture_dirs

  def settings(**overrides):
    fields = dict(
        init_checkpoints=(model_dirs['bert'],),
        glue_dir=glue_dir,
        max_seq_length=_SEQ_LENGTH,
    )
    fields.update(overrides)
    return attention_concentration.Settings(**fields)

  missing = str(tmp_path / 'missing')
  with pytest.raises(FileNotFoundError, match='--init_checkpoint'):
    attention_concentration.run(settings(init_checkpoints=(missing,)))
  with pytest.raises(FileNotFoundError, match='MRPC/dev.tsv'):
    attention_concentration.run(settings(glue_dir=missing))
  with pytest.raises(ValueError, match='--task=wnli'):
    attention_concentration.run(settings(task='wnli'))
  with pytest.raises(ValueError, match='--max_seq_length=32'):
    attention_concentration.run(settings(max_seq_length=32))
  with pytest.raises(ValueError, match='--label'):
    settings(labels=('a', 'b'))
  conv_only = export_encoder_with_vocab(
      str(tmp_path), *_encoder('convbert', 2, conv_only=True), _VOCAB, 3
  )
  with pytest.raises(ValueError, match=r"backbone 'convbert'\): .*conv_only"):
    attention_concentration.run(settings(init_checkpoints=(conv_only,)))
