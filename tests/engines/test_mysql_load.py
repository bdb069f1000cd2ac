"""MariaDB scratch loads behave like the server's own client, and apply keeps its checks.

The native ``mariadb`` client runs each file first; the plan must accept what
it accepts and refuse what it refuses, with the desired file's line, the
object's own name, and never the internal scratch database's name.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ptah.engines import planner
from ptah.engines.base import DesiredSchemaInvalid
from ptah.engines.connect import open_target
from ptah.engines.model import PlanError, SchemaPolicy
from ptah.engines.mysql import datacheck
from ptah.engines.urls import parse_url

pytestmark = pytest.mark.integration


def _native(url: str, sql: str) -> subprocess.CompletedProcess[str]:
    client = shutil.which("mariadb") or shutil.which("mysql")
    if client is None:
        pytest.fail("the MariaDB client (mariadb) is missing; run `bash hack/databases.sh`")
    u = parse_url(url)
    return subprocess.run(
        [
            client,
            "--no-defaults",
            "-h",
            u.host,
            "-P",
            str(u.port),
            "-u",
            u.user,
            f"-p{u.password}",
            u.database,
        ],
        input=sql,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _load_error(url: str, sql: str) -> str:
    with open_target(url) as t, pytest.raises(DesiredSchemaInvalid) as info:
        planner.plan(t, sql)
    message = str(info.value)
    assert "ptah_scratch" not in message
    return message


MISSING_PARENT = """CREATE TABLE city (
  id INT PRIMARY KEY
);

CREATE TABLE address (
  id INT PRIMARY KEY,
  country_id INT,
  CONSTRAINT fk_country FOREIGN KEY (country_id) REFERENCES country (id)
);
"""


def test_fk_to_a_missing_table_is_refused_as_the_client_refuses_it(
    mysql_db: str, mysql_db2: str
) -> None:
    native = _native(mysql_db2, MISSING_PARENT)
    assert native.returncode != 0 and "ERROR 1005" in native.stderr
    message = _load_error(mysql_db, MISSING_PARENT)
    assert "line 5: ERROR 1005" in message and "address" in message, message


def test_fk_to_a_later_table_errors_like_the_client(mysql_db: str, mysql_db2: str) -> None:
    later = MISSING_PARENT + "\nCREATE TABLE country (\n  id INT PRIMARY KEY\n);\n"
    assert _native(mysql_db2, later).returncode != 0
    assert "line 5: ERROR 1005" in _load_error(mysql_db, later)


def test_a_file_that_turns_checks_off_loads_as_with_the_client(
    mysql_db: str, mysql_db2: str
) -> None:
    dump = (
        "/*!40014 SET FOREIGN_KEY_CHECKS=0 */;\n"
        + MISSING_PARENT.replace("country (id)", "country (id)")
        + "CREATE TABLE country (\n  id INT PRIMARY KEY\n);\nSET FOREIGN_KEY_CHECKS=1;\n"
    )
    assert _native(mysql_db2, dump).returncode == 0
    with open_target(mysql_db) as t:
        plan = planner.plan(t, dump)
    assert len(plan.statements) == 3


def test_view_over_a_missing_table_names_the_object_not_the_scratch(mysql_db: str) -> None:
    sql = "CREATE TABLE a (id INT);\n\nCREATE VIEW v AS\n  SELECT * FROM nowhere;\n"
    message = _load_error(mysql_db, sql)
    assert "line 3: ERROR 1146" in message and "'nowhere' doesn't exist" in message, message


def test_procedures_with_delimiter_load_as_with_the_client(mysql_db: str, mysql_db2: str) -> None:
    sql = (
        "CREATE TABLE t (id INT);\n\nDELIMITER //\nCREATE TRIGGER t_bi BEFORE INSERT ON t\n"
        "FOR EACH ROW BEGIN\n  SET NEW.id = NEW.id + 1;\nEND//\nDELIMITER ;\n"
    )
    assert _native(mysql_db2, sql).returncode == 0
    # It loads (no DesiredSchemaInvalid); the trigger, which Ptah does not manage on
    # MariaDB, is then named by the census instead of being left out of the plan.
    with open_target(mysql_db) as t, pytest.raises(PlanError) as err:
        planner.plan(t, sql)
    assert err.value.reason == "Unmanaged" and "trigger t_bi" in str(err.value)
    with open_target(mysql_db) as t:
        plan = planner.plan(t, sql, policy=SchemaPolicy(ignore=("trigger",)))
    assert [s.sql.split("`")[1] for s in plan.statements] == ["t"]


def test_apply_orders_new_tables_for_foreign_keys_and_keeps_the_checks(
    mysql_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Name order would create the child first; the server's checks are on in apply.
    sql = (
        "CREATE TABLE z_parent (id INT PRIMARY KEY);\n"
        "CREATE TABLE a_child (id INT PRIMARY KEY, p INT,\n"
        "  CONSTRAINT fk_p FOREIGN KEY (p) REFERENCES z_parent (id));\n"
    )
    with open_target(mysql_db) as t:
        plan = planner.plan(t, sql)
        assert [s.sql.split("`")[1] for s in plan.statements] == ["z_parent", "a_child"]
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", result.message
        with t.connection.cursor() as cur:
            cur.execute("INSERT INTO z_parent VALUES (1)")
            cur.execute("CREATE TABLE orphan_holder (id INT PRIMARY KEY, p INT)")
            cur.execute("INSERT INTO orphan_holder VALUES (1, 99)")
    added = sql + (
        "CREATE TABLE orphan_holder (id INT PRIMARY KEY, p INT,\n"
        "  CONSTRAINT fk_o FOREIGN KEY (p) REFERENCES z_parent (id));\n"
    )
    with open_target(mysql_db) as t:
        plan = planner.plan(t, added)
        assert len(plan.statements) == 1 and "ADD CONSTRAINT `fk_o`" in plan.statements[0].sql
        result = planner.apply(t, plan.statements, plan.fingerprint_before, True)
    # The data check names the orphan row before the first statement runs ...
    assert result.outcome == "failed" and result.reason == "DataViolatesConstraint"
    assert "fk_o" in result.message and "nothing was changed" in result.message
    # ... and without it the server's own check refuses it: with foreign_key_checks=0
    # the orphan row would have been accepted silently.
    monkeypatch.setattr(datacheck, "refuse_data_failures", lambda *a, **k: None)
    with open_target(mysql_db) as t:
        result = planner.apply(t, plan.statements, plan.fingerprint_before, True)
    assert result.outcome == "failed" and "1452" in result.message, result.message


def test_dropping_parent_and_child_together_drops_the_child_first(mysql_db: str) -> None:
    sql = (
        "CREATE TABLE a_parent (id INT PRIMARY KEY);\n"
        "CREATE TABLE b_child (id INT PRIMARY KEY, p INT,\n"
        "  CONSTRAINT fk_b FOREIGN KEY (p) REFERENCES a_parent (id));\n"
        "CREATE TABLE keep (id INT);\n"
    )
    with open_target(mysql_db) as t:
        plan = planner.plan(t, sql)
        assert planner.apply(t, plan.statements, plan.fingerprint_before, True).outcome == (
            "succeeded"
        )
        plan = planner.plan(t, "CREATE TABLE keep (id INT);\n")
        assert [s.sql for s in plan.statements] == ["DROP TABLE `b_child`", "DROP TABLE `a_parent`"]
        result = planner.apply(t, plan.statements, plan.fingerprint_before, True)
        assert result.outcome == "succeeded", result.message


def test_a_mysqldump_loads_as_with_the_client(mysql_db: str, mysql_db2: str) -> None:
    dump = (Path(__file__).parent / "schemas" / "mysqldump.sql").read_text()
    assert _native(mysql_db2, dump).returncode == 0
    # Its trigger and procedure, which Ptah does not manage on MariaDB, are named (never
    # left out unsaid); with their kinds ignored the plan holds the table and the view.
    with open_target(mysql_db) as t, pytest.raises(PlanError) as err:
        planner.plan(t, dump)
    assert "procedure rewards; trigger payment_date" in str(err.value)
    with open_target(mysql_db) as t:
        plan = planner.plan(t, dump, policy=SchemaPolicy(ignore=("procedure", "trigger")))
    assert [s.sql.split("`")[1] for s in plan.statements] == ["payment", "sales_by_year"]
