"""A desired file that writes data into its temporary scratch is stopped at the size bound.

Without a dev database the scratch is a database on the target's own server. Before the
bound, ``INSERT INTO t SELECT seq FROM seq_1_to_1000000000`` (into InnoDB or Aria, or by
a procedure or a trigger that inserts in a loop) wrote into it for as long as the
statement's and the load's time bounds let it: gigabytes on the production server's
disk. Each case plans such a file with the size bound lowered to 16 MB and the time
bounds to 4 s (so that the code before the size bound fails here on a time bound's
message, without filling the disk), and expects the plan refused naming the size and
the line, the scratch dropped and no statement of the file left running.

Not here: a bulk insert into an empty table (CREATE TABLE ... SELECT into InnoDB or
Aria; InnoDB's INSERT ... SELECT once the file turned unique_checks and
foreign_key_checks off) buffers its rows in the server's tmpdir, in unlinked files no
SQL can read, until the statement ends (and a table being created by CREATE TABLE ...
SELECT, MyISAM's too, cannot be read meanwhile): the statement's time bound alone
bounds it.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from ptah.engines import deadline, planner
from ptah.engines.base import DesiredSchemaInvalid
from ptah.engines.connect import open_target
from ptah.engines.model import SchemaPolicy
from ptah.engines.mysql import bounds
from ptah.engines.mysql import ops as myops
from support.databases import mysql_session

pytestmark = pytest.mark.integration

CAP_MB = 16
MANY = "seq_1_to_1000000000"
POLICY = SchemaPolicy(ignore=("function", "procedure", "trigger"))

# name -> (the file, with {m} a marker in the writing statement; its line)
HOSTILE = {
    "insert-select": (
        "CREATE TABLE kept (id INT PRIMARY KEY);\nCREATE TABLE big (g BIGINT, t CHAR(100));\n"
        "INSERT INTO big SELECT seq, '{m}' FROM " + MANY + ";\n",
        3,
    ),
    "aria-table": (
        "CREATE TABLE big (g BIGINT, t CHAR(100)) ENGINE = Aria;\n"
        "INSERT INTO big SELECT seq, '{m}' FROM " + MANY + ";\n",
        2,
    ),
    "procedure-in-a-loop": (
        "CREATE TABLE big (t VARCHAR(1000));\n"
        "DELIMITER //\nCREATE PROCEDURE fill() BEGIN\n"
        "  LOOP INSERT INTO big SELECT REPEAT('{m}', 50) FROM seq_1_to_1000; END LOOP;\n"
        "END//\nDELIMITER ;\nCALL fill();\n",
        7,
    ),
    "procedure-catching-the-kill": (
        "CREATE TABLE big (t VARCHAR(1000));\n"
        "DELIMITER //\nCREATE PROCEDURE fill() BEGIN\n"
        "  DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;\n"
        "  LOOP INSERT INTO big SELECT REPEAT('{m}', 50) FROM seq_1_to_1000; END LOOP;\n"
        "END//\nDELIMITER ;\nCALL fill();\n",
        8,
    ),
    "trigger": (
        "CREATE TABLE kept (id INT PRIMARY KEY);\nCREATE TABLE big (g BIGINT, t CHAR(100));\n"
        "CREATE TRIGGER fill AFTER INSERT ON kept FOR EACH ROW\n"
        "  INSERT INTO big SELECT seq, '{m}' FROM " + MANY + ";\n"
        "INSERT INTO kept VALUES (1);\n",
        5,
    ),
}


def _running(url: str, marker: str) -> list[int]:
    conn = mysql_session(url)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE %s"
                " AND ID <> CONNECTION_ID()",
                (f"%{marker}%",),
            )
            return [int(r[0]) for r in cur.fetchall()]
    finally:
        conn.close()


def _schemas(url: str, names: list[str]) -> list[str]:
    conn = mysql_session(url)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA")
            return [str(r[0]) for r in cur.fetchall() if r[0] in names]
    finally:
        conn.close()


@pytest.fixture
def scratches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The size bound lowered, the time bounds too; the scratches whose size was read."""
    monkeypatch.setattr(deadline, "SCRATCH_BYTES", CAP_MB * 1024 * 1024)
    monkeypatch.setitem(deadline.STATEMENT_BYTES, "mysql", 0)  # the cap alone, as named
    monkeypatch.setattr(deadline, "LOAD_SECONDS", 4.0)
    monkeypatch.setattr(bounds, "STATEMENT_SECONDS", 4.0)
    names: list[str] = []
    read = myops._scratch_bytes

    def spy(admin: Any, name: str) -> int:
        names.append(name)
        return read(admin, name)

    monkeypatch.setattr(myops, "_scratch_bytes", spy)
    return names


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_file_that_writes_data_is_stopped_at_the_size_bound(
    case: str, mysql_db: str, scratches: list[str]
) -> None:
    marker = "ptah_fill_" + uuid.uuid4().hex[:8]
    sql, line = HOSTILE[case]
    started = time.monotonic()
    with open_target(mysql_db) as target, pytest.raises(DesiredSchemaInvalid) as caught:
        planner.plan(target, sql.format(m=marker), policy=POLICY)
    elapsed = time.monotonic() - started
    message = str(caught.value)
    expected = (
        f"desired schema grew its scratch past {CAP_MB} MB (line {line} of the desired file):"
        " a desired file holds definitions, not data"
    )
    assert message == expected, message
    # A handler that catches KILL QUERY ran on for 16 s: its session is then ended.
    assert elapsed < 12, f"refused after {elapsed:.1f} s"
    assert scratches, "the scratch's size was never read"
    assert _schemas(mysql_db, scratches) == []
    assert _running(mysql_db, marker) == []


def test_a_schema_with_a_few_seed_rows_still_plans(mysql_db: str, scratches: list[str]) -> None:
    sql = (
        "CREATE TABLE status (code VARCHAR(10) PRIMARY KEY);\n"
        "INSERT INTO status VALUES ('new'), ('done');\n"
        "CREATE TABLE kept (id INT PRIMARY KEY, name VARCHAR(20)) ENGINE = Aria;\n"
        "INSERT INTO kept SELECT seq, CONCAT('row ', seq) FROM seq_1_to_100;\n"
    )
    with open_target(mysql_db) as target:
        plan = planner.plan(target, sql)
    assert any("`status`" in st.sql for st in plan.statements), plan
    assert scratches and _schemas(mysql_db, scratches) == []
