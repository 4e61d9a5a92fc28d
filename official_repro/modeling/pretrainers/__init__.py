"""Backbone-agnostic pretraining models and their sampling utilities."""
