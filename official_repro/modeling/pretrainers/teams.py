"""TEAMS (paper 003): ELECTRA plus multi-word selection.

ELECTRA's generator, sampling and corruption (`ElectraPretrainer`), plus K
non-original candidates per masked position (`sample_negatives`: 'sampled'
by Gumbel-top-k or 'hardest'; the original is candidate 0) and two task
representations (`task_states`) for RTD and MWS (`heads/mws.py`, 003 Eq. 7).
`task_heads` (003 Table 3): 'attention' (layer L is the exported side's head,
an extra block on layer L-1 the other's), 'attention_on_top' (both on layer
L; the discriminator is L + 1 deep) or 'ffn' (per-token heads on layer L).

Model Garden's `TeamsPretrainer` is not subclassed: it takes only
`EncoderScaffold` networks (so not our ALBERT or ConvBERT backbones) and
hard-wires the paper's head design and MWS-side export; its matching parts
are reused. Differences from it, each tested in
`tests/modeling/pretrainers/test_teams.py`: `num_negatives` is K where its
`candidate_size` counts the original (`model_garden_candidate_size`); one
extra task layer; `tie_embedding_block`
ties the tables and LayerNorm but each network keeps its E -> H projection
(with a bias, as `BertEncoder`); the Table 3 variants, 'hardest' negatives
and layer sharing are ours; negatives come from one Gumbel-top-k pass
rather than K penalised argmax passes (the same distribution).
"""

from typing import Any, Dict, Optional

import tensorflow as tf
import tf_keras

from official.nlp.modeling import layers
from official_repro.modeling import arguments
from official_repro.modeling.heads import mws
from official_repro.modeling.heads import token_ffn
from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import electra
from official_repro.modeling.pretrainers import sampling

TASK_HEADS = ('attention', 'attention_on_top', 'ffn')
EXPORTED_REPRESENTATIONS = ('mws', 'rtd')
NEGATIVE_SAMPLING = ('sampled', 'hardest')


def model_garden_candidate_size(num_negatives: int) -> int:
  """Model Garden's `candidate_size` for K negatives: it counts the original."""
  return num_negatives + 1


def check_settings(
    task_heads: str,
    exported_representations: str,
    negative_sampling: str,
    num_negatives: int,
) -> None:
  """Raises `ArgumentError` naming the argument for a value TEAMS lacks."""
  for argument, value, allowed in (
      ('task_heads', task_heads, TASK_HEADS),
      (
          'exported_representations',
          exported_representations,
          EXPORTED_REPRESENTATIONS,
      ),
      ('negative_sampling', negative_sampling, NEGATIVE_SAMPLING),
  ):
    if value not in allowed:
      raise arguments.ArgumentError(
          'TeamsPretrainer',
          lambda name: f'{name(argument)}={value!r}; expected one of '
          f'{list(allowed)}.',
      )
  if task_heads == 'ffn' and exported_representations != 'mws':
    raise arguments.ArgumentError(
        'TeamsPretrainer',
        lambda name: f'{name("exported_representations")}='
        f'{exported_representations!r} needs attention task heads: with '
        f"{name('task_heads')}='ffn' the exported encoder is the "
        'task-agnostic layers, shared by both tasks.',
    )
  if (
      isinstance(num_negatives, bool)
      or not isinstance(num_negatives, int)
      or (num_negatives < 1)
  ):
    raise arguments.ArgumentError(
        'TeamsPretrainer',
        lambda name: f'{name("num_negatives")} must be a positive int (K, the '
        f'non-original candidates), got {num_negatives!r}.',
    )


def exported_depth(num_layers: int, task_heads: str) -> int:
  """Layers of the discriminator kept for fine-tuning, for L task layers."""
  return num_layers + 1 if task_heads == 'attention_on_top' else num_layers


def _check_discriminator(
    config: encoders.EncoderConfig, num_negatives: int, task_heads: str
) -> None:
  """Raises `ArgumentError` for K >= V or attention heads on < 2 layers."""
  vocab_size = config.vocab_size
  if vocab_size is not None and num_negatives >= vocab_size:
    raise arguments.ArgumentError(
        'TeamsPretrainer',
        lambda name: f'{name("num_negatives")}={num_negatives} needs a '
        f'vocabulary of more than {num_negatives} tokens (K candidates '
        f'besides the original); the encoder has {vocab_size}.',
    )
  if task_heads != 'ffn' and config.num_layers < 2:
    raise arguments.ArgumentError(
        'TeamsPretrainer',
        lambda name: f'{name("task_heads")}={task_heads!r} needs a '
        'discriminator of at least 2 layers: its extra task layer reads '
        'the second-to-last one.',
    )


@tf_keras.utils.register_keras_serializable(package='official_repro')
class TeamsPretrainer(electra.ElectraPretrainer):
  """Generator + discriminator trained with MLM, RTD and MWS.

  Beyond `ElectraPretrainer`'s: `task_layer` (attention heads, else None),
  `ffn_heads` ({'mws', 'rtd'} with 'ffn', else {}) and `mws_head`.
  """

  def __init__(
      self,
      discriminator_config: encoders.EncoderConfigLike,
      generator_config: encoders.EncoderConfigLike,
      num_negatives: int,
      negative_sampling: str = 'sampled',
      task_heads: str = 'attention',
      exported_representations: str = 'mws',
      tie_embeddings: bool = True,
      num_shared_layers: int = 0,
      temperature: float = 1.0,
      mlm_activation: str = 'gelu_tanh',
      initializer_range: float = 0.02,
      tie_embedding_block: bool = False,
      **kwargs,
  ):
    """Builds the networks and heads; other arguments as `ElectraPretrainer`.

    `discriminator_config` is the exported discriminator's; `num_negatives` K
    candidates besides the original per masked position, drawn by
    `negative_sampling` ('sampled', 'hardest'); `task_heads` 'attention',
    'attention_on_top' or 'ffn'; `exported_representations` ('mws', 'rtd') the
    top layer's task.
    """
    check_settings(
        task_heads, exported_representations, negative_sampling, num_negatives
    )
    super().__init__(
        discriminator_config,
        generator_config,
        tie_embeddings=tie_embeddings,
        num_shared_layers=num_shared_layers,
        temperature=temperature,
        disallow_original=False,
        mlm_activation=mlm_activation,
        initializer_range=initializer_range,
        tie_embedding_block=tie_embedding_block,
        **kwargs,
    )
    discriminator_config = encoders.validate(
        encoders.as_encoder_config(discriminator_config)
    )
    _check_discriminator(discriminator_config, num_negatives, task_heads)
    self._num_negatives = num_negatives
    self._negative_sampling = negative_sampling
    self._task_heads = task_heads
    self._exported_representations = exported_representations
    self._build_task_heads(discriminator_config)
    self.mws_head = mws.MultiWordSelectionHead(
        embedding_width=discriminator_config.width,
        activation=mlm_activation,
        initializer_range=initializer_range,
        name='discriminator_mws',
    )
    del self._config['disallow_original']
    self._config.update(
        discriminator_config=discriminator_config.as_dict(),
        num_negatives=num_negatives,
        negative_sampling=negative_sampling,
        task_heads=task_heads,
        exported_representations=exported_representations,
    )

  def _build_task_heads(self, config: encoders.EncoderConfig) -> None:
    """The extra task layer (attention heads) or the two FFN heads."""
    self.task_layer = None
    self.ffn_heads = {}
    if self._task_heads == 'ffn':
      self.ffn_heads = {
          task: token_ffn.TokenFeedForwardHead(
              hidden_size=config.hidden_size,
              intermediate_size=config.intermediate_size,
              activation=config.hidden_activation,
              dropout_rate=config.dropout_rate,
              initializer_range=config.initializer_range,
              name=f'discriminator_{task}_ffn',
          )
          for task in EXPORTED_REPRESENTATIONS
      }
    else:
      self.task_layer = encoders.build_block(config, config.num_layers)
      # Built now, as the encoders' blocks are, so that its dropout layers
      # exist when a checkpoint restores their random streams.
      self.task_layer(
          [
              tf_keras.Input((None, config.hidden_size)),
              tf_keras.Input((None, None)),
          ]
      )

  @property
  def checkpoint_items(self) -> Dict[str, tf.Module]:
    items = dict(super().checkpoint_items, discriminator_mws=self.mws_head)
    if self.task_layer is not None:
      items['discriminator_task_layer'] = self.task_layer
    for task, head in self.ffn_heads.items():
      items[f'discriminator_{task}_ffn'] = head
    return items

  @property
  def num_negatives(self) -> int:
    return self._num_negatives

  def sample_negatives(
      self,
      mlm_logits: tf.Tensor,
      inputs: Dict[str, tf.Tensor],
      training: Optional[bool] = None,
  ) -> tf.Tensor:
    """K distinct non-original ids per masked position, int32 `[B, P, K]`.

    'sampled': without replacement from softmax(logits / temperature), in
    draw order; 'hardest': the K most likely, most likely first.
    """
    logits = tf.stop_gradient(mlm_logits)
    original = inputs['masked_lm_ids']
    if self._negative_sampling == 'hardest':
      return sampling.top_k_excluding(
          logits, self._num_negatives, excluded_ids=original
      )
    return sampling.sample_distinct(
        logits,
        self._num_negatives,
        self._temperature,
        excluded_ids=original,
        seed=self.sampling_seeds.next_seed(training),
    )

  @staticmethod
  def candidate_sets(
      inputs: Dict[str, tf.Tensor], negatives: tf.Tensor
  ) -> tf.Tensor:
    """int32 `[B, P, K + 1]`: the original at index 0, then the negatives."""
    original = tf.cast(inputs['masked_lm_ids'], tf.int32)[:, :, None]
    return tf.concat([original, tf.cast(negatives, tf.int32)], axis=-1)

  def task_states(
      self,
      discriminator_outputs: Dict[str, Any],
      input_mask: tf.Tensor,
      training: Optional[bool] = None,
  ) -> Dict[str, tf.Tensor]:
    """`{'rtd', 'mws'}` representations, float `[B, T, H]` each."""
    top = discriminator_outputs['encoder_outputs'][-1]
    if self._task_heads == 'ffn':
      return {
          task: head(top, training=training)
          for task, head in self.ffn_heads.items()
      }
    below_top = discriminator_outputs['encoder_outputs'][-2]
    attention_mask = layers.SelfAttentionMask()(below_top, input_mask)
    other = self.task_layer([below_top, attention_mask], training=training)
    if self._exported_representations == 'mws':
      return dict(mws=top, rtd=other)
    return dict(mws=other, rtd=top)

  def mws_logits(
      self,
      mws_states: tf.Tensor,
      inputs: Dict[str, tf.Tensor],
      candidates: tf.Tensor,
  ) -> tf.Tensor:
    """MWS logits, float `[B, P, K + 1]`: e(candidate)^T h^MWS (003 Eq. 7)."""
    return self.mws_head(
        mws_states,
        inputs['masked_lm_positions'],
        candidates,
        self.discriminator.get_embedding_table(),
    )

  def call(
      self, inputs: Dict[str, tf.Tensor], training=None
  ) -> Dict[str, tf.Tensor]:
    """Runs generator, sampling, discriminator and both task heads.

    Returns:
      `ElectraPretrainer.call`'s outputs, `mws_candidates` int32
      `[B, P, K + 1]` (the original first) and `mws_logits` `[B, P, K + 1]`.
    """
    mlm_logits, _ = self.generator_logits(inputs, training)
    sampled = self.sample_replacements(mlm_logits, inputs, training)
    candidates = self.candidate_sets(
        inputs, self.sample_negatives(mlm_logits, inputs, training)
    )
    corrupted, labels = self.corrupt(inputs, sampled)
    discriminator_outputs = self.discriminate(corrupted, inputs, training)
    states = self.task_states(
        discriminator_outputs, inputs['input_mask'], training
    )
    return dict(
        mlm_logits=mlm_logits,
        sampled_ids=sampled,
        discriminator_ids=corrupted,
        rtd_labels=labels,
        rtd_logits=self.rtd_head(states['rtd']),
        mws_candidates=candidates,
        mws_logits=self.mws_logits(states['mws'], inputs, candidates),
    )
