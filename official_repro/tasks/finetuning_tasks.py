"""Imports every fine-tuning task module, which registers its tasks.

Import this module (not a task module) wherever fine-tuning task names are
looked up in `finetuning_registry`; a new task module is added here.
"""

# pylint: disable=unused-import
from official_repro.tasks import glue
from official_repro.tasks import pos_tagging
from official_repro.tasks import race
from official_repro.tasks import squad
