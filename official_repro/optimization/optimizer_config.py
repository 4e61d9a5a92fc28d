"""Gin front end to Model Garden's optimizer factory.

Model Garden's `OptimizationConfig` already builds LAMB/Adam/AdamW with
warmup and polynomial decay; this module writes the schedule once and makes
the optimizer's fields one gin configurable, one line per table cell.
"""

from typing import Any, Dict, Optional, Sequence

import gin

from official.modeling import optimization

from official_repro.common import cli

# Variables whose names contain these are excluded from weight decay, as in
# BERT, ELECTRA and ALBERT ("weight decay 0.01 excluding LayerNorm and bias").
DEFAULT_WEIGHT_DECAY_EXCLUSIONS = ('LayerNorm', 'layer_norm', 'bias')

_OPTIMIZERS = ('lamb', 'adamw', 'adam')


def learning_rate_config(
    train_steps: int,
    learning_rate: float,
    warmup_steps: int = 0,
    end_learning_rate: float = 0.0,
    decay_power: float = 1.0,
) -> Dict[str, Any]:
  """`OptimizationConfig` schedule: Model Garden's linear warmup, then decay."""
  if train_steps <= 0:
    raise cli.UserError(f'train_steps must be positive, got {train_steps}.')
  if not 0 <= warmup_steps <= train_steps:
    raise cli.UserError(
        f'warmup_steps={warmup_steps} must be in '
        f'[0, train_steps={train_steps}].'
    )
  return {
      'learning_rate': {
          'type': 'polynomial',
          'polynomial': {
              'initial_learning_rate': learning_rate,
              'decay_steps': train_steps,
              'end_learning_rate': end_learning_rate,
              'power': decay_power,
          },
      },
      'warmup': {
          'type': 'linear',
          'linear': {'warmup_steps': warmup_steps, 'warmup_learning_rate': 0.0},
      },
  }


@gin.configurable('optimization')
def optimization_config(
    train_steps: int,
    optimizer: str = 'lamb',
    learning_rate: float = gin.REQUIRED,
    warmup_steps: int = 0,
    end_learning_rate: float = 0.0,
    decay_power: float = 1.0,
    beta_1: float = 0.9,
    beta_2: float = 0.999,
    epsilon: float = 1e-6,
    weight_decay_rate: float = 0.0,
    exclude_from_weight_decay: Sequence[str] = DEFAULT_WEIGHT_DECAY_EXCLUSIONS,
    global_clipnorm: Optional[float] = None,
) -> optimization.OptimizationConfig:
  """The optimizer ('lamb', 'adamw' or 'adam'), schedule and warmup config."""
  if optimizer not in _OPTIMIZERS:
    raise cli.UserError(
        f'optimization.optimizer must be one of {_OPTIMIZERS}, '
        f'got {optimizer!r}.'
    )
  exclusions = list(exclude_from_weight_decay)
  optimizer_fields = dict(
      beta_1=beta_1,
      beta_2=beta_2,
      epsilon=epsilon,
      global_clipnorm=global_clipnorm,
  )
  if optimizer in ('lamb', 'adamw'):
    optimizer_fields.update(
        weight_decay_rate=weight_decay_rate,
        exclude_from_weight_decay=exclusions,
    )
  if optimizer == 'lamb':
    optimizer_fields.update(exclude_from_layer_adaptation=exclusions)
  elif optimizer == 'adam' and weight_decay_rate:
    raise cli.UserError(
        'optimization.weight_decay_rate needs optimizer lamb or '
        f'adamw, got {optimizer!r}.'
    )
  schedule = learning_rate_config(
      train_steps, learning_rate, warmup_steps, end_learning_rate, decay_power
  )
  return optimization.OptimizationConfig(
      {
          'optimizer': {'type': optimizer, optimizer: optimizer_fields},
          **schedule,
      }
  )
