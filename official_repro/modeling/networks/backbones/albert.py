"""ALBERT backbone (Lan et al. 2020): one block applied at every layer.

The factorized embedding (width E, then a dense E -> H projection) is the
shared `TransformerEncoder` embedding with `EncoderConfig.embedding_width`;
cross-layer sharing is ONE `TransformerEncoderBlock` object applied
`num_layers` times. Model Garden's `AlbertEncoder` builds its embedding
layer inside its constructor and cannot take a shared one, which ELECTRA's
tied generator/discriminator embeddings (ALE, paper 001) need, so the
network is assembled here; variable names differ from `AlbertEncoder`
checkpoints. Feed-forward activation: GELU, tanh approximation, as in the
ALBERT reference code.

With shared blocks (`SharedLayers.blocks`, TEAMS-style), the layers below k
apply the other network's block and the layers from k up apply this
network's own one block: two block objects, each shared across its layers.
"""

import tf_keras

from official_repro.metrics import flops
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks.backbones import bert


def _build_block(
    config: encoders.EncoderConfig,
    options,
    index: int,
    return_attention_scores: bool,
) -> tf_keras.layers.Layer:
  """The one block, applied from layer `index` up.

  The one block, applied from layer `index` up (0 unless the layers
  below are shared with another network).
  """
  del options
  name = (
      'shared_transformer'
      if index == 0
      else f'shared_transformer_from_layer_{index}'
  )
  return bert.transformer_block(config, name, return_attention_scores)


BACKBONE = encoders.register_backbone(
    encoders.Backbone(
        name='albert',
        build_block=_build_block,
        default_activation='gelu_tanh',
        flops_block=lambda config, options: flops.BlockFlops(),
        shares_blocks_across_layers=True,
        model_garden_config=lambda config: bert.model_garden_bert_config(
            config, model_type='albert'
        ),
    )
)
