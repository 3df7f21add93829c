"""An example jsbench plugin: the `cosine` schedule source and the `median-loo` baseline (see README.md)."""
