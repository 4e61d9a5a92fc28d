"""ALBERT backbone (Lan et al. 2020): one block applied at every layer.

The factorized embedding is `TransformerEncoder`'s with `embedding_width`;
cross-layer sharing is ONE `TransformerEncoderBlock` applied `num_layers`
times (with `SharedLayers.blocks`, the other network's block below k and
this one's above). Model Garden's `AlbertEncoder` cannot take a shared
embedding layer, which ALE's (001) tied embeddings need, so the network is
assembled here (variable names differ from its checkpoints). Activation:
the reference's tanh GELU.
"""

from official_repro.metrics import flops
from official_repro.modeling.networks import encoders
from official_repro.modeling.networks.backbones import bert

BACKBONE = encoders.register_backbone(
    encoders.Backbone(
        name='albert',
        # The one block, applied from layer `index` up (0 unless shared below).
        build_block=bert.block_builder(
            lambda index: 'shared_transformer'
            if index == 0
            else f'shared_transformer_from_layer_{index}'
        ),
        default_activation='gelu_tanh',
        flops_block=lambda config, options: flops.BlockFlops(),
        shares_blocks_across_layers=True,
        model_garden_config=lambda config: bert.model_garden_bert_config(
            config, model_type='albert'
        ),
    )
)
