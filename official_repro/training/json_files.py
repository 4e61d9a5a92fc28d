"""The atomic JSON writer, under the name the training modules import.

It lives in `official_repro/common/json_files.py`, below `data/`, whose
record metadata it also writes.
"""

from official_repro.common import json_files as _json_files

write_json = _json_files.write_json
