"""investigations/profile_pretraining.py: reading the profiler's XSpace."""

import json

import pytest
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=g-direct-tensorflow-import

from experiments.investigations import profile_pretraining

pytestmark = pytest.mark.slow


def _space(events):
  """An XSpace with one host plane; `events` are (name, duration_ps)."""
  space = xplane_pb2.XSpace()
  plane = space.planes.add(name='/host:CPU')
  line = plane.lines.add(name='tf_Compute/1')
  for index, (name, duration) in enumerate(events, start=1):
    plane.event_metadata[index].id = index
    plane.event_metadata[index].name = name
    line.events.add(metadata_id=index, duration_ps=duration)
  space.planes.add(name='Task Environment')
  return space


_EVENTS = [
    ('model/layer/einsum/Einsum:_MklEinsum', 6_000_000_000),
    ('gradient_tape/model/layer/einsum/Einsum:Einsum', 8_000_000_000),
    ('model/Softmax:_MklSoftmax', 2_000_000_000),
    ('LAMB/LAMB/update_3/mul_1:Mul', 3_000_000_000),
    ('model/gelu/mul:Mul', 1_000_000_000),
    ('ExecutorState::Process', 50_000_000_000),
    ('python_function', 70_000_000_000),
]


def test_op_events_keep_host_ops_only():
  events = list(profile_pretraining.op_events(_space(_EVENTS)))
  assert [(name, op_type) for name, op_type, _ in events] == [
      ('model/layer/einsum/Einsum', '_MklEinsum'),
      ('gradient_tape/model/layer/einsum/Einsum', 'Einsum'),
      ('model/Softmax', '_MklSoftmax'),
      ('LAMB/LAMB/update_3/mul_1', 'Mul'),
      ('model/gelu/mul', 'Mul'),
  ]


def test_a_device_trace_is_refused():
  space = _space(_EVENTS)
  device = space.planes.add(name='/device:GPU:0')
  device.event_metadata[1].name = 'kernel:MatMul'
  device.lines.add(name='stream').events.add(metadata_id=1, duration_ps=10**12)
  with pytest.raises(ValueError, match="device plane '/device:GPU:0'"):
    list(profile_pretraining.op_events(space))


def test_summary_per_step_by_pass_category_and_type():
  summary = profile_pretraining.summarize(
      profile_pretraining.op_events(_space(_EVENTS)), steps=2
  )
  # 20 ms of ops over 2 steps.
  assert summary['op_ms_per_step'] == pytest.approx(10.0)
  by_pass = {r['name']: r['ms_per_step'] for r in summary['by_pass']}
  assert by_pass == pytest.approx(
      dict(forward=4.5, backward=4.0, optimizer=1.5)
  )
  by_category = {r['name']: r for r in summary['by_category']}
  assert by_category['matmul']['ms_per_step'] == pytest.approx(7.0)
  assert by_category['matmul']['share'] == pytest.approx(0.7)
  assert by_category['optimizer']['ms_per_step'] == pytest.approx(1.5)
  assert by_category['element-wise']['ms_per_step'] == pytest.approx(0.5)
  assert by_category['softmax and cross-entropy']['calls_per_step'] == 0.5
  # By type the oneDNN prefix is dropped and the optimizer's Mul is a Mul.
  by_type = {r['name']: r for r in summary['by_type']}
  assert by_type['Einsum']['ms_per_step'] == pytest.approx(7.0)
  assert by_type['Mul']['ms_per_step'] == pytest.approx(2.0)
  assert by_type['Mul']['category'] == 'element-wise'
  assert summary['by_type'][0]['name'] == 'Einsum'


@pytest.mark.parametrize(
    'name, op_type, expected',
    [
        ('m/MatMul', '_MklMatMul', 'matmul'),
        ('m/dense/Tensordot', '_MklFusedMatMul', 'matmul'),
        (
            'm/loss',
            'SparseSoftmaxCrossEntropyWithLogits',
            'softmax and cross-entropy',
        ),
        ('m/embeddings/Gather', 'ResourceGather', 'gather and scatter'),
        (
            'gradient_tape/m/embeddings',
            'UnsortedSegmentSum',
            'gather and scatter',
        ),
        ('m/sample', 'StatelessRandomUniformV2', 'random'),
        ('m/transpose', 'Transpose', 'layout'),
        ('m/Sum', 'Sum', 'reduction'),
        ('IteratorGetNext', 'IteratorGetNext', 'input pipeline'),
        ('m/ReadVariableOp', 'ReadVariableOp', 'variables'),
        ('AdamWeightDecay/update/mul', 'Mul', 'optimizer'),
        ('clip_by_global_norm/mul', 'Mul', 'optimizer'),
        ('m/gelu/Erf', 'Erf', 'element-wise'),
    ],
)
def test_categories(name, op_type, expected):
  assert profile_pretraining.category(name, op_type) == expected


def test_report_puts_variants_side_by_side():
  summary = profile_pretraining.summarize(
      profile_pretraining.op_events(_space(_EVENTS)), steps=2
  )
  ours = dict(summary, variant='ours', step_ms=9.0)
  stock = dict(summary, variant='stock', step_ms=12.0)
  report = profile_pretraining.format_report([ours, stock], top=2)
  assert '| step ms (wall) | 9.0 | 12.0 |' in report
  assert '| backward | 4.00 (40.0%) | 4.00 (40.0%) |' in report
  assert '| matmul | 7.00 (70.0%) | 7.00 (70.0%) |' in report
  assert '| Einsum | matmul | 7.00 (70.0%) | 7.00 (70.0%) |' in report
  assert 'Softmax |' not in report.split('Top 2 op types')[1]


def test_cli_profiles_both_variants_of_a_tiny_electra(tmp_path, python_m):
  output_dir = tmp_path / 'profile'
  completed = python_m(
      [
          'experiments.investigations.profile_pretraining',
          '--gin_file=gin/papers/001_ale/electra_small.gin',
          '--gin_file=gin/sizes/tiny.gin',
          '--gin_param=pretrain_data.max_seq_length = 16',
          '--gin_param=pretrain_data.train_batch_size = 4',
          '--gin_param=electra.temperature = 1.0',
          # The stock variant ties only the word table (the command refuses
          # a comparison otherwise).
          '--gin_param=electra.tie_embedding_block = False',
          '--steps=2',
          '--warmup_steps=0',
          '--vocab_size=400',
          f'--work_dir={tmp_path / "work"}',
          f'--output_dir={output_dir}',
      ]
  )
  assert completed.returncode == 0, completed.stderr[-3000:]
  for variant in ('ours', 'stock'):
    with open(output_dir / f'{variant}.json') as f:
      summary = json.load(f)
    assert summary['steps'] == 2 and summary['batch_size'] == 4
    passes = {r['name'] for r in summary['by_pass']}
    assert passes == {'forward', 'backward', 'optimizer'}
    # Which category leads depends on the machine and its load: only that
    # the matmuls were found and classified.
    assert 'matmul' in {row['category'] for row in summary['by_type']}
    assert summary['step_ms'] > 0
  assert '| step ms (wall) |' in (output_dir / 'profile.md').read_text()
