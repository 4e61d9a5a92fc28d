"""official_repro: TF2 reproductions of ELECTRA-family pretraining papers.

Model Garden layers are built on Keras 2 (`tf_keras`). With TensorFlow 2.20,
`tf.keras` is Keras 3 unless `TF_USE_LEGACY_KERAS=1` is set before TensorFlow
is first imported, so the package sets it here, before any submodule imports
TensorFlow. It also quiets TensorFlow's C++ start-up messages (informational
and warnings, and on a machine without a GPU driver the CUDA probe's error;
`TF_CPP_MIN_LOG_LEVEL=0` brings them back), so that a
command's own output, one line for a user's mistake (`common/cli.py`), is
not buried in them. Run as `python -m official_repro.<command>`, a Ctrl-C
or SIGTERM before the command's `main` begins (while TensorFlow imports)
ends it at once (`cli.stop_while_starting`).
"""

import os

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')
# Without an NVIDIA driver, TensorFlow's CUDA probe logs an error line
# ('failed call to cuInit') that says only that there is no GPU: level 3
# hides it there, level 2 (informational and warnings) elsewhere. The
# driver's /proc entry is this machine's, never a user path (so no gfile).
os.environ.setdefault(
    'TF_CPP_MIN_LOG_LEVEL',
    '2' if os.path.exists('/proc/driver/nvidia') else '3',
)

# pylint: disable=g-import-not-at-top,wrong-import-position
from official_repro.common import cli  # noqa: E402

cli.stop_while_starting()
