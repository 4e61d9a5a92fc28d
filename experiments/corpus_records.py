"""The experiments' pretraining records: a book corpus, built once.

`script_nbest` and `regenerate` both pretrain on a directory of books
(Project Gutenberg boilerplate stripped, one document per file) as
128-token records with dynamic masking and a given lower-cased WordPiece
vocabulary, as the README's "Your own corpus" command makes them.
"""

import os
from typing import Any, Dict

import tensorflow as tf

from official_repro.data import create_pretraining_data
from official_repro.data import records


def books_records(corpus: str, vocab_file: str, output_dir: str
                  ) -> Dict[str, Any]:
  """Builds the records in `output_dir` unless they are there already.

  Args:
    corpus: directory of text files, one book each (any tf.io.gfile path).
    vocab_file: WordPiece vocabulary.
    output_dir: where the records and their metadata go.

  Returns:
    The records' metadata (`official_repro.data.records`).
  """
  metadata_path = os.path.join(output_dir, records.METADATA_FILENAME)
  if tf.io.gfile.exists(metadata_path):
    return records.load_metadata(metadata_path)
  return create_pretraining_data.prepare_pretraining_data(
      [corpus], output_dir, vocab_file=vocab_file, lower_case=True,
      document_mode='file', strip_gutenberg=True, max_seq_length=128,
      masking='dynamic')
