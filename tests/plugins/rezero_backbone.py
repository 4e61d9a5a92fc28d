"""A test-only backbone: ReZero blocks (Model Garden's `ReZeroTransformer`).

The whole backbone is this module; `import tests.plugins.rezero_backbone`
and `encoder.backbone = 'rezero'` in gin select it. It has one option of its
own, to show that options live with their backbone, and declares its own
FLOPs terms (`ReZeroFlops`), to show that a block of a new shape needs no
edit of `metrics/flops.py`.
"""

import dataclasses
from typing import Dict

import tf_keras

from official.modeling import tf_utils
from official.nlp.modeling import layers
from official_repro.metrics import flops
from official_repro.modeling import activations
from official_repro.modeling.networks import encoders


@dataclasses.dataclass
class ReZeroOptions:
  use_layer_norm: bool = False


def _build_block(
    config: encoders.EncoderConfig,
    options: ReZeroOptions,
    index: int,
    return_attention_scores: bool,
) -> tf_keras.layers.Layer:
  if return_attention_scores:
    raise ValueError('The rezero backbone returns no attention scores.')
  return layers.ReZeroTransformer(
      num_attention_heads=config.num_attention_heads,
      inner_dim=config.intermediate_size,
      inner_activation=activations.get(config.hidden_activation),
      dropout_rate=config.dropout_rate,
      attention_dropout_rate=config.attention_dropout_rate,
      use_layer_norm=options.use_layer_norm,
      kernel_initializer=tf_utils.clone_initializer(config.initializer()),
      name=f'rezero/layer_{index}',
  )


@dataclasses.dataclass(frozen=True)
class ReZeroFlops(flops.BlockFlops):
  """ELECTRA's block with ReZero's residual branches.

  Each sublayer's output is scaled by its learned scalar before the residual
  (h per token each), and the LayerNorms run only with `use_layer_norm`.

  Attributes:
    use_layer_norm: the block keeps its LayerNorms.
  """

  use_layer_norm: bool = False

  def terms(self, net: flops.NetworkShape) -> Dict[str, float]:
    terms = super().terms(net)
    terms.update(attention_rezero_scale=net.hidden, ffn_rezero_scale=net.hidden)
    if not self.use_layer_norm:
      del terms['attention_layer_norm'], terms['ffn_layer_norm']
    return terms


BACKBONE = encoders.register_backbone(
    encoders.Backbone(
        name='rezero',
        build_block=_build_block,
        options_cls=ReZeroOptions,
        default_activation='relu',
        flops_block=lambda config, options: ReZeroFlops(
            use_layer_norm=options.use_layer_norm
        ),
    )
)
