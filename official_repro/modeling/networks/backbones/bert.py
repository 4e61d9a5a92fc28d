"""BERT backbone: Model Garden's post-LN `TransformerEncoderBlock`.

With these blocks `TransformerEncoder` is Model Garden's `BertEncoder` (same
checkpoint layout). Activation: the BERT and ELECTRA references' tanh GELU.
"""

from typing import Callable

from official.modeling import tf_utils
from official.nlp.configs import encoders as mg_encoders
from official.nlp.modeling import layers
from official_repro.metrics import flops
from official_repro.modeling import activations
from official_repro.modeling.networks import encoders


def transformer_block(
    config: encoders.EncoderConfig, name: str, return_attention_scores: bool
) -> layers.TransformerEncoderBlock:
  """One post-LN BERT block of the config's sizes."""
  return layers.TransformerEncoderBlock(
      num_attention_heads=config.num_attention_heads,
      inner_dim=config.intermediate_size,
      inner_activation=activations.get(config.hidden_activation),
      output_dropout=config.dropout_rate,
      attention_dropout=config.attention_dropout_rate,
      return_attention_scores=return_attention_scores,
      kernel_initializer=tf_utils.clone_initializer(config.initializer()),
      name=name,
  )


# The fields Model Garden's BERT and ALBERT encoder configs name as ours.
MODEL_GARDEN_FIELDS = (
    'vocab_size',
    'hidden_size',
    'num_layers',
    'num_attention_heads',
    'intermediate_size',
    'dropout_rate',
    'attention_dropout_rate',
    'max_position_embeddings',
    'type_vocab_size',
    'initializer_range',
)


def model_garden_bert_config(
    config: encoders.EncoderConfig, model_type: str = 'bert'
) -> mg_encoders.EncoderConfig:
  """Model Garden's config of the same BERT (or ALBERT) network."""
  common = {field: getattr(config, field) for field in MODEL_GARDEN_FIELDS}
  common['hidden_activation'] = activations.model_garden_name(
      config.hidden_activation
  )
  if model_type == 'albert':
    return mg_encoders.EncoderConfig(
        type='albert',
        albert=mg_encoders.AlbertEncoderConfig(
            embedding_width=config.width, **common
        ),
    )
  return mg_encoders.EncoderConfig(
      type='bert',
      bert=mg_encoders.BertEncoderConfig(
          embedding_size=config.embedding_width, **common
      ),
  )


def block_builder(name: Callable[[int], str]) -> encoders.BlockBuilder:
  """A `Backbone.build_block` of `transformer_block`s, named `name(index)`."""

  def build_block(config, options, index, return_attention_scores):
    del options
    return transformer_block(config, name(index), return_attention_scores)

  return build_block


BACKBONE = encoders.register_backbone(
    encoders.Backbone(
        name='bert',
        build_block=block_builder(lambda index: f'transformer/layer_{index}'),
        default_activation='gelu_tanh',
        flops_block=lambda config, options: flops.BlockFlops(),
        model_garden_config=model_garden_bert_config,
    )
)
