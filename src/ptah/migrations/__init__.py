"""Versioned migrations: directory, sum file, history table, apply."""
