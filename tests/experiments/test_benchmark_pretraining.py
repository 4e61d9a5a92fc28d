"""experiments.benchmark_pretraining: the scaling sweep."""

import json
import os

import pytest

from experiments import benchmark_pretraining

_TINY_MASKED_LM = ('gin/papers/001_ale/bert_small.gin', 'gin/sizes/tiny.gin')


def test_sweep_points_cover_both_axes():
  points = benchmark_pretraining.sweep_points(128, [8, 32], [128, 512], 16)
  assert points == [
      dict(axis='batch_size', batch_size=8, seq_length=128),
      dict(axis='batch_size', batch_size=32, seq_length=128),
      dict(axis='seq_length', batch_size=16, seq_length=128),
      dict(axis='seq_length', batch_size=16, seq_length=512),
  ]


def test_point_bindings_scale_masking_and_positions_with_length():
  at_configured = benchmark_pretraining.point_bindings(
      dict(axis='batch_size', batch_size=64, seq_length=128), 128, 0.15, 512
  )
  assert at_configured == [
      'pretrain_data.train_batch_size = 64',
      'pretrain_data.max_seq_length = 128',
  ]
  longer = benchmark_pretraining.point_bindings(
      dict(axis='seq_length', batch_size=16, seq_length=512), 128, 0.15, 128
  )
  # ELECTRA's convention int((0.15 + 0.005) * 512) = int(79.36).
  assert 'pretrain_data.max_predictions_per_seq = 79' in longer
  assert 'encoder.max_position_embeddings = 512' in longer
  within = benchmark_pretraining.point_bindings(
      dict(axis='seq_length', batch_size=16, seq_length=256), 128, 0.15, 512
  )
  assert not any('max_position_embeddings' in b for b in within)


def test_the_table_is_markdown_with_the_mfu_of_each_variant(capsys):
  result = dict(
      variant='ours',
      jit_compile=True,
      mixed_precision='bfloat16',
      first_step_seconds=12.34,
      first_step_loss=6.0,
      steps_per_second=2.0,
      examples_per_second=64.0,
      tokens_per_second=8192.0,
      train_flops_per_step=5e9,
      peak_host_memory_mb=1234.5,
  )
  benchmark_pretraining._print_table([result], peak=1e11)
  assert capsys.readouterr().out.splitlines() == [
      'matmul peak: 100.0 GFLOP/s',
      '| variant | xla | precision | first step s | first loss | steps/s | '
      'examples/s | tokens/s | MFU % | peak RSS MB |',
      '|---|---|---|---|---|---|---|---|---|---|',
      '| ours | True | bfloat16 | 12.3 | 6.00000 | 2.000 | 64.0 | 8192 | '
      '10.0 | 1234 |',
  ]
  assert result['mfu_percent'] == 10.0


def _fake_result(variant, bindings):
  batch = int(bindings[0].rsplit(' ', 1)[1])
  length = int(bindings[1].rsplit(' ', 1)[1])
  speed = 2.0 if variant == 'ours' else 1.0
  return dict(
      variant=variant,
      batch_size=batch,
      seq_length=length,
      steps_per_second=speed,
      examples_per_second=speed * batch,
      tokens_per_second=speed * batch * length,
      train_flops_per_step=1e6 * batch * length * (1 + length / 512),
      peak_host_memory_mb=100.0 + batch,
  )


@pytest.mark.slow
def test_sweep_measures_every_variant_at_every_point_and_plots(tmp_path):
  measured = []

  def measure(variant, bindings):
    measured.append((variant, tuple(bindings)))
    return _fake_result(variant, bindings)

  sweep = benchmark_pretraining.run_sweep(
      _TINY_MASKED_LM,
      ['pretrain_data.max_seq_length = 16'],
      ['ours', 'stock'],
      [2, 4],
      [16, 256],
      3,
      measure,
  )
  assert [
      (p['axis'], p['batch_size'], p['seq_length']) for p in sweep['points']
  ] == [
      ('batch_size', 2, 16),
      ('batch_size', 4, 16),
      ('seq_length', 3, 16),
      ('seq_length', 3, 256),
  ]
  assert len(measured) == 8
  # tiny.gin has 128 positions: 256 needs more, and its own masking count.
  assert measured[-1] == (
      'stock',
      (
          'pretrain_data.train_batch_size = 3',
          'pretrain_data.max_seq_length = 256',
          'pretrain_data.max_predictions_per_seq = 39',
          'encoder.max_position_embeddings = 256',
      ),
  )
  assert sweep['points'][1]['ours']['examples_per_second'] == 8.0
  assert sweep['matmul_peak_flops'] > 0
  path = str(tmp_path / 'sweep.png')
  benchmark_pretraining.plot_sweep(sweep, path)
  with open(path, 'rb') as f:
    assert f.read(8) == b'\x89PNG\r\n\x1a\n'
  assert os.path.getsize(path) > 10000


@pytest.mark.slow
@pytest.mark.hours  # four minutes of sweeping on 2 cores
def test_sweep_end_to_end_on_a_tiny_model(tmp_path, python_m):
  """Both variants at two batch sizes and two lengths.

  Both variants at two batch sizes and two lengths; training FLOPs per
  token grow with length by the attention products alone.
  """
  output = str(tmp_path / 'sweep.json')
  completed = python_m(
      [
          'experiments.benchmark_pretraining',
          '--sweep',
          *(f'--gin_file={path}' for path in _TINY_MASKED_LM),
          '--gin_param=pretrain_data.max_seq_length = 16',
          '--sweep_batch_sizes=2,4',
          '--sweep_seq_lengths=16,32',
          '--sweep_batch_size=2',
          '--steps=2',
          '--warmup_steps=0',
          '--vocab_size=400',
          f'--work_dir={tmp_path / "work"}',
          f'--output_json={output}',
      ]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  with open(output) as f:
    sweep = json.load(f)
  assert os.path.exists(str(tmp_path / 'sweep.png'))
  by_length = {
      p['seq_length']: p for p in sweep['points'] if p['axis'] == 'seq_length'
  }
  for variant in ('ours', 'stock'):
    for point in sweep['points']:
      assert point[variant]['examples_per_second'] > 0
      # The first step's masked-LM loss over 400 pieces, near ln(400) = 6.
      assert point[variant]['first_step_loss'] > 3.0
      assert point[variant]['batch_size'] == point['batch_size']
      assert point[variant]['seq_length'] == point['seq_length']
    per_token = {
        length: p[variant]['train_flops_per_step'] / (p['batch_size'] * length)
        for length, p in by_length.items()
    }
    # Per token and layer, Q K^T and the weighted sum of values are
    # 2 x 2 x T x hidden forward FLOPs; training is 3 x forward. tiny.gin:
    # 2 layers of hidden 32. Everything else costs the same per token.
    attention_growth = 3 * 2 * 4 * (32 - 16) * 32
    assert per_token[32] - per_token[16] == pytest.approx(
        attention_growth, rel=0.1
    )


def test_reused_records_are_keyed_by_corpus_and_vocabulary(tmp_path):
  key = benchmark_pretraining.records_text_key
  base = key(str(tmp_path / 'books'), None, 8000)
  assert key(str(tmp_path / 'books'), None, 8000) == base
  assert key(str(tmp_path / 'wiki'), None, 8000) != base
  assert key(str(tmp_path / 'books'), None, 4000) != base
  assert key(str(tmp_path / 'books'), str(tmp_path / 'vocab.txt'), 8000) != base
