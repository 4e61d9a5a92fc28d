"""official_repro: TF2 reproductions of ELECTRA-family pretraining papers.

Model Garden is built on Keras 2 (`tf_keras`), so `TF_USE_LEGACY_KERAS=1` is
set before TensorFlow is imported; TensorFlow's C++ start-up messages are
quieted (`TF_CPP_MIN_LOG_LEVEL=0` brings them back) so a command's one-line
errors are not buried; a signal while importing ends `python -m` at once.
"""

import os

os.environ.setdefault('TF_USE_LEGACY_KERAS', '1')
# Without an NVIDIA driver level 3 also hides the CUDA probe's error line.
os.environ.setdefault(
    'TF_CPP_MIN_LOG_LEVEL',
    '2' if os.path.exists('/proc/driver/nvidia') else '3',
)

# pylint: disable=g-import-not-at-top,wrong-import-position
from official_repro.common import cli  # noqa: E402

cli.stop_while_starting()
