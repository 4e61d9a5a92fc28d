"""Layer-wise learning-rate decay for fine-tuning (ELECTRA's recipe).

ELECTRA, SCRIPT (004 Table 5) and ConvBERT fine-tune with a learning rate that
shrinks geometrically towards the input:

    lr(depth) = lr * decay ** (L + 2 - depth)

with the embeddings (and the E -> H projection) at depth 0, transformer layer
k (0-based) at depth k + 1, and the task head at depth L + 2 (full rate).
Model Garden has no such optimizer, so `LayerwiseAdamWeightDecay` extends its
`AdamWeightDecay` (Adam with decoupled weight decay, as BERT and ELECTRA
fine-tune) by a per-variable multiplier on the learning rate. The multiplier
scales the whole update, Adam step and weight decay alike, as ELECTRA's
optimizer does; scaling the gradient instead would be undone by Adam's
normalisation.

Depths are assigned from the encoder's layer objects, not from name patterns:
  * variables of `encoder.transformer_layers[k]` (Model Garden `BertEncoder`)
    or `encoder.hidden_layers[k]` (`EncoderScaffold`) get depth k + 1. A layer
    object applied at several depths (ALBERT's one shared block) gets the
    deepest of them, L, the rate of the layer nearest the head;
  * the encoder's pooler is never trained by ELECTRA-style pretraining and is
    part of the classifier, so it gets the head's depth L + 2, as in ELECTRA
    where only embeddings and encoder layers are decayed;
  * all other encoder variables (word, position and type embeddings, their
    LayerNorm, the E -> H projection) get depth 0;
  * every variable outside the encoder (task heads, CRF transitions) gets
    depth L + 2.
The optimizer looks multipliers up by variable name (with a replica suffix
such as `/replica_1` removed, so MirroredStrategy's per-device copies resolve
to the same entry); a variable it does not know gets 1.0.

`bias_correction=False` is the update of the original BERT and ELECTRA
fine-tuning code (`AdamWeightDecayOptimizer`), which has no Adam bias
correction: its step at step t is `(1 - beta_1^t) / sqrt(1 - beta_2^t)`
times Keras' (3.2 at t = 1, falling towards 1 over thousands of steps).
TensorFlow's Adam kernels apply the correction from the `beta_1^t` and
`beta_2^t` they are given, so the optimizer gives them 0.
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
  """Depth of every trainable variable of `model` (see module docstring).

  Args:
    model: the fine-tuning model (encoder plus task head).
    encoder: the encoder inside `model`.

  Returns:
    Canonical variable name -> depth in [0, L + 2].

  Raises:
    ValueError: two variables share a name but not a depth (the optimizer
      could not tell them apart).
  """
  layers = encoder_layers(encoder)
  head_depth = len(layers) + 2
  depth_by_ref = {}
  for variable in encoder.trainable_variables:
    depth_by_ref[variable.ref()] = 0
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
        f'finetuning.layerwise_lr_decay must be in (0, 1], got ' f'{decay}.'
    )
  return {
      name: decay ** (num_layers + 2 - depth) for name, depth in depths.items()
  }


@tf_keras.utils.register_keras_serializable(package='official_repro')
class LayerwiseAdamWeightDecay(legacy_adamw.AdamWeightDecay):
  """Model Garden's `AdamWeightDecay` with a per-variable learning-rate factor.

  Its config also holds the weight-decay include/exclude patterns and the
  gradient clip norm, which `AdamWeightDecay.get_config` leaves out, so that
  `from_config(get_config())` rebuilds the same optimizer.

  Attributes:
    lr_multipliers: canonical variable name -> multiplier of the learning
      rate for that variable's update (1.0 when absent).
  """

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
    """Adam with decoupled weight decay and per-variable learning rates.

    Args:
      lr_multipliers: see the class attribute.
      name: the optimizer's name.
      include_in_weight_decay: variable-name patterns always decayed.
      exclude_from_weight_decay: variable-name patterns never decayed.
      gradient_clip_norm: clip gradients to this global norm (0: off).
      bias_correction: Adam's bias correction; False updates as the
        original BERT/ELECTRA code does (module docstring).
      **kwargs: other `AdamWeightDecay` arguments (`learning_rate`,
        `weight_decay_rate`, `beta_1`, `epsilon`, ...).
    """
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
