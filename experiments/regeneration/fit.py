"""Will a paper-scale run fit its TPU: per-replica batch and memory.

A batch that does not divide over the replicas (TensorCores on v2/v3, chips
later) is refused. Memory is an analytic estimate: float32 variables with
gradients and slots; per layer (8A + 2)·s·b·h + 2A·s·b·i + (2A + 1)·a·s²·b
activation bytes (Korthikanti et al. 2022 for A = 2, i = 4h); float32 MLM
logits 3·4·b·predictions·vocabulary. XLA buffers are not modelled, so only
an estimate over the HBM is refused.
"""

import dataclasses
import math
from typing import Optional, Tuple

from official_repro.metrics import flops

# HBM per replica (GiB) and peak bfloat16 TFLOP/s per replica, by TPU family;
# `per_chip` families count one replica per chip (2 TensorCores each for v4
# and v5p, whose accelerator type counts TensorCores).
_FAMILIES = {
    'v2': dict(hbm_gib=8, peak_tflops=22.5, cores_per_replica=1),
    'v3': dict(hbm_gib=16, peak_tflops=52.5, cores_per_replica=1),
    'v4': dict(hbm_gib=32, peak_tflops=275, cores_per_replica=2),
    'v5p': dict(hbm_gib=95, peak_tflops=459, cores_per_replica=2),
    'v5litepod': dict(hbm_gib=16, peak_tflops=197, cores_per_replica=1),
    'v6e': dict(hbm_gib=32, peak_tflops=918, cores_per_replica=1),
}
_V3_8_PEAK_TFLOPS = 8 * _FAMILIES['v3']['peak_tflops']
_OPTIMIZER_SLOTS = dict(adamw=2, adam=2, lamb=2, sgd=0)
_GIB = 1024**3


@dataclasses.dataclass(frozen=True)
class Accelerator:
  """A TPU accelerator type as the plan needs it."""

  name: str
  replicas: int
  hbm_gib: float
  peak_tflops: float

  @property
  def family(self) -> str:
    return self.name.rpartition('-')[0]

  @property
  def hosts(self) -> int:
    """TPU VM hosts of the slice (Cloud TPU's rule, as run_tpu.sh's)."""
    size = int(self.name.rpartition('-')[2])
    if self.family in ('v5litepod', 'v6e'):
      return 1 if size <= 8 else size // 4
    return (size + 7) // 8

  def hours_from_v3_8(self, v3_8_hours: float) -> float:
    """Hours at this type's peak bfloat16 rate, from hours on a v3-8."""
    return v3_8_hours * _V3_8_PEAK_TFLOPS / (self.replicas * self.peak_tflops)


def accelerator(name: str) -> Accelerator:
  """The accelerator type `name` ('v3-8', 'v4-32'); ValueError if unknown."""
  family, _, size = name.rpartition('-')
  if family not in _FAMILIES or not size.isdigit() or int(size) < 1:
    raise ValueError(
        f'--accelerator_type {name!r}: expected VERSION-SIZE with VERSION '
        f'one of {", ".join(_FAMILIES)} (e.g. v3-8).'
    )
  spec = _FAMILIES[family]
  replicas = int(size) // spec['cores_per_replica']
  if replicas < 1:
    raise ValueError(f'--accelerator_type {name!r} has no whole chip.')
  return Accelerator(name, replicas, spec['hbm_gib'], spec['peak_tflops'])


def per_replica_batch(global_batch: int, device: Accelerator, what: str) -> int:
  """The global batch over the replicas (a ValueError if it does not divide)."""
  if global_batch % device.replicas:
    raise ValueError(
        f'{what}: the global batch {global_batch} does not divide over the '
        f'{device.replicas} replicas of a {device.name}; choose an '
        '--accelerator_type whose replicas divide it.'
    )
  return global_batch // device.replicas


def layer_activation_bytes(
    net: flops.NetworkShape, batch: int, bytes_per_activation: int = 2
) -> float:
  """Stored activations of one transformer layer of `net` (see docstring)."""
  a = bytes_per_activation
  s, h, i = net.seq_length, net.hidden, net.intermediate
  return (
      (8 * a + 2) * s * batch * h
      + 2 * a * s * batch * i
      + (2 * a + 1) * net.heads * s * s * batch
  )


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
  """One replica's memory in a training step, in bytes."""

  state: float
  activations: float
  logits: float

  @property
  def total(self) -> float:
    return self.state + self.activations + self.logits


def estimate(
    report: flops.ComputeReport,
    trainable_parameters: int,
    optimizer: str,
    batch: int,
    bytes_per_activation: int = 2,
) -> MemoryEstimate:
  """One replica's memory for `report`'s training step at `batch`."""
  slots = _OPTIMIZER_SLOTS.get(optimizer, 2)
  state = trainable_parameters * 4 * (2 + slots)
  activations = sum(
      network.shape.layers
      * layer_activation_bytes(network.shape, batch, bytes_per_activation)
      for network in report.networks.values()
  )
  logits = sum(
      3 * 4 * batch * report.max_predictions * network.shape.vocab_size
      for network in report.networks.values()
      if any('mlm' in head for head in network.heads)
  )
  return MemoryEstimate(state, activations, logits)


@dataclasses.dataclass(frozen=True)
class Fit:
  """A run's per-replica batch and memory on its accelerator."""

  accelerator: str
  per_replica_batch: int
  memory: MemoryEstimate
  hbm_gib: float
  largest_batch: int

  @property
  def fits(self) -> bool:
    return self.memory.total <= self.hbm_gib * _GIB

  def describe(self) -> str:
    return (
        f'{self.per_replica_batch} per replica, about '
        f'{self.memory.total / _GIB:.1f} of {self.hbm_gib:g} GiB'
    )


def check(
    report: flops.ComputeReport,
    trainable_parameters: int,
    optimizer: str,
    device: Accelerator,
    what: str,
) -> Fit:
  """The fit of a pretraining run on `device` (refusals are ValueErrors)."""
  batch = per_replica_batch(report.batch_size, device, what)
  memory = estimate(report, trainable_parameters, optimizer, batch)
  one = estimate(report, trainable_parameters, optimizer, 1)
  per_example = one.total - one.state
  largest = int((device.hbm_gib * _GIB - memory.state) // per_example)
  return Fit(device.name, batch, memory, device.hbm_gib, max(largest, 0))


def refusal(fit: Fit, global_batch: int, what: str) -> Optional[str]:
  """Why `fit` cannot run and the fix, or None when it fits."""
  if fit.fits:
    return None
  if fit.largest_batch < 1:
    return (
        f'{what}: its weights, gradients and optimizer slots alone '
        f'({fit.memory.state / _GIB:.1f} GiB) exceed the {fit.hbm_gib:g} GiB '
        f'of one {fit.accelerator} replica; choose a TPU family with more '
        'memory per replica.'
    )
  replicas = math.ceil(global_batch / fit.largest_batch)
  return (
      f'{what}: {fit.describe()} does not fit a {fit.accelerator} replica; '
      f'at most {fit.largest_batch} examples per replica fit, so the global '
      f'batch {global_batch} needs at least {replicas} replicas (a larger '
      f'--accelerator_type, e.g. {_larger_slice(fit.accelerator, replicas)})'
      ', or a smaller pretrain_data.train_batch_size.'
  )


def _larger_slice(name: str, replicas: int) -> str:
  """The smallest power-of-two slice of `name`'s family with `replicas`."""
  family = name.rpartition('-')[0]
  cores_per_replica = _FAMILIES[family]['cores_per_replica']
  size = 8
  while size // cores_per_replica < replicas:
    size *= 2
  return f'{family}-{size}'


def parse_types(items: Tuple[str, ...]) -> Tuple[str, dict]:
  """(default type, {run name: type}) of --accelerator_type's items.

  Raises:
    ValueError: two defaults, or a bad type.
  """
  default, per_run = None, {}
  for item in items:
    run, has_run, name = item.rpartition('=')
    if has_run:
      per_run[run] = name
    elif default is not None:
      raise ValueError(
          f'--accelerator_type: two defaults ({default}, {name}); give '
          'one TYPE and RUN=TYPE items for the others.'
      )
    else:
      default = name
    accelerator(name)
  return default or 'v3-8', per_run
