"""Layer-wise learning-rate decay for fine-tuning (ELECTRA's recipe).

lr(depth) = lr * decay ** (L + 2 - depth): embeddings (and the E -> H
projection) at depth 0, layer k at k + 1, the pooler and everything outside
the encoder at L + 2. Model Garden has no such optimizer, so
`LayerwiseAdamWeightDecay` extends its `AdamWeightDecay` by a per-variable
factor on the whole update (scaling gradients would be undone by Adam).
Depths come from the encoder's layer objects, not name patterns (a shared
ALBERT block gets the deepest, L); multipliers are looked up by name without
a `/replica_<i>` suffix. `bias_correction=False` is the original BERT/ELECTRA
update without Adam's bias correction (the kernels get zero beta powers).
"""

import re
from typing import Dict, Mapping, Optional, Sequence

import tensorflow as tf
import tf_keras

from official.modeling.optimization import legacy_adamw

_REPLICA_SUFFIX = re.compile(r'/replica_\d+(?=:\d+$)')


def canonical_variable_name(name: str) -> str:
  """`name` without a distribution strategy's `/replica_<i>` suffix."""
  return _REPLICA_SUFFIX.sub('', name)


def encoder_layers(encoder: tf_keras.Model) -> Sequence[tf_keras.layers.Layer]:
  """The encoder's transformer layers, input side first (one per depth)."""
  for attribute in ('transformer_layers', 'hidden_layers'):
    layers = getattr(encoder, attribute, None)
    if layers:
      return list(layers)
  raise ValueError(
      f'Encoder {encoder.name!r} ({type(encoder).__name__}) exposes neither '
      '`transformer_layers` nor `hidden_layers`; layer-wise learning-rate '
      'decay needs the per-depth layers.'
  )


def variable_depths(
    model: tf_keras.Model, encoder: tf_keras.Model
) -> Dict[str, int]:
  """Canonical variable name -> depth in [0, L + 2] (see module docstring)."""
  layers = encoder_layers(encoder)
  head_depth = len(layers) + 2
  depth_by_ref = {v.ref(): 0 for v in encoder.trainable_variables}
  pooler = getattr(encoder, 'pooler_layer', None)
  if pooler is not None:
    for variable in pooler.trainable_variables:
      depth_by_ref[variable.ref()] = head_depth
  for index, layer in enumerate(layers):
    for variable in layer.trainable_variables:
      depth_by_ref[variable.ref()] = index + 1
  depths = {}
  for variable in model.trainable_variables:
    depth = depth_by_ref.get(variable.ref(), head_depth)
    name = canonical_variable_name(variable.name)
    if depths.get(name, depth) != depth:
      raise ValueError(
          f'Two variables named {name!r} sit at depths '
          f'{depths[name]} and {depth}.'
      )
    depths[name] = depth
  return depths


def layerwise_multipliers(
    depths: Mapping[str, int], num_layers: int, decay: Optional[float]
) -> Dict[str, float]:
  """Multipliers decay ** (L + 2 - depth); all 1.0 when `decay` is None."""
  if decay is None:
    return {name: 1.0 for name in depths}
  if not 0.0 < decay <= 1.0:
    raise ValueError(
        f'finetuning.layerwise_lr_decay must be in (0, 1], got {decay}.'
    )
  return {
      name: decay ** (num_layers + 2 - depth) for name, depth in depths.items()
  }


@tf_keras.utils.register_keras_serializable(package='official_repro')
class LayerwiseAdamWeightDecay(legacy_adamw.AdamWeightDecay):
  """Model Garden's `AdamWeightDecay` with per-variable learning rates."""

  def __init__(
      self,
      lr_multipliers: Mapping[str, float],
      name: str = 'LayerwiseAdamWeightDecay',
      include_in_weight_decay: Optional[Sequence[str]] = None,
      exclude_from_weight_decay: Optional[Sequence[str]] = None,
      gradient_clip_norm: float = 1.0,
      bias_correction: bool = True,
      **kwargs,
  ):
    """Other `AdamWeightDecay` arguments pass through `kwargs`."""
    super().__init__(
        name=name,
        include_in_weight_decay=include_in_weight_decay,
        exclude_from_weight_decay=exclude_from_weight_decay,
        gradient_clip_norm=gradient_clip_norm,
        **kwargs,
    )
    self.lr_multipliers = dict(lr_multipliers)
    self.bias_correction = bias_correction

  def _multiplier(self, var: tf.Variable) -> float:
    return self.lr_multipliers.get(canonical_variable_name(var.name), 1.0)

  def _scaled_apply_state(self, var, apply_state):
    """`apply_state` with this variable's rates, corrected or not."""
    multiplier = self._multiplier(var)
    if multiplier == 1.0 and self.bias_correction:
      return apply_state
    key = (var.device, var.dtype.base_dtype)
    coefficients = (apply_state or {}).get(key)
    if coefficients is None:
      coefficients = self._fallback_apply_state(*key)
    scaled = dict(coefficients)
    if not self.bias_correction:
      scaled['lr'] = scaled['lr_t']  # The sparse kernels' corrected rate.
      for power in ('beta_1_power', 'beta_2_power'):
        scaled[power] = tf.zeros_like(scaled[power])
    for rate in ('lr_t', 'lr'):
      scaled[rate] = scaled[rate] * multiplier
    return {**(apply_state or {}), key: scaled}

  def _resource_apply_dense(self, grad, var, apply_state=None):
    return super()._resource_apply_dense(
        grad, var, apply_state=self._scaled_apply_state(var, apply_state)
    )

  def _resource_apply_sparse(self, grad, var, indices, apply_state=None):
    return super()._resource_apply_sparse(
        grad,
        var,
        indices,
        apply_state=self._scaled_apply_state(var, apply_state),
    )

  def get_config(self):
    config = super().get_config()
    config.update(
        lr_multipliers=dict(self.lr_multipliers),
        include_in_weight_decay=self._include_in_weight_decay,
        exclude_from_weight_decay=self._exclude_from_weight_decay,
        gradient_clip_norm=self.gradient_clip_norm,
        bias_correction=self.bias_correction,
    )
    return config
