"""A test-only backbone: ReZero blocks (Model Garden's `ReZeroTransformer`).

The whole backbone is this module; `import tests.plugins.rezero_backbone`
and `encoder.backbone = 'rezero'` in gin select it. It has one option of its
own, to show that options live with their backbone.
"""

import dataclasses

import tf_keras

from official.modeling import tf_utils
from official.nlp.modeling import layers
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


BACKBONE = encoders.register_backbone(
    encoders.Backbone(
        name='rezero',
        build_block=_build_block,
        options_cls=ReZeroOptions,
        default_activation='relu',
    )
)
