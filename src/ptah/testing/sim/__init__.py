"""Deterministic fault-injecting simulation of both families on the in-memory API."""
