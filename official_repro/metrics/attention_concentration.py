"""Diagonal concentration of attention maps (002 rebuttal, Table 1).

The ConvBERT rebuttal measures how local self-attention is. For one attention
map M (row i: query, column j: key, rows summing to 1) and a window w (4 in
the rebuttal):

    C(M) = sum_{|i - j| <= w} M_ij / sum_{|i - j| > w} M_ij

and reports the "average concentration" on MRPC: 0.941 for BERT and 0.608
for ConvBERT (whose self-attention heads have the convolution heads beside
them to model local dependencies, so they attend less locally).

Choices made here, which the rebuttal does not state:
  * Only real tokens count: both sums run over query rows i and key columns j
    whose input mask is 1. Rows are not renormalised; a masked softmax puts
    (numerically) zero mass on padding keys, so a real row already sums to 1
    over the real keys.
  * A map whose far mass is zero has no C and is excluded and counted. This
    is always the case when the real length is at most w + 1 (no pair is
    more than w apart; an MRPC pair has at least 5 tokens, so with w = 4
    only the shortest can be affected), and otherwise only for a map that
    puts exactly no mass off the band.
  * The headline is the mean of C over maps (every example, layer and head
    with a C). The ratio of the total near mass to the total far mass over
    the same maps is reported beside it; it weighs long sequences more and
    is not dominated by a few very local maps.
"""

import dataclasses
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import numpy as np

DEFAULT_WINDOW = 4


class MapConcentration(NamedTuple):
  """Per-map masses and concentration; every field is `[batch, heads]`.

  Attributes:
    near_mass: sum of M_ij over real i, j with |i - j| <= window.
    far_mass: sum of M_ij over real i, j with |i - j| > window.
    concentration: near_mass / far_mass; NaN where `included` is False.
    included: whether the map has a C (far_mass > 0).
  """

  near_mass: np.ndarray
  far_mass: np.ndarray
  concentration: np.ndarray
  included: np.ndarray


def map_concentration(
    attention_probs: Any, input_mask: Any, window: int = DEFAULT_WINDOW
) -> MapConcentration:
  """Near- and far-diagonal attention mass of every map in a batch.

  Args:
    attention_probs: float `[batch, heads, T, T]` attention probabilities,
      query positions on axis 2 and key positions on axis 3 (a NumPy array
      or an eager tensor).
    input_mask: `[batch, T]`, 1 for real tokens and 0 for padding.
    window: the largest |i - j| that counts as near the diagonal.

  Returns:
    A `MapConcentration` of float64 `[batch, heads]` arrays (bool for
    `included`).

  Raises:
    ValueError: mismatched shapes or a negative window.
  """
  probs = np.asarray(attention_probs, dtype=np.float64)
  mask = np.asarray(input_mask, dtype=np.float64)
  if probs.ndim != 4 or probs.shape[2] != probs.shape[3]:
    raise ValueError(
        f'attention_probs must be [batch, heads, T, T], got '
        f'shape {probs.shape}.'
    )
  if mask.shape != (probs.shape[0], probs.shape[2]):
    raise ValueError(
        f'input_mask must be [batch, T] = '
        f'{[probs.shape[0], probs.shape[2]]}, got shape '
        f'{list(mask.shape)}.'
    )
  if window < 0:
    raise ValueError(f'window must be >= 0, got {window}.')
  positions = np.arange(probs.shape[2])
  near_band = np.abs(positions[:, None] - positions[None, :]) <= window
  real_pairs = mask[:, :, None] * mask[:, None, :]  # [batch, T, T]
  masked = probs * real_pairs[:, None]
  near = np.sum(masked * near_band, axis=(2, 3))
  far = np.sum(masked * ~near_band, axis=(2, 3))
  included = far > 0
  concentration = np.full(near.shape, np.nan)
  np.divide(near, far, out=concentration, where=included)
  return MapConcentration(near, far, concentration, included)


def uniform_attention(input_mask: Any) -> np.ndarray:
  """Maps that spread every real query's attention evenly over real keys.

  Their concentration is the reference point of "no locality": it depends
  only on the sequence lengths (about 2w / length for long sequences).

  Args:
    input_mask: `[batch, T]`, 1 for real tokens and 0 for padding.

  Returns:
    float64 `[batch, 1, T, T]`; row i of example b is `mask[b] / length[b]`.
  """
  mask = np.asarray(input_mask, dtype=np.float64)
  lengths = np.maximum(np.sum(mask, axis=1), 1.0)
  rows = mask / lengths[:, None]
  return np.broadcast_to(
      rows[:, None, None, :], (mask.shape[0], 1, mask.shape[1], mask.shape[1])
  )


@dataclasses.dataclass
class _Totals:
  """Running sums over the maps of one layer."""

  num_maps: int = 0
  num_excluded: int = 0
  concentration_sum: float = 0.0
  near_mass: float = 0.0
  far_mass: float = 0.0

  def add(self, maps: MapConcentration) -> None:
    included = maps.included
    self.num_maps += included.size
    self.num_excluded += int(np.sum(~included))
    self.concentration_sum += float(np.sum(maps.concentration[included]))
    self.near_mass += float(np.sum(maps.near_mass[included]))
    self.far_mass += float(np.sum(maps.far_mass[included]))

  def summary(self) -> Dict[str, Any]:
    counted = self.num_maps - self.num_excluded
    return dict(
        mean_concentration=(
            self.concentration_sum / counted if counted else None
        ),
        mass_ratio=self.near_mass / self.far_mass if counted else None,
        num_maps=self.num_maps,
        num_excluded=self.num_excluded,
    )


class ConcentrationAccumulator:
  """Accumulates the concentration of every map of an encoder, batch by batch.

  Usage:
    accumulator = ConcentrationAccumulator(window=4)
    for batch in batches:
      outputs = encoder(batch, training=False)
      accumulator.update(outputs['attention_scores'], batch['input_mask'])
    accumulator.result()
  """

  def __init__(self, window: int = DEFAULT_WINDOW):
    self._window = window
    self._layers: Optional[List[_Totals]] = None
    self._num_heads: Optional[int] = None

  def update(self, attention_scores: Sequence[Any], input_mask: Any) -> None:
    """Adds one batch.

    Args:
      attention_scores: one `[batch, heads, T, T]` probability tensor per
        layer (Model Garden's `attention_scores` encoder output).
      input_mask: `[batch, T]`, 1 for real tokens and 0 for padding.

    Raises:
      ValueError: the layer or head count differs from the earlier batches',
        or see `map_concentration`.
    """
    if not attention_scores:
      raise ValueError('attention_scores holds no layer.')
    if self._layers is None:
      self._layers = [_Totals() for _ in attention_scores]
      self._num_heads = int(attention_scores[0].shape[1])
    if len(attention_scores) != len(self._layers):
      raise ValueError(
          f'Got {len(attention_scores)} layers of attention '
          f'scores after batches of {len(self._layers)}.'
      )
    for layer, (totals, probs) in enumerate(
        zip(self._layers, attention_scores)
    ):
      if probs.shape[1] != self._num_heads:
        raise ValueError(
            f'Layer {layer} has {probs.shape[1]} heads, '
            f'expected {self._num_heads}.'
        )
      totals.add(map_concentration(probs, input_mask, self._window))

  def result(self) -> Dict[str, Any]:
    """The statistics over every map seen.

    Returns:
      A JSON-serialisable dict:
        mean_concentration: mean of C over the maps that have one (every
          example, layer and head), the rebuttal's "average concentration";
        mass_ratio: total near mass / total far mass over the same maps;
        num_maps: maps seen (examples x layers x heads);
        num_excluded: maps without a C (zero far mass), not in the above;
        num_layers, num_heads, window;
        per_layer: per layer, a dict with the first four entries.

    Raises:
      ValueError: no batch was added, or no map has a C.
    """
    if self._layers is None:
      raise ValueError('No attention scores were added.')
    total = _Totals()
    for totals in self._layers:
      for field in dataclasses.fields(_Totals):
        setattr(
            total,
            field.name,
            getattr(total, field.name) + getattr(totals, field.name),
        )
    if total.num_excluded == total.num_maps:
      raise ValueError(
          f'None of the {total.num_maps} attention maps has a concentration: '
          f'every one has zero mass beyond the window {self._window} (real '
          f'lengths <= {self._window + 1}?).'
      )
    return dict(
        total.summary(),
        num_layers=len(self._layers),
        num_heads=self._num_heads,
        window=self._window,
        per_layer=[totals.summary() for totals in self._layers],
    )
