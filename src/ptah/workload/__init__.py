"""Job builder and deterministic Job names."""
