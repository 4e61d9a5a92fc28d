"""Helpers every layer may use (data, modeling, training, experiments)."""
