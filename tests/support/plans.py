"""Planning a desired file through the runner's own operation, and what a plan left on
a PostgreSQL server: shared by the tests of the scratch's bounds (time, size)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

from ptah.api.resources import PlanSpec
from ptah.engines.connect import open_target
from ptah.engines.urls import parse_url
from ptah.runner import operations
from ptah.runner.emit import Run
from ptah.runner.frame import ResultFrame


def plan_frame(
    url: str, sql: str, tmp_path: Path, operation_id: str, dev_url: str | None = None
) -> ResultFrame:
    """The frame of a plan of ``sql`` against ``url`` (a dev database when given)."""
    desired = tmp_path / "desired.sql"
    desired.write_text(sql)
    with open_target(url) as target:
        run = Run.on(target, "plan", operation_id, parse_url(dev_url) if dev_url else None)
        return ResultFrame.model_validate(operations.plan(run, str(desired), None))


def backends(url: str, marker: str, active_only: bool = False) -> list[int]:
    """The server's other backends whose (last) query holds ``marker``."""
    active = " AND state = 'active'" if active_only else ""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT pid FROM pg_stat_activity WHERE query LIKE %s{active}"
            " AND pid <> pg_backend_pid()",
            (f"%{marker}%",),
        ).fetchall()
    return [r[0] for r in rows]


def public_relations(url: str) -> int:
    """How many relations the database's public schema holds (a dev database left as
    found holds none)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public'"
        ).fetchone()
    return int(row[0]) if row else 0


def plan_spec(**over: Any) -> PlanSpec:
    """A PtahPlan spec of a schema on PostgreSQL, computed under placeholder inputs;
    ``over`` sets its other fields (wire names: ``statements``, ``warnings``)."""
    base: dict[str, Any] = {
        "ownerKind": "PtahSchema",
        "ownerName": "s",
        "ownerUid": "u",
        "engine": "postgres",
        "computedUnder": {
            "source": "s",
            "targetSchema": "t",
            "expectedAfter": "e",
            "policy": "p",
            "bindingEpoch": 1,
            "database": "d",
            "generation": 1,
        },
    }
    return PlanSpec.model_validate({**base, **over})
