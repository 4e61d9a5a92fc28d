"""Released models in, trained models out: Hugging Face, TF1, Model Garden."""
