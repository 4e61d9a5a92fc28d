"""What the pretraining tasks share: the replaced-token loss, the generator."""

import numpy as np
import pytest

from official_repro.modeling import arguments
from official_repro.modeling.networks import encoders
from official_repro.tasks import pretraining


def test_replaced_token_loss_is_the_mean_over_real_tokens():
  rng = np.random.default_rng(4)
  logits = rng.normal(size=(2, 6)).astype(np.float32)
  labels = rng.integers(0, 2, size=(2, 6))
  mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
  probabilities = 1 / (1 + np.exp(-logits))
  losses = -(
      labels * np.log(probabilities) + (1 - labels) * np.log(1 - probabilities)
  )
  expected = losses[mask.astype(bool)].mean()
  loss = pretraining.replaced_token_loss(labels, logits, mask)
  assert float(loss) == pytest.approx(expected, rel=1e-5)
  empty = pretraining.replaced_token_loss(labels, logits, np.zeros_like(mask))
  assert float(empty) == 0.0


def _shape(**overrides):
  discriminator = encoders.EncoderConfig(
      hidden_size=64,
      num_layers=4,
      num_attention_heads=4,
      intermediate_size=256,
      vocab_size=50,
  )
  return pretraining.GeneratorShape(discriminator=discriminator, **overrides)


def test_partial_sharing_shares_the_generators_bottom_half():
  shape = _shape(generator_layer_fraction=0.5, layer_sharing='partial')
  assert shape.generator().num_layers == 2
  assert shape.num_shared_layers() == 1
  assert _shape(layer_sharing='full').num_shared_layers() == 4


def test_sharing_layers_with_a_narrower_generator_names_the_fix():
  shape = _shape(generator_size=0.25, layer_sharing='full')
  with pytest.raises(arguments.ArgumentError, match='generator_size = 1.0'):
    shape.num_shared_layers()
