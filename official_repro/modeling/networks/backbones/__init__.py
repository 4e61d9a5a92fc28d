"""Built-in backbones; every module here registers one (see `encoders`)."""
