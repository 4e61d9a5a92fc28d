"""Gin front end to Model Garden's optimizer factory.

Every paper in this repository pretrains with LAMB (or Adam/AdamW for the
references), linear warmup and linear decay, and fine-tunes with the same
schedule. Model Garden's `OptimizationConfig` already builds all of these
(`OptimizerFactory`, type `lamb` is the successor of TF-Addons' LAMB); this
module only writes the schedule once (`learning_rate_config`) and exposes the
optimizer's fields as one gin configurable so that each paper's
hyperparameter table maps to one gin line per cell.
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
  """The schedule part of an `OptimizationConfig`: warmup, then decay.

  The schedule decays polynomially (`decay_power` 1 is linear) from
  `learning_rate` at step 0 to `end_learning_rate` at `train_steps`; during the
  first `warmup_steps` Model Garden's linear warmup replaces it with a ramp
  from 0 to the decayed value at `warmup_steps`. BERT's and ELECTRA's TF1
  code multiply the decay by `min(1, t / warmup_steps)` instead
  (`warmup_times_decay`, which fine-tuning can select): at step t of the
  warmup the ramp's rate is `(1 - W/T) / (1 - t/T)` times theirs, lower by up
  to `warmup_steps / train_steps` (6% for 001's 10k of 163k); both reach the
  same rate at `warmup_steps`.

  Args:
    train_steps: total optimizer steps; the decay horizon.
    learning_rate: peak learning rate.
    warmup_steps: linear warmup steps.
    end_learning_rate: learning rate at `train_steps`.
    decay_power: power of the polynomial decay.

  Returns:
    The `learning_rate` and `warmup` entries of an `OptimizationConfig`.

  Raises:
    ValueError: `train_steps` not positive or `warmup_steps` outside
      `[0, train_steps]`.
  """
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
  """Builds the optimizer, schedule and warmup config.

  The schedule is `learning_rate_config`'s.

  Args:
    train_steps: total optimizer steps; the decay horizon.
    optimizer: 'lamb', 'adamw' or 'adam'.
    learning_rate: peak learning rate.
    warmup_steps: linear warmup steps.
    end_learning_rate: learning rate at `train_steps`.
    decay_power: power of the polynomial decay.
    beta_1: first-moment decay.
    beta_2: second-moment decay.
    epsilon: denominator epsilon.
    weight_decay_rate: decoupled weight decay (LAMB, AdamW).
    exclude_from_weight_decay: variable-name substrings without weight decay;
      also excluded from LAMB's layer adaptation, as in the reference LAMB.
    global_clipnorm: clip gradients to this global norm, if set.

  Returns:
    A Model Garden `OptimizationConfig`.

  Raises:
    ValueError: for an unknown optimizer or inconsistent step counts.
  """
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
  if optimizer == 'lamb':
    optimizer_fields.update(
        weight_decay_rate=weight_decay_rate,
        exclude_from_weight_decay=exclusions,
        exclude_from_layer_adaptation=exclusions,
    )
  elif optimizer == 'adamw':
    optimizer_fields.update(
        weight_decay_rate=weight_decay_rate,
        exclude_from_weight_decay=exclusions,
    )
  elif weight_decay_rate:
    raise cli.UserError(
        'optimization.weight_decay_rate needs optimizer lamb or '
        f'adamw, got {optimizer!r}.'
    )
  return optimization.OptimizationConfig(
      {
          'optimizer': {'type': optimizer, optimizer: optimizer_fields},
          **learning_rate_config(
              train_steps,
              learning_rate,
              warmup_steps,
              end_learning_rate,
              decay_power,
          ),
      }
  )
