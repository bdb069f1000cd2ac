"""The cluster port: one interface, a real API client and an in-memory API with real semantics."""
