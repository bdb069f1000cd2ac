"""spec.policy.ignore on MariaDB's managed kinds: a migration tool's history table, an
online schema change tool's leftover copy, a view another team keeps, are left alone
(never dropped, altered or counted as drift); a desired file that creates one is refused;
a table an ignored table's foreign key references is not dropped from under it."""

from __future__ import annotations

import pymysql
import pytest

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import PlanError, SchemaPolicy
from ptah.engines.urls import parse_url

pytestmark = pytest.mark.integration

BASE = "CREATE TABLE t (id INT PRIMARY KEY, n INT NOT NULL DEFAULT 0);\n"
TOOL = [
    "CREATE TABLE flyway_schema_history (installed_rank INT PRIMARY KEY, script TEXT,"
    " t_id INT, CONSTRAINT fk_t FOREIGN KEY (t_id) REFERENCES t (id))",
    "CREATE TABLE _t_gho (id INT PRIMARY KEY)",
    "CREATE VIEW report_v AS SELECT id FROM t",
]
POLICY = SchemaPolicy(ignore=("table flyway_*", "table _*_gho", "view report_v"))


def _run(url: str, *sql: str) -> list[tuple[object, ...]]:
    u = parse_url(url)
    conn = pymysql.connect(
        host=u.host, port=u.port, user=u.user, password=u.password, database=u.database
    )
    try:
        rows: list[tuple[object, ...]] = []
        with conn.cursor() as cur:
            for one in sql:
                cur.execute(one)
                rows = list(cur.fetchall())
        conn.commit()
        return rows
    finally:
        conn.close()


def _objects(url: str) -> list[tuple[object, ...]]:
    rows = _run(
        url,
        "SELECT table_name, table_type, create_time FROM information_schema.tables"
        " WHERE table_schema = DATABASE() AND table_name <> 't' ORDER BY 1",
    )
    return rows + _run(url, "SHOW CREATE TABLE flyway_schema_history")


def _converge(url: str, sql: str, policy: SchemaPolicy = POLICY) -> list[str]:
    with open_target(url) as t:
        plan = planner.plan(t, sql, policy=policy)
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", (result.message, [s.sql for s in plan.statements])
        assert planner.plan(t, sql, policy=policy).statements == []
    return [s.sql for s in plan.statements]


def test_tools_tables_and_views_are_left_alone(mysql_db: str) -> None:
    _converge(mysql_db, BASE)
    _run(mysql_db, *TOOL)
    objects = _objects(mysql_db)
    desired = BASE.replace("DEFAULT 0)", "DEFAULT 0, m INT)")
    with open_target(mysql_db) as t:
        unguarded = planner.plan(t, desired)
        assert {s.sql.split(" ")[0] for s in unguarded.statements} >= {"DROP"}
        plan = planner.plan(t, desired, policy=POLICY)
    assert [" ".join(s.sql.split()) for s in plan.statements] == [
        "ALTER TABLE `t` ADD COLUMN `m` int(11) DEFAULT NULL AFTER `n`, ALGORITHM=INSTANT"
    ]
    assert (
        "ignored by spec.policy.ignore, left as it is on the target:"
        " table flyway_schema_history (table flyway_*)"
    ) in plan.warnings
    _converge(mysql_db, desired)
    # The tool edits its table: still no drift.
    _run(mysql_db, "ALTER TABLE flyway_schema_history ADD COLUMN success TINYINT")
    objects = _objects(mysql_db)
    with open_target(mysql_db) as t:
        assert planner.plan(t, desired, policy=POLICY).statements == []
    assert _objects(mysql_db) == objects


def test_desired_file_creating_an_ignored_table_is_refused(mysql_db: str) -> None:
    sql = BASE + "CREATE TABLE flyway_schema_history (installed_rank INT PRIMARY KEY);"
    with open_target(mysql_db) as t, pytest.raises(PlanError) as refused:
        planner.plan(t, sql, policy=POLICY)
    said = str(refused.value)
    assert refused.value.reason == "IgnoredInDesired", said
    assert "table flyway_schema_history (table flyway_*)" in said and "\n" not in said


def test_a_table_an_ignored_table_references_is_not_dropped(mysql_db: str) -> None:
    _converge(mysql_db, BASE + "CREATE TABLE u (id INT PRIMARY KEY);")
    _run(mysql_db, TOOL[0])
    with open_target(mysql_db) as t, pytest.raises(PlanError) as refused:
        planner.plan(t, "CREATE TABLE u (id INT PRIMARY KEY);", policy=POLICY)
    said = str(refused.value)
    assert "table t would be dropped" in said and "flyway_schema_history (ignored)" in said
    # u is referenced by nothing ignored: dropped as ever.
    assert _converge(mysql_db, BASE) == ["DROP TABLE `u`"]


@pytest.mark.parametrize("reads", ["t", "v_inner"])
def test_a_table_or_view_an_ignored_view_reads_is_not_dropped(mysql_db: str, reads: str) -> None:
    """MariaDB drops a table or view another view reads without a word and leaves that
    view failing every query; the plan refuses instead when the view is ignored."""
    inner = "CREATE VIEW v_inner AS SELECT id, n FROM t;\n"
    _converge(mysql_db, BASE + inner + "CREATE TABLE u (id INT PRIMARY KEY);")
    _run(mysql_db, f"CREATE VIEW other_team_v AS SELECT id FROM {reads}")
    policy = SchemaPolicy(ignore=("view other_team_*",))
    dropping = {"t": "CREATE TABLE u (id INT PRIMARY KEY);", "v_inner": BASE}[reads]
    kind = "table" if reads == "t" else "view"
    with open_target(mysql_db) as t, pytest.raises(PlanError) as refused:
        planner.plan(t, dropping, policy=policy)
    said = str(refused.value)
    assert f"{kind} {reads} would be dropped" in said and "view other_team_v (ignored)" in said
    assert refused.value.reason == "Unmanaged"
    # What no ignored view reads is dropped as ever, and the ignored view still answers.
    assert _converge(mysql_db, BASE + inner, policy) == ["DROP TABLE `u`"]
    assert _run(mysql_db, "SELECT count(*) FROM other_team_v") == [(0,)]
