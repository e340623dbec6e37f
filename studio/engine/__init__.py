"""Runtime engine: streaming features, face model and the pipeline around them."""
