"""Pretraining heads: replaced-token detection (and, later, MWS, self-critic)."""
