"""Pretraining heads: replaced-token detection (later, MWS, self-critic)."""
