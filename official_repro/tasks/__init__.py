"""Model Garden Task classes, one per objective or fine-tuning task."""
