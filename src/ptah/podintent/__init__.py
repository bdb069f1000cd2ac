"""The Pod admission snapshot and its digest: the admission envelope."""
