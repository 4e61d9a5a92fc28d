"""Keras models: backbones (networks/), heads, pretrainers."""
