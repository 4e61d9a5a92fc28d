"""TEAMS (paper 003): ELECTRA plus multi-word selection.

The generator and the corruption are ELECTRA's parts (`ElectraPretrainer`:
`generator_logits`, `sample_replacements`, `corrupt`, `discriminate`);
TEAMS adds, per masked position, K non-original candidates from the same
generator softmax (`sample_negatives`), and gives the discriminator two
task-specific representations (`task_states`), one for replaced-token
detection (RTD, ELECTRA's head) and one for multi-word selection (MWS,
`heads/mws.py`: pick the original out of its K + 1 candidates, 003 Eq. 7).

Task heads (003 Sec. 3.2, Fig. 2, Table 3), `task_heads`:
  * 'attention' (the paper's): layers 1..L-1 are task-agnostic; layer L is
    one task's head and a separate transformer layer fed by layer L-1 the
    other's. The exported side (`exported_representations`, 'mws' by
    default, 003 footnote 3) is the top of the discriminator, so the encoder
    kept for fine-tuning is the L-layer discriminator itself;
  * 'attention_on_top': both task layers on top of layer L ("Add task head
    on 12th layer"); the discriminator is then L + 1 layers deep, its top
    layer being the exported side's head, and the other head reads layer L;
  * 'ffn': L task-agnostic layers and a per-token feed-forward head per task
    ("Use FFN task heads"); the exported encoder is the L layers.
With attention heads the other side's extra layer reads the
discriminator's second-to-last output, so one code path serves both
attention designs; with 'ffn' both heads read the top layer. On ALBERT the
discriminator's layers apply its one shared block and the extra layer is a
block of its own (whatever `encoders.build_block` names it), so the two
sides are not symmetric as they are on BERT.

Negatives (003 Sec. 4.3, Fig. 5), `negative_sampling`: 'sampled', K draws
without replacement from the generator's softmax (Gumbel-top-k, one pass),
or 'hardest', the K most likely non-original tokens. The candidate set is
[original, negative_1 .. negative_K] (the original at index 0, so the MWS
label is 0); the replacement written into the sequence is drawn separately,
as in 003 Sec. 3.2 ("First ... we sample one token ... Second, we draw K
non-original tokens").

Model Garden's `TeamsPretrainer` is not subclassed: it takes
`EncoderScaffold` networks (it reads their `embedding_network` and the
`hidden_cfg` of their config to build its RTD layer), so it cannot run on
our ALBERT or ConvBERT backbones, and its `call` hard-wires the paper's head
design and the MWS-side export. What it has that matches the paper is
reused as parts: ELECTRA's generator, sampling and corruption
(`ElectraPretrainer`), Model Garden's `MaskedLM` head and transformer
blocks, and `MaskedLMTask`'s loss and metrics (`tasks/teams.py`); its
`TeamsPretrainTask` is the benchmark's stock counterpart.

Where Model Garden's `official.projects.teams` (`TeamsPretrainer`) differs:
  * `candidate_size` counts the original: its default 5 draws 4 negatives,
    where 003 draws K = 5. Here `num_negatives` is K and the candidate set
    has K + 1 entries; `model_garden_candidate_size(K) = K + 1`.
  * Its `ReplacedTokenDetectionHead` feeds each of its extra layers the same
    input instead of chaining them; with one extra layer (the paper's
    design) the result is the same. Here there is exactly one extra layer.
  * It ties the whole embedding network (word, position and type tables,
    LayerNorm and projection) of generator and discriminator; here
    `tie_embedding_block` ties the tables and the LayerNorm (the TEAMS
    objective's default configuration sets it), and without it only the
    word table is tied. Each network keeps its own E -> H projection, with
    a bias (Model Garden's `BertEncoder`, whose checkpoints ours restore
    into, has one; Model Garden's TEAMS projection has none).
  * It has only the paper's head design and MWS-side export; the Table 3
    variants, 'hardest' negatives and the layer-sharing variants are ours.
  * Its negatives come from K argmax passes with a finite penalty (1e4) on
    the excluded ids; the distribution is that of Gumbel-top-k, which is
    what `sampling.sample_distinct` computes in one pass.
With its candidate size set to K + 1 and the same weights, its MWS and RTD
logits equal these; each difference above is a test in
`tests/modeling/test_teams.py`.
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
  """Raises `ArgumentError` naming the argument for a value TEAMS lacks.

  The checks of `TeamsPretrainer`'s own arguments (beyond
  `electra.check_settings`), for callers that check them before anything is
  built.
  """
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


@tf_keras.utils.register_keras_serializable(package='official_repro')
class TeamsPretrainer(electra.ElectraPretrainer):
  """Generator + discriminator trained with MLM, RTD and MWS.

  Attributes (beyond `ElectraPretrainer`'s):
    task_layer: the extra transformer block of the non-exported side
      (attention task heads), or None.
    ffn_heads: {'mws': ..., 'rtd': ...} per-token heads ('ffn'), or {}.
    mws_head: the multi-word selection head.
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
    """Builds the networks and heads.

    Args:
      discriminator_config: the exported discriminator's `EncoderConfig`
        (with 'attention_on_top', one layer deeper than the paper's L).
      generator_config: the generator's.
      num_negatives: K, non-original candidates per masked position.
      negative_sampling: 'sampled' or 'hardest'.
      task_heads: 'attention', 'attention_on_top' or 'ffn'.
      exported_representations: 'mws' or 'rtd': which task's
        representations the discriminator's top layer gives (attention heads).
      tie_embeddings: one word-embedding table for both networks.
      num_shared_layers: the generator's bottom layers that are the
        discriminator's.
      temperature: sampling temperature of the replacement and negatives.
      mlm_activation: activation of the MLM, RTD and MWS transforms.
      initializer_range: stddev of the heads' initializers.
      tie_embedding_block: also one position table, type table and
        embedding LayerNorm for both (Model Garden's TEAMS ties so).
      **kwargs: other `tf_keras.Model` arguments.

    Raises:
      ArgumentError: for unknown settings (`check_settings`,
        `electra.check_settings`), K negatives from a vocabulary of K or
        fewer tokens, or attention heads on a discriminator of fewer than 2
        layers (the extra layer reads the second-to-last one).
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
    vocab_size = discriminator_config.vocab_size
    if vocab_size is not None and num_negatives >= vocab_size:
      raise arguments.ArgumentError(
          'TeamsPretrainer',
          lambda name: f'{name("num_negatives")}={num_negatives} needs a '
          f'vocabulary of more than {num_negatives} tokens (K candidates '
          f'besides the original); the encoder has {vocab_size}.',
      )
    if task_heads != 'ffn' and discriminator_config.num_layers < 2:
      raise arguments.ArgumentError(
          'TeamsPretrainer',
          lambda name: f'{name("task_heads")}={task_heads!r} needs a '
          'discriminator of at least 2 layers: its extra task layer reads '
          'the second-to-last one.',
      )
    self._num_negatives = num_negatives
    self._negative_sampling = negative_sampling
    self._task_heads = task_heads
    self._exported_representations = exported_representations
    self.task_layer = None
    self.ffn_heads = {}
    if task_heads == 'ffn':
      self.ffn_heads = {
          task: token_ffn.TokenFeedForwardHead(
              hidden_size=discriminator_config.hidden_size,
              intermediate_size=discriminator_config.intermediate_size,
              activation=discriminator_config.hidden_activation,
              dropout_rate=discriminator_config.dropout_rate,
              initializer_range=discriminator_config.initializer_range,
              name=f'discriminator_{task}_ffn',
          )
          for task in EXPORTED_REPRESENTATIONS
      }
    else:
      self.task_layer = encoders.build_block(
          discriminator_config, discriminator_config.num_layers
      )
      # Built now, as the encoders' blocks are, so that its dropout layers
      # exist when a checkpoint restores their random streams.
      self.task_layer(
          [
              tf_keras.Input((None, discriminator_config.hidden_size)),
              tf_keras.Input((None, None)),
          ]
      )
    self.mws_head = mws.MultiWordSelectionHead(
        embedding_width=discriminator_config.width,
        activation=mlm_activation,
        initializer_range=initializer_range,
        name='discriminator_mws',
    )
    config = {
        name: value
        for name, value in self._config.items()
        if name != 'disallow_original'
    }
    self._config = dict(
        config,
        discriminator_config=discriminator_config.as_dict(),
        num_negatives=num_negatives,
        negative_sampling=negative_sampling,
        task_heads=task_heads,
        exported_representations=exported_representations,
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
    """The RTD and MWS representations, float `[B, T, H]` each.

    Args:
      discriminator_outputs: the discriminator's outputs (with
        `encoder_outputs`, every layer's states).
      input_mask: int `[B, T]`, 1 = real token.
      training: dropout on or off.

    Returns:
      `{'rtd': ..., 'mws': ...}`.
    """
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

    Args:
      inputs: as `ElectraPretrainer.call`.
      training: dropout on or off.

    Returns:
      `ElectraPretrainer`'s outputs (`mlm_logits`, `sampled_ids`,
      `discriminator_ids`, `rtd_labels`, `rtd_logits`) and
      `mws_candidates` int32 `[batch, predictions, K + 1]` (the original
      first) and `mws_logits` float `[batch, predictions, K + 1]`.
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
