"""The local control plane for tests and the demo: built binaries, node agent, dev up/down."""
