"""The file layout of an exported encoder, shared by its writers and reader.

`encoder/encoder-<step>` checkpoints, the config and the tokenizer: written
by `training/export.py` and `interchange/converted.py`, read by
`networks/pretrained.py`.
"""

ENCODER_SUBDIR = 'encoder'
CHECKPOINT_PREFIX = 'encoder'
ENCODER_CONFIG_FILENAME = 'encoder_config.json'
TOKENIZER_FILENAME = 'tokenizer.json'
