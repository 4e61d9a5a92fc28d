"""Diagonal concentration of attention maps (002 rebuttal, Table 1).

For a map M (rows: queries, summing to 1) and window w (4 in the rebuttal),
C(M) = sum_{|i-j|<=w} M_ij / sum_{|i-j|>w} M_ij. Choices the rebuttal does not
state: only real tokens count (rows are not renormalised); a map with no far
mass has no C and is excluded and counted; the headline is the mean of C over
maps, with the total near / far mass ratio beside it.
"""

import dataclasses
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import numpy as np

DEFAULT_WINDOW = 4


class MapConcentration(NamedTuple):
  """Per-map masses and C (NaN unless `included`: far mass > 0), `[B, H]`."""

  near_mass: np.ndarray
  far_mass: np.ndarray
  concentration: np.ndarray
  included: np.ndarray


def map_concentration(
    attention_probs: Any, input_mask: Any, window: int = DEFAULT_WINDOW
) -> MapConcentration:
  """Near- and far-diagonal mass of `[batch, heads, T(query), T(key)]` maps."""
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
  """float64 `[batch, 1, T, T]` maps attending evenly to the real keys."""
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
  """Accumulates the concentration of every map of an encoder, by batch."""

  def __init__(self, window: int = DEFAULT_WINDOW):
    self._window = window
    self._layers: Optional[List[_Totals]] = None
    self._num_heads: Optional[int] = None

  def update(self, attention_scores: Sequence[Any], input_mask: Any) -> None:
    """Adds one batch: a `[batch, heads, T, T]` tensor per layer."""
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
    layers = zip(self._layers, attention_scores)
    for layer, (totals, probs) in enumerate(layers):
      if probs.shape[1] != self._num_heads:
        raise ValueError(
            f'Layer {layer} has {probs.shape[1]} heads, '
            f'expected {self._num_heads}.'
        )
      totals.add(map_concentration(probs, input_mask, self._window))

  def result(self) -> Dict[str, Any]:
    """`mean_concentration`, `mass_ratio`, map counts, sizes and `per_layer`."""
    if self._layers is None:
      raise ValueError('No attention scores were added.')
    total = _Totals(
        *(
            sum(getattr(totals, field.name) for totals in self._layers)
            for field in dataclasses.fields(_Totals)
        )
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
