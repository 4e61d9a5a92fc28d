"""Optimizer and learning-rate configuration."""
