"""Reading a split back into arrays."""

import tensorflow as tf

from official_repro.data import records


def test_read_split_returns_every_example_in_file_order(tiny_records):
  metadata = records.load_metadata(tiny_records)
  arrays = records.read_split(tiny_records, 'eval')
  assert len(arrays['input_ids']) == metadata['splits']['eval']['num_examples']
  first = next(
      iter(
          tf.data.TFRecordDataset(
              records.split_files(metadata, tiny_records, 'eval')
          )
      )
  )
  parsed = tf.io.parse_single_example(first, records.feature_spec(metadata))
  for name, value in parsed.items():
    assert (arrays[name][0] == value.numpy()).all(), name
