"""Per-task fine-tuning hyperparameters as papers state them (gin `finetuning`).

Papers give fine-tuning settings in epochs, batch size and learning rate per
GLUE task (001 Table VI, 003 Table 6, 004 Table 5); training loops need
steps. `FinetuningSchedule` holds one task's row and converts it.
"""

import dataclasses
import math
from typing import Optional

import gin

GLUE_TASKS = ('cola', 'sst2', 'mrpc', 'stsb', 'qqp', 'mnli', 'qnli', 'rte')


@gin.configurable('finetuning')
@dataclasses.dataclass(frozen=True)
class FinetuningSchedule:
  """One task's fine-tuning hyperparameters.

  Attributes:
    task: GLUE task name (one of `GLUE_TASKS`).
    learning_rate: peak learning rate.
    train_batch_size: global batch size.
    num_epochs: passes over the training set.
    warmup_fraction: share of the steps with linear warmup.
    layerwise_lr_decay: per-layer learning-rate decay factor (None: off).
  """
  task: str = gin.REQUIRED
  learning_rate: float = gin.REQUIRED
  train_batch_size: int = gin.REQUIRED
  num_epochs: float = gin.REQUIRED
  warmup_fraction: float = 0.0
  layerwise_lr_decay: Optional[float] = None

  def __post_init__(self):
    if self.task not in GLUE_TASKS:
      raise ValueError(f'finetuning.task must be one of {GLUE_TASKS}, got '
                       f'{self.task!r}.')
    if self.train_batch_size <= 0 or self.num_epochs <= 0:
      raise ValueError('finetuning.train_batch_size and num_epochs must be '
                       f'positive, got {self.train_batch_size} and '
                       f'{self.num_epochs}.')
    if not 0.0 <= self.warmup_fraction < 1.0:
      raise ValueError('finetuning.warmup_fraction must be in [0, 1), got '
                       f'{self.warmup_fraction}.')

  def train_steps(self, num_train_examples: int) -> int:
    """Optimizer steps for `num_epochs` over `num_train_examples`."""
    return math.ceil(self.num_epochs * num_train_examples /
                     self.train_batch_size)

  def warmup_steps(self, num_train_examples: int) -> int:
    return int(self.warmup_fraction * self.train_steps(num_train_examples))
