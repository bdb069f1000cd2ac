"""Label scoping: an operator reconciles only the primaries carrying its labels."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from ptah.cli.operate import _labels
from ptah.kube import kinds
from ptah.kube.watch import WatchEvent
from ptah.operator.controller import Controller, Settings
from ptah.operator.main import families
from ptah.testing.memory import MemoryCluster


def _event(type_: str, name: str, labels: dict[str, str], kind: Any = kinds.SCHEMA) -> WatchEvent:
    return WatchEvent(
        type_,
        kind,
        {
            "kind": kind.kind,
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": labels},
            "spec": {"resourceRef": {"kind": "PtahSchema", "name": name}},
        },
    )


def test_only_selected_primaries_and_their_events_are_queued() -> None:
    c = Controller(MemoryCluster(), families(), Settings(label_selector={"team": "a"}))
    c.handle(_event("ADDED", "theirs", {"team": "b"}))
    c.handle(_event("ADDED", "ours", {"team": "a", "x": "y"}))
    key = c.queue.get(0)
    assert key is not None and key.name == "ours"
    c.queue.done(key)
    assert c.queue.get(0) is None
    # An approval naming another operator's resource wakes nothing here.
    c.handle(_event("ADDED", "theirs", {}, kind=kinds.APPROVAL))
    assert c.queue.get(0) is None
    c.handle(_event("ADDED", "ours", {}, kind=kinds.APPROVAL))
    assert c.queue.get(0) == key
    c.queue.done(key)
    # Relabelled away: it leaves the index, and later events about it are ignored.
    c.handle(_event("MODIFIED", "ours", {"team": "b"}))
    c.handle(_event("ADDED", "ours", {}, kind=kinds.APPROVAL))
    assert c.queue.get(0) is None
    assert not c.index.has(key)


def test_selector_syntax() -> None:
    assert _labels("team=a, tier=db") == {"team": "a", "tier": "db"}
    for bad in ("team", "team!=a", "a=b=c"):
        with pytest.raises(argparse.ArgumentTypeError):
            _labels(bad)
