"""Benchmarks and paper-table regeneration drivers.

Importing `official_repro` first sets the environment TensorFlow reads when
it is imported (Keras 2, quiet C++ start-up; see its `__init__`).
"""

import official_repro  # noqa: F401  (sets up the environment on import)
