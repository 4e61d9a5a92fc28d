"""SCRIPT pretraining (paper 004): a masked LM that is its own critic.

Loss = L_MLM (pass 1, over masked positions) + critic_loss_weight * L_Disc,
the binary cross-entropy of the (V+1)-class critic on pass 2 over real
tokens (004 Sec. 2). The critic's metrics are `ReplacedTokenTask`'s
(`discriminator_*`), its loss `critic_loss`. gin: `script.<field>`. Model
Garden has no SCRIPT, so there is no stock counterpart for the benchmark.
"""

import dataclasses
from typing import Dict, Optional

import tensorflow as tf

from official.core import task_factory
from official.modeling.hyperparams import base_config
from official_repro.metrics import flops
from official_repro.modeling.networks import encoders
from official_repro.modeling.pretrainers import script
from official_repro.tasks import objectives
from official_repro.tasks import pretraining


@dataclasses.dataclass
class ScriptModelConfig(base_config.Config):
  """The SCRIPT model (one encoder, gin `encoder`) and its loss weight.

  Attributes:
    temperature: tau of the Gumbel-softmax (004 Eq. 3), with
      `straight_through` only.
    straight_through: the critic loss reaches the pass-1 logits through a
      straight-through Gumbel-softmax sample (004 does not say).
    critic_loss_weight: alpha, the weight of L_Disc.
    initial_positive_probability: the critic's initial p(t+), through the
      MLM output bias (None: zero bias, p(t+) about 1 - 1/V).
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

  def replaced_token_loss(self, labels, model_outputs) -> tf.Tensor:
    """L_Disc: the critic's loss on pass 2."""
    return critic_loss(
        model_outputs['rtd_labels'],
        model_outputs['critic_log_positive'],
        model_outputs['critic_log_negative'],
        labels['input_mask'],
    )

  def total_loss(self, mlm_loss, rtd_loss, labels, model_outputs, metrics):
    """L_MLM + alpha * L_Disc."""
    return mlm_loss + self.task_config.model.critic_loss_weight * rtd_loss


def _flops(
    task_config: ScriptPretrainConfig, seq_length: int, max_predictions: int
) -> Dict[str, flops.NetworkCost]:
  """Two passes through the one model, counted as two networks.

  `mlm_pass` has the MLM head at the masked fraction, `critic_pass` the same
  output layer at every token. Sampling is not counted, as ELECTRA's formula
  does not count its sampling.
  """
  encoder = task_config.model.encoder
  return dict(
      mlm_pass=objectives.masked_lm_cost(
          encoder, seq_length, max_predictions / seq_length
      ),
      critic_pass=objectives.masked_lm_cost(
          encoder, seq_length, output_fraction=1.0, head='critic'
      ),
  )


def _finalize(task_config: ScriptPretrainConfig) -> ScriptPretrainConfig:
  """Checks the pretrainer's settings when the config is read."""
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
