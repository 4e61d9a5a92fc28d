"""Metrics and compute accounting (FLOPs)."""
