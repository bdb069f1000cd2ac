"""What a controller process has itself seen of dispatched runs, kept across its passes.

The hold (:mod:`ptah.lifecycle.hold`) is measured on this process's own clock from its
own sightings, like a Lease's expiry; these are those sightings. They live as long as
the process: a restarted process starts over, which only lengthens a hold. Keyed by
``namespace/name/operationId``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


def run_key(namespace: str, name: str, operation_id: str) -> str:
    """The key of one resource's run ``operation_id`` in :class:`Sightings`."""
    return f"{namespace}/{name}/{operation_id}"


@dataclass
class Sightings:
    """This process's sightings of dispatched runs.

    ``since``: when each run's hold counts from (its first sighting, or the last look
    that could have missed a Pod starting). ``waiting``: the runs that had a Pod waiting
    to start at the last look that could read the API. ``jobless``: the runs whose Job
    this process has already looked for and found gone. ``read``: the runs this process
    has had a look at that could read the API."""

    since: dict[str, datetime] = field(default_factory=dict)
    waiting: set[str] = field(default_factory=set)
    jobless: set[str] = field(default_factory=set)
    read: set[str] = field(default_factory=set)

    def forget(self, key: str) -> None:
        self.since.pop(key, None)
        self.waiting.discard(key)
        self.jobless.discard(key)
        self.read.discard(key)
