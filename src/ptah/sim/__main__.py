"""``python -m ptah.sim [options]``: the same command as ``python -m ptah.testing.sim``."""

from __future__ import annotations

import sys

from ptah.testing.sim.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
