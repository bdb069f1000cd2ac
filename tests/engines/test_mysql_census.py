"""Nothing silent on MariaDB either: what inspection does not take in (triggers, stored
routines, sequences, system-versioned tables) refuses the desired source by name, is
left out only when the policy ignores its kind, and on the target is reported and kept."""

from __future__ import annotations

import pymysql
import pytest

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import PlanError, SchemaPolicy
from ptah.engines.urls import parse_url

pytestmark = pytest.mark.integration

BASE = "CREATE TABLE t (id INT PRIMARY KEY, n INT NOT NULL DEFAULT 0);\n"

UNMANAGED = {
    "trigger": (
        "CREATE TRIGGER t_bump BEFORE INSERT ON t FOR EACH ROW SET NEW.n = NEW.n + 1;",
        "trigger t_bump",
    ),
    "procedure": (
        "CREATE PROCEDURE p_clear() DELETE FROM t;",
        "procedure p_clear",
    ),
    "function": (
        "CREATE FUNCTION f_twice(x INT) RETURNS INT DETERMINISTIC RETURN x * 2;",
        "function f_twice",
    ),
    "sequence": ("CREATE SEQUENCE s_ids START WITH 10;", "sequence s_ids"),
    "system-versioned table": (
        "CREATE TABLE h (id INT PRIMARY KEY) WITH SYSTEM VERSIONING;",
        "system-versioned table h",
    ),
}


@pytest.mark.parametrize("kind", sorted(UNMANAGED))
def test_desired_unmanaged_object_is_refused_by_name(mysql_db: str, kind: str) -> None:
    extra, named = UNMANAGED[kind]
    with open_target(mysql_db) as t, pytest.raises(PlanError) as err:
        planner.plan(t, BASE + extra)
    assert err.value.reason == "Unmanaged"
    assert named in str(err.value)
    assert "ptah_scratch" not in str(err.value)


def test_ignored_kind_is_left_out_of_the_plan(mysql_db: str) -> None:
    extra, _ = UNMANAGED["trigger"]
    with open_target(mysql_db) as t:
        plan = planner.plan(t, BASE + extra, policy=SchemaPolicy(ignore=("trigger",)))
    assert [s.sql.split("(")[0].strip() for s in plan.statements] == ["CREATE TABLE `t`"]


def _query(url: str, sql: str) -> list[tuple[object, ...]]:
    """Run ``sql`` on the database at ``url`` outside Ptah, committed; its rows."""
    u = parse_url(url)
    conn = pymysql.connect(
        host=u.host, port=u.port, user=u.user, password=u.password, database=u.database
    )
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            rows = list(cur.fetchall())
        conn.commit()
        return rows
    finally:
        conn.close()


def test_target_unmanaged_object_is_reported_and_kept(mysql_db: str) -> None:
    with open_target(mysql_db) as t:
        plan = planner.plan(t, BASE)
        planner.apply(t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after)
    _query(mysql_db, UNMANAGED["trigger"][0])
    with open_target(mysql_db) as t:
        plan = planner.plan(t, BASE)
    assert plan.statements == []
    assert "not managed by Ptah, left as it is on the target: trigger t_bump" in plan.warnings
    triggers = (
        "SELECT trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE()"
    )
    assert _query(mysql_db, triggers) == [("t_bump",)]


def test_a_default_from_an_ignored_sequence_names_the_targets_own(mysql_db: str) -> None:
    """``DEFAULT NEXTVAL(s)`` is shown qualified (``nextval(`db`.`s`)``): the desired side's
    named the scratch, gone by apply, and the plan's CREATE failed there; the probe of an
    ALTER of such a table failed on the table's CREATE (the sequence is not in the probe)."""
    policy = SchemaPolicy(ignore=("sequence",))
    _query(mysql_db, "CREATE SEQUENCE s START WITH 100")
    table = "CREATE TABLE t (id BIGINT NOT NULL DEFAULT NEXTVAL(s) PRIMARY KEY, a {});"
    for version in ("INT", "BIGINT"):
        desired = "CREATE SEQUENCE s START WITH 100;\n" + table.format(version)
        with open_target(mysql_db) as t:
            plan = planner.plan(t, desired, policy=policy)
            assert all("ptah_" not in s.sql for s in plan.statements), plan.statements
            done = planner.apply(
                t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
            )
            assert done.outcome == "succeeded", done.message
            assert planner.plan(t, desired, policy=policy).statements == []
    assert _query(mysql_db, "INSERT INTO t (a) VALUES (1) RETURNING id") == [(100,)]


def test_an_alter_naming_an_ignored_table_kind_is_not_refused(mysql_db: str) -> None:
    """The probe of a plan's ALTERs makes the target's inspected tables only: an ALTER that
    names a sequence or a system-versioned table (ignored kinds, left on the target) fails
    there alone, and must not refuse the plan as a change the server cannot make."""
    policy = SchemaPolicy(ignore=("sequence", "system-versioned table"))
    kept = "CREATE SEQUENCE s;\nCREATE TABLE h (id INT PRIMARY KEY) WITH SYSTEM VERSIONING;\n"
    _query(mysql_db, "CREATE SEQUENCE s")
    _query(mysql_db, "CREATE TABLE h (id INT PRIMARY KEY) WITH SYSTEM VERSIONING")
    for desired in (
        kept + "CREATE TABLE t (id INT PRIMARY KEY, hid INT);",
        kept + "CREATE TABLE t (id INT PRIMARY KEY, hid INT, n BIGINT DEFAULT NEXTVAL(s),"
        " CONSTRAINT f FOREIGN KEY (hid) REFERENCES h (id));",
    ):
        with open_target(mysql_db) as t:
            plan = planner.plan(t, desired, policy=policy)
            done = planner.apply(
                t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
            )
            assert done.outcome == "succeeded", done.message
            assert planner.plan(t, desired, policy=policy).statements == []
