"""Encoder backbones built from a backbone-agnostic EncoderConfig."""
