"""The experiments' pretraining records: a book corpus, built once.

`script_nbest` and `regenerate` both pretrain on a directory of books
(Project Gutenberg boilerplate stripped, one document per file, whole books
held out for evaluation) as dynamically masked records with a lower-cased
WordPiece vocabulary, given or learned from the training books, as the
README's "Your own corpus" command makes them.
"""

import os
from typing import Any, Dict, Optional

import tensorflow as tf

from official_repro.data import create_pretraining_data
from official_repro.data import records


def books_records(
    corpus: str,
    vocab_file: Optional[str],
    output_dir: str,
    max_seq_length: int = 128,
    vocab_size: Optional[int] = None,
    eval_fraction: float = 0.01,
) -> Dict[str, Any]:
  """Builds the records in `output_dir` unless they are there already.

  `corpus` is a directory of text files, one book each; without
  `vocab_file` a vocabulary of `vocab_size` is learned from the training
  books; `eval_fraction` of the books are held out as the eval split.

  Returns:
    The records' metadata (`official_repro.data.records`).
  """
  metadata_path = os.path.join(output_dir, records.METADATA_FILENAME)
  if tf.io.gfile.exists(metadata_path):
    return records.load_metadata(metadata_path)
  return create_pretraining_data.prepare_pretraining_data(
      [corpus],
      output_dir,
      vocab_file=vocab_file,
      vocab_size=None if vocab_file else vocab_size,
      lower_case=True,
      document_mode='file',
      strip_gutenberg=True,
      max_seq_length=max_seq_length,
      masking='dynamic',
      eval_fraction=eval_fraction,
  )
