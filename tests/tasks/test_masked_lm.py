"""The masked-LM objective: next-sentence prediction is one setting."""

import gin
import pytest

from official_repro.tasks import objectives
from official_repro.training import gin_utils


def _task_config(records, *bindings):
  gin.clear_config()
  try:
    gin_utils.parse_config(
        [],
        [
            'encoder.hidden_size = 16',
            'encoder.num_layers = 1',
            'encoder.num_attention_heads = 2',
            'encoder.intermediate_size = 32',
            f'pretrain_data.input_path = {records!r}',
            'pretrain_data.max_seq_length = 32',
            'pretrain_data.masking = "static"',
            'pretrain_data.train_batch_size = 8',
            *bindings,
        ],
    )
    return objectives.task_config_from_gin('masked_lm')
  finally:
    gin.clear_config()


def test_next_sentence_prediction_sets_the_head_and_the_labels(static_records):
  config = _task_config(
      static_records, 'masked_lm.next_sentence_prediction = True'
  )
  (head,) = config.model.cls_heads
  assert (head.name, head.num_classes, head.inner_dim) == (
      'next_sentence',
      2,
      16,
  )
  assert config.train_data.use_next_sentence_label
  assert config.validation_data.use_next_sentence_label
  plain = _task_config(static_records)
  assert not plain.model.cls_heads
  assert not plain.train_data.use_next_sentence_label


@pytest.mark.parametrize(
    'binding',
    [
        'masked_lm.cls_heads = []',
        'pretrain_data.use_next_sentence_label = True',
    ],
)
def test_derived_settings_are_not_gin_settings(static_records, binding):
  with pytest.raises(ValueError, match='cls_heads|use_next_sentence_label'):
    _task_config(static_records, binding)
