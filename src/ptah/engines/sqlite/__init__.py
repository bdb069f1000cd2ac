"""SQLite through the standard library: identity, inspection, rebuild-aware diff."""
