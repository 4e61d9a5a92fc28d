"""SCRIPT pretraining (paper 004): a masked LM that is its own critic.

Loss = L_MLM + critic_loss_weight * L_Disc (004 Sec. 2). L_MLM is
Model Garden's `MaskedLMTask` loss on pass 1 (averaged over the masked
positions); L_Disc is the binary cross-entropy of the model's (V+1)-class
critic on pass 2, -[1(t+) log p(t+) + 1(t-) log p(t-)] averaged over the
real (non-padding) tokens, where a token is negative when it was replaced
by a different one. The model is `modeling/pretrainers/script.py`. The
critic's loss is logged as `critic_loss`; its other metrics are
`pretraining.ReplacedTokenTask`'s, shared with ELECTRA (named
`discriminator_*`: the critic is the discriminator). gin:
`experiment.objective = 'script'` and `script.<field>` for the fields of
`ScriptModelConfig`. Model Garden has no SCRIPT, so there is no stock
counterpart for the benchmark.
"""

import dataclasses
from typing import Dict, List, Optional

import tensorflow as tf
import tf_keras

from official.core import task_factory
from official.modeling.hyperparams import base_config
from official_repro.metrics import flops
from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import script
from official_repro.tasks import objectives
from official_repro.tasks import pretraining


@dataclasses.dataclass
class ScriptModelConfig(base_config.Config):
  """The SCRIPT model and its loss weight.

  Attributes:
    encoder: the one encoder (gin: `encoder`).
    temperature: tau of the Gumbel-softmax (004 Eq. 3; the paper gives no
      value); only used with `straight_through` (see
      `modeling/pretrainers/script.py`).
    straight_through: let the critic loss reach the pass-1 logits through a
      straight-through Gumbel-softmax sample (004 does not say; off: no
      gradient through the sample).
    critic_loss_weight: alpha, the weight of L_Disc (the critic loss).
    mlm_activation: activation of the MLM transform layer.
    mlm_initializer_range: stddev of the MLM head initializer.
    initial_positive_probability: the critic's p(t+) at initialization at
      every token, set through the MLM output bias (004 does not say; None:
      Model Garden's zero bias, p(t+) about 1 - 1/V; see
      `modeling/pretrainers/script.py`).
  """

  encoder: encoders.EncoderConfig = dataclasses.field(
      default_factory=encoders.EncoderConfig
  )
  temperature: float = 1.0
  straight_through: bool = False
  critic_loss_weight: float = 1.0
  mlm_activation: str = 'gelu_tanh'
  mlm_initializer_range: float = 0.02
  initial_positive_probability: Optional[float] = None


@dataclasses.dataclass
class ScriptPretrainConfig(pretraining.PretrainTaskConfig):
  """SCRIPT pretraining task config (loss scaling as in `PretrainTask`)."""

  model: ScriptModelConfig = dataclasses.field(
      default_factory=ScriptModelConfig
  )


def critic_loss(
    labels: tf.Tensor,
    log_positive: tf.Tensor,
    log_negative: tf.Tensor,
    input_mask: tf.Tensor,
) -> tf.Tensor:
  """004 Eq. 6: the critic's cross-entropy averaged over real tokens.

  Args:
    labels: int `[B, T]`, 1 = negative (replaced and different).
    log_positive: float `[B, T]`, log p(t+).
    log_negative: float `[B, T]`, log p(t-).
    input_mask: int `[B, T]`, 1 = real token.

  Returns:
    The scalar loss (0 for a batch without real tokens).
  """
  negative = tf.cast(labels, tf.float32)
  real = tf.cast(input_mask, tf.float32)
  losses = -(negative * log_negative + (1.0 - negative) * log_positive)
  return tf.math.divide_no_nan(
      tf.reduce_sum(losses * real), tf.reduce_sum(real)
  )


@task_factory.register_task_cls(ScriptPretrainConfig)
class ScriptPretrainTask(pretraining.ReplacedTokenTask):
  """Self-critic pretraining; ELECTRA's critic metrics on `rtd_logits`."""

  replaced_token_loss_name = 'critic_loss'

  def build_model(
      self, params: ScriptModelConfig = None
  ) -> script.ScriptPretrainer:
    config = params or self.task_config.model
    return script.ScriptPretrainer(
        encoder_config=config.encoder,
        temperature=config.temperature,
        straight_through=config.straight_through,
        mlm_activation=config.mlm_activation,
        mlm_initializer_range=config.mlm_initializer_range,
        initial_positive_probability=config.initial_positive_probability,
    )

  def build_losses(
      self,
      labels: Dict[str, tf.Tensor],
      model_outputs: Dict[str, tf.Tensor],
      metrics: List[tf_keras.metrics.Metric],
      aux_losses=None,
  ) -> tf.Tensor:
    """L_MLM + alpha * L_Disc; updates the two loss metrics.

    The MLM loss is `PretrainTask`'s, Model Garden `MaskedLMTask`'s.
    """
    mlm_loss = super().build_losses(labels, model_outputs, metrics)
    critic = critic_loss(
        model_outputs['rtd_labels'],
        model_outputs['critic_log_positive'],
        model_outputs['critic_log_negative'],
        labels['input_mask'],
    )
    {metric.name: metric for metric in metrics}[
        self.replaced_token_loss_name
    ].update_state(critic)
    total = mlm_loss + self.task_config.model.critic_loss_weight * critic
    if aux_losses:
      total += tf.add_n(aux_losses)
    return total


def _flops(
    task_config: ScriptPretrainConfig, seq_length: int, max_predictions: int
) -> Dict[str, flops.NetworkCost]:
  """Two passes through the one model, counted as two networks.

  `mlm_pass`: embeddings, blocks and the MLM head at the masked fraction
  (as `masked_lm`). `critic_pass`: embeddings, blocks and the same output
  layer at every token (`mlm_head_flops` with output fraction 1: transform,
  logits over V and a softmax-sized term for the log-sum-exps of Eq. 4-5).
  Sampling (Gumbel noise and an argmax over V at the masked positions) is
  not counted, as ELECTRA's formula does not count its sampling. Backward
  is 2x forward of both passes (ELECTRA's formula).
  """
  encoder = task_config.model.encoder
  shape = objectives.network_shape(encoder, seq_length)
  return dict(
      mlm_pass=flops.NetworkCost(
          shape,
          encoder.backbone,
          dict(mlm=flops.mlm_head_flops(shape, max_predictions / seq_length)),
      ),
      critic_pass=flops.NetworkCost(
          shape,
          encoder.backbone,
          dict(critic=flops.mlm_head_flops(shape, output_fraction=1.0)),
      ),
  )


def _finalize(task_config: ScriptPretrainConfig) -> ScriptPretrainConfig:
  """Checks the pretrainer's settings when the config is read.

  Raises:
    ArgumentError: naming the model config's fields.
  """
  model = task_config.model
  script.check_settings(
      model.temperature,
      model.straight_through,
      model.initial_positive_probability,
  )
  return task_config


OBJECTIVE = objectives.register(
    objectives.Objective(
        name='script',
        task_config_cls=ScriptPretrainConfig,
        model_config_cls=ScriptModelConfig,
        encoder_field='encoder',
        finalize=_finalize,
        flops=_flops,
        stock_task_config=None,
    )
)
