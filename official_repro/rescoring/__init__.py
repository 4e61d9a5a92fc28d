"""N-best rescoring: second-pass LM scores and their interpolation."""
