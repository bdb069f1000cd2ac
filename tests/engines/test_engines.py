"""Plan, apply, re-plan, change, drift and identity against real PostgreSQL, MariaDB, SQLite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ptah.engines import planner
from ptah.engines.base import DesiredSchemaInvalid, ScratchUnavailable
from ptah.engines.confine import StatementRefused
from ptah.engines.connect import open_target
from ptah.engines.model import (
    DATA_DEPENDENT,
    DESTRUCTIVE,
    LOCK_HEAVY,
    Online,
    SchemaPolicy,
)
from support.databases import database_of

BRIEF_ALL = "locks reads and writes: brief, no scan"

SCHEMAS = Path(__file__).parent / "schemas"

pytestmark = pytest.mark.integration


def _roundtrip(url: str, sql: str) -> planner.Plan:
    with open_target(url) as t:
        plan = planner.plan(t, sql)
        assert plan.statements
        result = planner.apply(
            t,
            plan.statements,
            plan.fingerprint_before,
            allow_destructive=True,
            expected_after=plan.fingerprint_after,
        )
        assert result.outcome == "succeeded", result.message
        assert result.fingerprint_after == plan.fingerprint_after
        again = planner.plan(t, sql)
        assert again.statements == [], [s.sql for s in again.statements]
        assert again.fingerprint_before == plan.fingerprint_after
    return plan


def _change(url: str, sql: str, online: Online | None = None) -> list[tuple[str, tuple[str, ...]]]:
    with open_target(url) as t:
        plan = planner.plan(t, sql, policy=SchemaPolicy(online=online or Online()))
        out = [(" ".join(s.sql.split()), s.hazards) for s in plan.statements]
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", result.message
        assert planner.plan(t, sql).statements == []
    return out


PG_V1 = (SCHEMAS / "pg_v1.sql").read_text()


def test_pg_empty_to_schema_and_back_to_no_changes(pg_db: str) -> None:
    plan = _roundtrip(pg_db, PG_V1)
    sqls = [s.sql for s in plan.statements]
    assert sqls[0].startswith("CREATE EXTENSION")
    assert not plan.destructive
    # foreign keys after the tables and constraints they reference; views last but comments
    fk = next(i for i, s in enumerate(sqls) if "FOREIGN KEY" in s)
    assert fk > max(i for i, s in enumerate(sqls) if s.startswith("CREATE TABLE"))
    assert sqls.index(next(s for s in sqls if "VIEW app.open_count" in s)) > sqls.index(
        next(s for s in sqls if "VIEW app.open_orders" in s)
    )


def test_pg_changes_are_minimal_with_hazards(pg_db: str) -> None:
    _roundtrip(pg_db, PG_V1)
    v2 = (
        PG_V1.replace("('new', 'paid', 'shipped')", "('new', 'paid', 'refunded', 'shipped')")
        .replace('  note text COLLATE "C"\n', '  note text COLLATE "C",\n  weight int NOT NULL\n')
        .replace("created_at timestamptz NOT NULL DEFAULT now(),", "")
        .replace("CREATE INDEX orders_customer ON", "CREATE UNIQUE INDEX orders_customer ON")
        .replace("COMMENT ON COLUMN app.customers.email IS 'Login';", "")
    )
    got = dict(_change(pg_db, v2, Online.off()))
    assert got == {
        "ALTER TABLE app.customers DROP COLUMN created_at": (DESTRUCTIVE, BRIEF_ALL),
        "ALTER TYPE app.order_status ADD VALUE 'refunded' AFTER 'paid'": (),
        "ALTER TABLE app.orders ADD COLUMN weight integer NOT NULL": (DATA_DEPENDENT, BRIEF_ALL),
        "DROP INDEX app.orders_customer": (BRIEF_ALL,),
        "CREATE UNIQUE INDEX orders_customer ON app.orders USING btree (customer_id)": (
            DATA_DEPENDENT,
            LOCK_HEAVY,
            "locks writes: builds index",
        ),
        "COMMENT ON COLUMN app.customers.email IS NULL": (),
    }


def test_pg_changed_index_is_built_beside_and_swapped_online(pg_db: str) -> None:
    _roundtrip(pg_db, PG_V1)
    v2 = PG_V1.replace("CREATE INDEX orders_customer ON", "CREATE UNIQUE INDEX orders_customer ON")
    got = _change(pg_db, v2)
    assert got == [
        (
            "CREATE UNIQUE INDEX CONCURRENTLY orders_customer_ptah_swap ON app.orders"
            " USING btree (customer_id)",
            (DATA_DEPENDENT, "allows reads and writes: builds index"),
        ),
        (
            "DROP INDEX CONCURRENTLY app.orders_customer",
            ("allows reads and writes: brief, no scan",),
        ),
        (
            "ALTER INDEX app.orders_customer_ptah_swap RENAME TO orders_customer",
            ("allows reads and writes: brief, no scan",),
        ),
    ]


def test_pg_column_alterations(pg_db: str) -> None:
    base = "CREATE TABLE t (id int PRIMARY KEY, a text, b int DEFAULT 1);"
    _roundtrip(pg_db, base)
    got = dict(
        _change(
            pg_db,
            "CREATE TABLE t (id int PRIMARY KEY, a text NOT NULL, b bigint);"
            "CREATE INDEX t_a ON t (a);",
            Online.off(),
        )
    )
    scan, rewrite = "locks reads and writes: scans table", "locks reads and writes: rewrites table"
    assert got["ALTER TABLE public.t ALTER COLUMN a SET NOT NULL"] == (
        DATA_DEPENDENT,
        LOCK_HEAVY,
        scan,
    )
    assert got["ALTER TABLE public.t ALTER COLUMN b TYPE bigint"] == (
        DATA_DEPENDENT,
        LOCK_HEAVY,
        rewrite,
    )
    assert got["ALTER TABLE public.t ALTER COLUMN b DROP DEFAULT"] == (BRIEF_ALL,)
    assert got["CREATE INDEX t_a ON public.t USING btree (a)"] == (
        LOCK_HEAVY,
        "locks writes: builds index",
    )


def test_pg_apply_refuses_drifted_target(pg_db: str) -> None:
    with open_target(pg_db) as t:
        plan = planner.plan(t, PG_V1)
        t.connection.execute("CREATE TABLE sneaky (x int)")
        result = planner.apply(t, plan.statements, plan.fingerprint_before)
        assert (result.outcome, result.reason) == ("refused", "TargetDrifted")
        assert result.progress.executed == 0
        assert t.connection.execute("SELECT to_regclass('app.customers')").fetchone() == (None,)


def test_pg_plan_is_read_only_and_cached(pg_db: str, tmp_path: object) -> None:
    with open_target(pg_db) as t:
        first = planner.plan(t, PG_V1, cache_dir=str(tmp_path))
        second = planner.plan(t, PG_V1, cache_dir=str(tmp_path))
        assert second.timings.get("cacheHit") == 1.0
        assert second.to_json() == first.to_json()
        assert planner.current_fingerprint(t) == first.fingerprint_before


def test_pg_identity_matches_database_opened(pg_db: str) -> None:
    with open_target(pg_db) as t:
        ident = t.identity()
        oid, name = t.connection.execute(
            "SELECT oid::text, datname FROM pg_database WHERE datname = current_database()"
        ).fetchone()
    assert ident.engine == "postgres"
    assert ident.key["databaseOid"] == oid and ident.key["database"] == name
    assert name == database_of(pg_db)


def test_pg_no_scratch_without_createdb_is_a_clear_error(pg_nocreatedb_url: str) -> None:
    with open_target(pg_nocreatedb_url) as t, pytest.raises(ScratchUnavailable) as err:
        planner.plan(t, "CREATE TABLE x (id int);")
    assert "may not create a temporary scratch database" in str(err.value)
    assert "PTAH_DEV_URL" in str(err.value)


def test_pg_dev_url_scratch(pg_db: str, pg_url: str, pg_nocreatedb_url: str) -> None:
    from ptah.engines.urls import parse_url

    with open_target(pg_nocreatedb_url) as t:
        plan = planner.plan(t, "CREATE TABLE public.x (id int);", dev_url=parse_url(pg_db))
    assert [s.sql for s in plan.statements] == ["CREATE TABLE public.x (\n  id integer\n)"]
    with open_target(pg_db) as dev:  # the dev database was left as found
        assert dev.connection.execute("SELECT to_regclass('public.x')").fetchone() == (None,)


SQLITE_V1 = (SCHEMAS / "sqlite_v1.sql").read_text()


def test_sqlite_roundtrip_add_column_and_rebuild(sqlite_db: str) -> None:
    _roundtrip(sqlite_db, SQLITE_V1)
    with open_target(sqlite_db) as t:
        t.connection.execute("INSERT INTO customers (email) VALUES ('a@b.c')")
    added = SQLITE_V1.replace(
        "status TEXT NOT NULL DEFAULT 'new'\n", "status TEXT NOT NULL DEFAULT 'new',\n  note TEXT\n"
    )
    assert _change(sqlite_db, added) == [('ALTER TABLE "orders" ADD COLUMN note TEXT', ())]
    rebuilt = added.replace(
        "  email TEXT NOT NULL UNIQUE,\n", "  email TEXT NOT NULL UNIQUE,\n  phone TEXT,\n"
    )
    got = _change(sqlite_db, rebuilt)
    sqls = [s for s, _ in got]
    assert 'ALTER TABLE "customers" RENAME TO "ptah_old_customers"' in sqls
    assert any(s.startswith('INSERT INTO "customers"') for s in sqls)
    assert dict(got)['DROP TABLE "ptah_old_customers"'] == (LOCK_HEAVY,)
    with open_target(sqlite_db) as t:  # data survived the rebuild
        assert t.connection.execute("SELECT email FROM customers").fetchall() == [("a@b.c",)]
    dropped = rebuilt.replace("  name TEXT NOT NULL DEFAULT '',\n", "")
    with open_target(sqlite_db) as t:
        plan = planner.plan(t, dropped)
        assert plan.destructive
        refused = planner.apply(t, plan.statements, plan.fingerprint_before)
        assert refused.reason == "DestructiveNotAllowed"


def test_sqlite_drift_and_identity(sqlite_db: str, tmp_path: object) -> None:
    with open_target(sqlite_db) as t:
        plan = planner.plan(t, SQLITE_V1)
        t.connection.execute("CREATE TABLE sneaky (x)")
        result = planner.apply(t, plan.statements, plan.fingerprint_before)
        assert result.reason == "TargetDrifted"
        ident = t.identity()
    path = sqlite_db.split("sqlite:///", 1)[1]
    assert ident.key["path"] == path
    import os

    assert ident.key["inode"] == str(os.stat(path).st_ino)
    # another spelling of the same file has the same identity
    alias = "sqlite:///" + os.path.dirname(path) + "/./target.db"
    with open_target(alias) as t2:
        assert t2.identity().digest == ident.digest


MYSQL_V1 = (SCHEMAS / "mysql_v1.sql").read_text()


def test_mysql_roundtrip_change_and_drift(mysql_db: str) -> None:
    _roundtrip(mysql_db, MYSQL_V1)
    v2 = MYSQL_V1.replace(
        "  total DECIMAL(12,2) NOT NULL,", "  total DECIMAL(12,2) NOT NULL,\n  note TEXT,"
    ).replace("  name VARCHAR(200) NOT NULL DEFAULT '',\n", "")
    got = dict(_change(mysql_db, v2))
    # MariaDB 10.11 drops and adds these columns INSTANT: the plan asks for it.
    instant = "allows reads and writes: brief, no scan"
    assert got == {
        "ALTER TABLE `customers` DROP COLUMN `name`, ALGORITHM=INSTANT": (DESTRUCTIVE, instant),
        "ALTER TABLE `orders` ADD COLUMN `note` text DEFAULT NULL AFTER `total`,"
        " ALGORITHM=INSTANT": (instant,),
    }
    with open_target(mysql_db) as t:
        plan = planner.plan(t, MYSQL_V1)
        with t.connection.cursor() as cur:
            cur.execute("CREATE TABLE sneaky (x int)")
        result = planner.apply(t, plan.statements, plan.fingerprint_before, True)
        assert result.reason == "TargetDrifted" and result.progress.executed == 0


def test_mysql_identity(mysql_db: str) -> None:
    with open_target(mysql_db) as t:
        ident = t.identity()
        with t.connection.cursor() as cur:
            cur.execute("SELECT @@server_id, @@port, DATABASE()")
            server_id, port, schema = cur.fetchone()
    assert ident.key["schema"] == schema == database_of(mysql_db)
    assert ident.key["port"] == str(port) and ident.key["serverId"] == str(server_id)


def test_pg_cache_hit_repeats_the_confinement_verdict_of_the_same_code(
    pg_db: str, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cached normalisation is used only under the confinement code that passed its
    source; other code (a digest that differs) checks and loads the source again."""
    from ptah.engines import confine

    checks: list[str] = []
    real = confine.Check.__init__  # PostgreSQL's load checks the source (confine.Check)

    def noted(self: confine.Check, sql: str, engine: str) -> None:
        checks.append(engine)
        real(self, sql, engine)  # type: ignore[arg-type]

    monkeypatch.setattr(confine.Check, "__init__", noted)
    with open_target(pg_db) as t:
        planner.plan(t, PG_V1, cache_dir=str(tmp_path))
        hit = planner.plan(t, PG_V1, cache_dir=str(tmp_path))
        assert hit.timings.get("cacheHit") == 1.0 and checks == ["postgres"]
        monkeypatch.setattr(planner, "_confinement_digest", lambda engine: "other rules")
        miss = planner.plan(t, PG_V1, cache_dir=str(tmp_path))
        assert "cacheHit" not in miss.timings and checks == ["postgres", "postgres"]
        assert miss.to_json()["statements"] == hit.to_json()["statements"]


def test_pg_a_source_refused_after_the_check_drops_its_reserved_scratch(
    pg_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scratch is created while the source is checked; a refusal of the load that
    # follows (here a dump with rows) must drop it too, not leave it on the server.
    from ptah.engines.postgres import scratch

    made: list[scratch.Reserved] = []
    real = scratch.Reserved.__init__

    def record(self: scratch.Reserved, url: Any) -> None:
        real(self, url)
        made.append(self)

    monkeypatch.setattr(scratch.Reserved, "__init__", record)
    with open_target(pg_db) as t:
        with pytest.raises(DesiredSchemaInvalid, match="FROM STDIN brings rows"):
            planner.plan(t, "CREATE TABLE t (a int);\nCOPY t (a) FROM stdin;\n1\n\\.\n")
        (reserved,) = made
        reserved._thread.join()  # its creation has finished (a leak would exist by now)
        cur = t.connection.execute(
            "SELECT count(*) FROM pg_database WHERE datname = %s", [reserved.name]
        )
        assert cur.fetchone()[0] == 0, f"{reserved.name} was left on the server"


def test_pg_a_plan_never_runs_dynamic_sql_of_the_desired_file(pg_db: str) -> None:
    # A plan is read-only; this file made it run a program on the server (the role here is
    # a superuser): the DO block's EXECUTE built a statement the check never read.
    import shutil
    import tempfile

    where = Path(tempfile.mkdtemp(prefix="ptah-dynamic-"))  # the server's user may write
    where.chmod(0o777)  # here: only the check stops the program
    mark = where / "ran"
    source = (
        "CREATE TABLE t (a int);\n"
        f"DO $$ BEGIN EXECUTE 'COPY (SELECT 1) TO PROGRAM ''touch {mark}'''; END $$;\n"
    )
    with (
        open_target(pg_db) as t,
        pytest.raises(StatementRefused, match="line 2: runs dynamic SQL"),
    ):
        planner.plan(t, source)
    assert not mark.exists()
    shutil.rmtree(where)
