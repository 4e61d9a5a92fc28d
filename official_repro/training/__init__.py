"""Training infrastructure: trainer, experiment assembly, strategies, gin."""
