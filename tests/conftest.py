"""Shared test support.

``tests/support`` is importable as ``support``, and the real control plane's fixtures
(``cluster``, session-scoped, and ``namespace``) are registered here once, so the
integration and end-to-end tests share one cluster per session.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from support.cluster import (  # noqa: F401
    agent_cluster,
    cluster,
    namespace,
    real_cluster,
    real_namespace,
)
