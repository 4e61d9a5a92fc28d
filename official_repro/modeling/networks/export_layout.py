"""The file layout of an exported encoder, shared by its writers and reader.

`<model_dir>/encoder/encoder-<step>` checkpoints (`tf.train.Checkpoint(
encoder=...)`), the config that rebuilds the encoder, and its tokenizer:
written by pretraining (`training/export.py`) and by conversions of released
models (`modeling/interchange/converted.py`), read by every command that
takes `--init_checkpoint` (`modeling/networks/pretrained.py`).
"""

ENCODER_SUBDIR = 'encoder'
CHECKPOINT_PREFIX = 'encoder'
ENCODER_CONFIG_FILENAME = 'encoder_config.json'
TOKENIZER_FILENAME = 'tokenizer.json'
