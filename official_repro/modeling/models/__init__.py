"""Fine-tuning models missing from `official.nlp.modeling.models`."""
