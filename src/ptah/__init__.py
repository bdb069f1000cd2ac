"""Ptah: a Kubernetes operator that changes relational database schemas safely."""
