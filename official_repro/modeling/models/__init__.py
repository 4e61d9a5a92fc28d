"""Fine-tuning models that Model Garden's `official.nlp.modeling.models` lacks."""
