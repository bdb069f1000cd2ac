"""A large desired file loads into the temporary scratch database in committed batches
(one transaction would lock every relation it creates until its end and outgrow the
server's lock table): the plan is the one a single transaction gives, and a failure in a
later batch still names its line of the desired file."""

from __future__ import annotations

import uuid

import pytest

from ptah.engines import planner
from ptah.engines.base import DesiredSchemaInvalid
from ptah.engines.confine import StatementRefused
from ptah.engines.connect import open_target
from ptah.engines.postgres import scratch
from ptah.engines.urls import parse_url
from support.databases import fresh_database


def _desired(tables: int) -> str:
    out = ["CREATE SCHEMA app;"]
    for i in range(tables):
        ref = f" REFERENCES app.t{i - 1}(id)" if i else ""
        out.append(f"CREATE TABLE app.t{i} (id bigint PRIMARY KEY, up bigint{ref}, name text);")
        out.append(f"CREATE INDEX t{i}_name ON app.t{i} (name);")
    return "\n".join(out) + "\n"


def test_batched_load_plans_what_one_transaction_plans(
    pg_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    desired = _desired(12)  # 25 statements
    with open_target(pg_db) as t:
        whole = planner.plan(t, desired)
        monkeypatch.setattr(scratch, "BATCH", 4)
        batched = planner.plan(t, desired)
    assert [s.sql for s in batched.statements] == [s.sql for s in whole.statements]
    assert batched.fingerprint_after == whole.fingerprint_after
    assert len(batched.statements) >= 25  # every table and index of the 25 statements


@pytest.mark.parametrize(
    "broken",
    [
        "CREATE TABLE app.broken (id bigint REFERENCES app.nowhere(id));",  # no position
        "CREATE TABLE app.broken (id bigint,, name text);",  # a syntax error's position
        # ... at the end of its line: a position read a few characters off names the next
        "CREATE TABLE app.broken (id bigint,,\n  name text);",
    ],
)
def test_a_failure_in_a_later_batch_names_its_line(
    pg_db: str, monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    lines = _desired(12).splitlines()
    lines[20] = broken
    desired = "\n".join(lines) + "\n"
    monkeypatch.setattr(scratch, "BATCH", 4)
    with open_target(pg_db) as t, pytest.raises(DesiredSchemaInvalid) as caught:
        planner.plan(t, desired)
    assert "line 21 of the desired file" in str(caught.value)


@pytest.mark.parametrize("desired", [_desired(3), _desired(3) + "CREATE TABLE app.t0 (x int);\n"])
def test_the_scratch_dropped_behind_the_plan_is_gone_when_the_plan_returns(
    pg_db: str, monkeypatch: pytest.MonkeyPatch, desired: str
) -> None:
    """The drop runs beside the diff, and the plan (or its failure) is returned only
    after it: no scratch database outlives the call."""
    names: list[str] = []
    real = scratch._drop_behind

    def noted(admin: object, name: str, seconds: dict[str, float], loaded: object = None) -> None:
        names.append(name)
        real(admin, name, seconds, loaded)

    monkeypatch.setattr(scratch, "_drop_behind", noted)
    with open_target(pg_db) as t:
        try:
            plan = planner.plan(t, desired)
            assert plan.statements and "waitScratchDrop" in plan.timings
        except DesiredSchemaInvalid:
            assert "app.t0" in desired.splitlines()[-1]
        assert len(names) == 1
        left = t.connection.execute(
            "SELECT count(*) FROM pg_database WHERE datname = %s", (names[0],)
        ).fetchone()
    assert left == (0,)


@pytest.mark.parametrize(
    "desired, refused",
    [
        (_desired(3), None),
        (_desired(3) + "CREATE TABLE app.t0 (x int);\n", DesiredSchemaInvalid),
        (_desired(3) + "ALTER SYSTEM SET work_mem = '64MB';\n", StatementRefused),
    ],
)
def test_the_scratch_created_while_the_source_is_checked_is_gone_when_the_plan_returns(
    pg_db: str, monkeypatch: pytest.MonkeyPatch, desired: str, refused: type | None
) -> None:
    """The empty scratch is created beside the confinement check; the load takes it, and
    a source the check refuses (never loaded) leaves no scratch behind either."""
    made: list[scratch.Reserved] = []
    real = scratch.Reserved.__init__

    def noted(self: scratch.Reserved, url: object) -> None:
        real(self, url)  # type: ignore[arg-type]
        made.append(self)

    monkeypatch.setattr(scratch.Reserved, "__init__", noted)
    with open_target(pg_db) as t:
        if refused is None:
            assert planner.plan(t, desired).statements
        else:
            with pytest.raises(refused):
                planner.plan(t, desired)
        assert len(made) == 1
        found = t.connection.execute(
            "SELECT count(*) FROM pg_database WHERE datname = %s", (made[0].name,)
        ).fetchone()
    assert found == (0,) and made[0].seconds.get("create", 0.0) > 0.0


# A function of the desired file that, first on the search path, would shadow the
# catalog's own format_type(): every column would read as "shadowed".
_SHADOW = (
    "CREATE FUNCTION app.format_type(oid, integer) RETURNS text LANGUAGE sql"
    " AS $$ SELECT 'shadowed'::text $$;\n"
    "SELECT pg_catalog.set_config('search_path', 'app, pg_catalog', false);\n"
)


def test_a_batched_load_is_inspected_with_the_catalog_first_on_the_path(
    pg_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batches commit in autocommit; the inspection after them runs in a
    transaction of its own, so its SET LOCAL search_path holds and a path the file left
    behind does not decide which functions the inspection calls."""
    desired = _desired(3) + _SHADOW
    with open_target(pg_db) as t:
        whole = planner.plan(t, desired)
        monkeypatch.setattr(scratch, "BATCH", 2)
        batched = planner.plan(t, desired)
    tables = [s.sql for s in batched.statements if "CREATE TABLE" in s.sql]
    assert tables and not any("shadowed" in sql for sql in tables), tables
    assert [s.sql for s in batched.statements] == [s.sql for s in whole.statements]


def test_a_dev_database_loads_unqualified_names_and_is_left_as_found(
    pg_db: str, pg_url: str
) -> None:
    """The dev database's emptiness check reads it with the catalog alone on the path;
    the load after it still creates unqualified names in the file's own schema (public),
    and the one transaction of both is rolled back."""
    with fresh_database(pg_url) as dev_url, open_target(pg_db) as t:
        plan = planner.plan(t, "CREATE TABLE plain (id int);", dev_url=parse_url(dev_url))
        with open_target(dev_url) as d:
            left = d.connection.execute(
                "SELECT count(*) FROM pg_class WHERE relname = 'plain'"
            ).fetchone()
    created = [s.sql for s in plan.statements]
    assert len(created) == 1 and "plain" in created[0] and "public" in created[0], created
    assert left == (0,)


def _roles(pg_db: str, name: str) -> int:
    with open_target(pg_db) as t:
        row = t.connection.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s", (name,))
        return int(row.fetchone()[0])


@pytest.mark.parametrize("batch", [4, 2000])  # committed parts; one rolled-back transaction
def test_a_refusal_in_a_later_part_stops_the_load_before_it(
    pg_db: str, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    """The scratch loads each part of the file once the check passed it, while the check
    reads the next: a statement refused in a later part never runs (the role it would
    make is not made), the parts before it did run (into the scratch, which is gone
    when the plan returns), and the refusal names its line."""
    role = f"ptah_part_{uuid.uuid4().hex[:8]}"
    desired = _desired(12) + f"CREATE ROLE {role};\n"
    monkeypatch.setattr(scratch, "BATCH", batch)
    monkeypatch.setattr(scratch, "CHUNK", 4)
    ran: list[int] = []
    real = scratch._Loader.allow
    monkeypatch.setattr(scratch._Loader, "allow", lambda self, n: (ran.append(n), real(self, n)))
    made: list[str] = []
    create = scratch._create
    monkeypatch.setattr(scratch, "_create", lambda *a: (made.append(a[1]), create(*a))[1])
    with open_target(pg_db) as t, pytest.raises(StatementRefused) as refused:
        planner.plan(t, desired)
    assert refused.value.line == len(desired.splitlines())
    assert _roles(pg_db, role) == 0
    assert ran and 0 < max(ran) < 25  # parts of the 25 statements before it were let through
    with open_target(pg_db) as t:
        left = t.connection.execute(
            "SELECT count(*) FROM pg_database WHERE datname LIKE 'ptah_scratch_%%'"
            " AND datname = ANY(%s)",
            (made or [""],),
        ).fetchone()
    assert left == (0,)


def test_a_load_error_before_a_refusal_is_reported_as_the_refusal(
    pg_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part that fails to load does not end the check: the file is refused for its
    later statement, as when the whole file was checked before anything ran."""
    lines = _desired(12).splitlines()
    lines[2] = "CREATE TABLE app.t0 (x int);"  # exists already: the first part fails
    desired = "\n".join(lines) + "\nALTER SYSTEM SET work_mem = '64MB';\n"
    monkeypatch.setattr(scratch, "BATCH", 4)
    monkeypatch.setattr(scratch, "CHUNK", 4)
    with open_target(pg_db) as t, pytest.raises(StatementRefused) as refused:
        planner.plan(t, desired)
    assert refused.value.line == len(desired.splitlines())
