"""The `ptah` command."""
