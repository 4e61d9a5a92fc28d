"""FLOPs of a model's compiled graph, counted by TensorFlow's profiler.

An independent count, read off the graph TensorFlow actually builds rather
than a formula: the forward graph of a pretraining model is frozen and its
float operations counted by `tf.compat.v1.profiler` (a multiply-add counts 2,
like the matmul convention `2mn` of ELECTRA's formula; Model Garden registers
the Einsum statistics its attention layers need).
"""

import tensorflow as tf

from official.core import train_utils  # pylint: disable=unused-import
from tensorflow.python.framework import convert_to_constants  # pylint: disable=g-direct-tensorflow-import


def profiled_forward_flops(model: tf.keras.Model, seq_length: int,
                           max_predictions: int) -> int:
  """Float operations of one forward pass on one sequence.

  Importing `official.core.train_utils` registers Model Garden's Einsum FLOPs
  statistics, without which attention einsums would count zero.

  Args:
    model: a pretraining model taking Model Garden's pretraining inputs
      (`input_word_ids`, `input_mask`, `input_type_ids`,
      `masked_lm_positions`).
    seq_length: tokens per sequence.
    max_predictions: masked positions per sequence.

  Returns:
    The profiler's float-operation count for a batch of one.
  """
  specs = dict(
      input_word_ids=tf.TensorSpec([1, seq_length], tf.int32),
      input_mask=tf.TensorSpec([1, seq_length], tf.int32),
      input_type_ids=tf.TensorSpec([1, seq_length], tf.int32),
      masked_lm_positions=tf.TensorSpec([1, max_predictions], tf.int32))
  concrete = tf.function(
      lambda inputs: model(inputs, training=False)).get_concrete_function(
          specs)
  frozen = convert_to_constants.convert_variables_to_constants_v2(concrete)
  options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
  options['output'] = 'none'
  profile = tf.compat.v1.profiler.profile(
      graph=frozen.graph, run_meta=tf.compat.v1.RunMetadata(),
      options=options)
  return int(profile.total_float_ops)
