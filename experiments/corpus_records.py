"""The experiments' pretraining records: a book corpus, built once.

Gutenberg boilerplate stripped, one document per file, whole books held out,
dynamic masking, a lower-cased WordPiece vocabulary (given or learned), as
the README's "Your own corpus" command makes them.
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
  """The records' metadata, built in `output_dir` unless already there.

  `corpus` holds one book per file; without `vocab_file` one of `vocab_size`
  is learned; `eval_fraction` of the books are the eval split.
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
