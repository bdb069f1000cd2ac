"""``python -m ptah.sim``: the fault-injecting simulation under its short name.

The simulation is test machinery and lives in :mod:`ptah.testing.sim`, out of the wheel
and the image. This package only gives it the command that issue 11 and independent
checks call (``python -m ptah.sim --schedules 300``); it is excluded from the wheel and
the image like the machinery it forwards to, and holds no logic of its own.
"""
