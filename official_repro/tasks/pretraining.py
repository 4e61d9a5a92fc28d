"""What every pretraining objective's task shares.

`PretrainTask` is Model Garden's `MaskedLMTask` reading our records: its
train and validation steps (forward, `build_losses`, per-replica loss
scaling, `process_metrics`) and its masked-LM loss and metrics are
objective-agnostic, so an objective subclasses it and adds its own losses
and metrics on top (`super().build_losses` is the generator's or the
model's MLM loss over the masked positions). Objectives register themselves
in `official_repro.tasks.objectives`.
"""

from typing import Optional

import tensorflow as tf

from official.nlp.tasks import masked_lm
from official_repro.data import pretrain_dataloader


class PretrainTask(masked_lm.MaskedLMTask):
  """Model Garden's `MaskedLMTask` on `official_repro` records.

  The task config needs `model`, `train_data` and `validation_data`
  (`pretrain_dataloader.PretrainDataConfig`) and `scale_loss`.
  """

  def build_inputs(self, params: pretrain_dataloader.PretrainDataConfig,
                   input_context: Optional[tf.distribute.InputContext] = None
                   ) -> tf.data.Dataset:
    return pretrain_dataloader.PretrainDataLoader(params).load(input_context)


def replaced_token_loss(labels: tf.Tensor, logits: tf.Tensor,
                        input_mask: tf.Tensor) -> tf.Tensor:
  """Sigmoid cross-entropy averaged over real (non-padding) tokens.

  Args:
    labels: int `[B, T]`, 1 = replaced.
    logits: float `[B, T]`.
    input_mask: int `[B, T]`, 1 = real token.

  Returns:
    The scalar loss (0 for a batch without real tokens).
  """
  real = tf.cast(input_mask, tf.float32)
  losses = tf.nn.sigmoid_cross_entropy_with_logits(
      labels=tf.cast(labels, tf.float32), logits=tf.cast(logits, tf.float32))
  return tf.math.divide_no_nan(tf.reduce_sum(losses * real),
                               tf.reduce_sum(real))
