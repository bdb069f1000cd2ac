"""Test machinery, not product: the local control plane (:mod:`.devcluster`), the
fault-injecting simulation (:mod:`.sim`) and the in-memory Kubernetes API it runs on
(:mod:`.memory`).

It lives in the source tree so that it is typed and linted with the code it tests, and
imported from the checkout's dev venv (``ptah dev ...``, ``python -m ptah.testing.sim``,
the tests and benchmarks); the wheel (``pyproject.toml``: ``packages.find.exclude``) and
the image (``.dockerignore``) leave it out, and no runtime package imports it
(tests/unit/test_layers.py). The operator and the runner run without it.
"""
