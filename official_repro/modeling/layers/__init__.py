"""Reusable Keras layers for fine-tuning heads (linear-chain CRF)."""
