"""Corpora, vocabularies, pretraining records and fine-tuning datasets."""
