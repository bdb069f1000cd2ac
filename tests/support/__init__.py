"""The one copy of each test helper shared across tiers (importable as ``support``).

* ``wait``: ``wait_for``, the only place a test waits (polling for evidence).
* ``databases``: the test databases' URLs (env, then ``${PTAH_CACHE}/db/env``), a
  database name swapped into a URL, a fresh database per test, and "missing: fail
  under CI, skip elsewhere".
* ``cluster``: the real local control plane (fixtures registered by tests/conftest.py).
* ``lifecycle_harness``: one lifecycle driven pass by pass, on the memory or real port.
* ``simworld``: a simulated world built by hand, to replay one schedule.

Tier helpers build on these: ``tests/e2e/e2esupport.py`` (the operator as a process,
and ``wait_passes``, the barrier before asserting that something did not happen),
``tests/e2e/migflow.py`` and ``tests/migrations/migsupport.py``.
"""
