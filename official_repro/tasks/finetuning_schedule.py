"""Fine-tuning hyperparameters and reporting protocol, as papers state them.

`FinetuningSchedule` (gin `finetuning`) holds one task's row of a paper's
table (epochs, batch size, learning rate) and converts it to steps.
`RunProtocol` (gin `run_protocol`): how many seeds, which evaluation of a run
counts and how runs aggregate into the reported number.
"""

import dataclasses
import math
from typing import Optional

import gin

from official_repro.common import cli
from official_repro.metrics import aggregation
from official_repro.tasks import finetuning_registry

DATA_ORDERS = ('reshuffle', 'original')


@gin.configurable('finetuning')
@dataclasses.dataclass(frozen=True)
class FinetuningSchedule:
  """One task's fine-tuning hyperparameters.

  `task` is a `finetuning_registry` name; `warmup_fraction` the share of
  steps warming up; `eval_batch_size` None: `train_batch_size`. The last
  four follow the original code (see `finetuning_base`).
  """

  task: str = gin.REQUIRED
  learning_rate: float = gin.REQUIRED
  train_batch_size: int = gin.REQUIRED
  num_epochs: float = gin.REQUIRED
  warmup_fraction: float = 0.0
  layerwise_lr_decay: Optional[float] = None
  max_seq_length: int = 128
  weight_decay_rate: float = 0.0
  adam_epsilon: float = 1e-6
  eval_batch_size: Optional[int] = None
  adam_bias_correction: bool = True
  warmup_times_decay: bool = False
  summed_loss: bool = False
  data_order: str = 'reshuffle'

  def __post_init__(self):
    tasks = finetuning_registry.task_names()
    if self.task not in tasks:
      raise cli.UserError(
          f'finetuning.task must be one of {tasks}, got ' f'{self.task!r}.'
      )
    if self.train_batch_size <= 0 or self.num_epochs <= 0:
      raise cli.UserError(
          'finetuning.train_batch_size and num_epochs must be '
          f'positive, got {self.train_batch_size} and '
          f'{self.num_epochs}.'
      )
    if self.data_order not in DATA_ORDERS:
      raise cli.UserError(
          f'finetuning.data_order must be one of {DATA_ORDERS}, got '
          f'{self.data_order!r}.'
      )
    if not 0.0 <= self.warmup_fraction < 1.0:
      raise cli.UserError(
          'finetuning.warmup_fraction must be in [0, 1), got '
          f'{self.warmup_fraction}.'
      )

  def train_steps(self, num_train_examples: int) -> int:
    """Optimizer steps for `num_epochs` over `num_train_examples`."""
    return math.ceil(
        self.num_epochs * num_train_examples / self.train_batch_size
    )

  def warmup_steps(self, num_train_examples: int) -> int:
    return int(self.warmup_fraction * self.train_steps(num_train_examples))

  def steps_per_epoch(self, num_train_examples: int) -> int:
    return math.ceil(num_train_examples / self.train_batch_size)


@gin.configurable('run_protocol')
@dataclasses.dataclass(frozen=True)
class RunProtocol:
  """How a paper reports fine-tuning over seeds.

  Attributes:
    num_runs: runs (seeds 0 .. num_runs - 1) per task.
    aggregation: 'max', 'median' or 'mean' of the runs' scores.
    selection: 'best' evaluation of a run (epoch ends) or 'last'.
    stsb_metric: 'spearman', 'pearson' or 'corr' (their mean) for STS-B.
    deterministic: a resumed run ends bit-identical to an uninterrupted one
      (otherwise it draws other dropout masks).
  """

  num_runs: int = 1
  aggregation: str = 'mean'
  selection: str = 'last'
  stsb_metric: str = 'spearman'
  deterministic: bool = False

  def __post_init__(self):
    if self.num_runs < 1:
      raise cli.UserError(
          f'run_protocol.num_runs must be >= 1, got ' f'{self.num_runs}.'
      )
    if self.aggregation not in aggregation.AGGREGATIONS:
      raise cli.UserError(
          f'run_protocol.aggregation must be one of '
          f'{aggregation.AGGREGATIONS}, got {self.aggregation!r}.'
      )
    if self.selection not in aggregation.SELECTIONS:
      raise cli.UserError(
          f'run_protocol.selection must be one of {aggregation.SELECTIONS}, '
          f'got {self.selection!r}.'
      )
