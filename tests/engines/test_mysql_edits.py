"""MariaDB edits between two versions of a schema: the target a plan leaves matches a
direct load of the new version, ``SHOW CREATE`` for ``SHOW CREATE``, and a second plan
finds nothing to do.

Each case is a pair (A, B): A is planned and applied on a fresh database, then B; the
result is compared with B run as it is in a second fresh database. Then back to A.
"""

from __future__ import annotations

import re

import pytest

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import PlanError

pytestmark = pytest.mark.integration

_SCRATCH_QUALIFIER = re.compile(r"`ptah_t2?_[0-9a-f]+`\.")


def _plan_apply(url: str, sql: str) -> list[str]:
    with open_target(url) as t:
        plan = planner.plan(t, sql)
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        assert result.outcome == "succeeded", (result.message, [s.sql for s in plan.statements])
        again = planner.plan(t, sql)
        assert again.statements == [], [s.sql for s in again.statements]
    return [s.sql for s in plan.statements]


def _shown(url: str) -> dict[str, str]:
    """``SHOW CREATE`` of every table and view of the database (counters left out); a
    view's with the client character set and the collation it was created under."""
    out: dict[str, str] = {}
    with open_target(url) as t, t.connection.cursor() as cur:
        cur.execute(
            "SELECT table_name, table_type FROM information_schema.tables"
            " WHERE table_schema = DATABASE() ORDER BY 1"
        )
        for name, kind in cur.fetchall():
            view = kind == "VIEW"
            cur.execute(f"SHOW CREATE {'VIEW' if view else 'TABLE'} `{name}`")
            row = cur.fetchone()
            text = _SCRATCH_QUALIFIER.sub("", row[1])
            out[name] = f"{text} /* {row[2]} {row[3]} */" if view else text
    return out


def _direct(url: str, sql: str) -> None:
    with open_target(url) as t, t.connection.cursor() as cur:
        cur.execute(sql)
        while cur.nextset():
            pass


def _edit(target: str, reference: str, a: str, b: str) -> list[str]:
    """A, then B on ``target``; B loaded directly into ``reference``; both must show the
    same. Then back to A (``reference`` is not reused for it). The plan for B is returned."""
    _plan_apply(target, a)
    statements = _plan_apply(target, b)
    _direct(reference, b)
    assert _shown(target) == _shown(reference), statements
    _plan_apply(target, a)
    return statements


T = "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, a VARCHAR(20), b INT) ENGINE=InnoDB"

CASES = {
    # Options left out of B are reset, not left as they were (and the others unstated).
    "table options removed": (
        T + " ROW_FORMAT=COMPRESSED COMMENT='the t' STATS_PERSISTENT=1;",
        T + ";",
    ),
    "engine change leaves no Aria option": (
        T.replace("InnoDB", "Aria") + ";",
        T + ";",
    ),
    # A column line names no charset when it is the table's: a new default changes it.
    "table charset changes the columns that follow it": (
        T + " DEFAULT CHARSET=utf8mb4;",
        T + " DEFAULT CHARSET=latin1;",
    ),
    "foreign key actions change under the same name": (
        "CREATE TABLE p (id INT PRIMARY KEY);"
        "CREATE TABLE c (id INT PRIMARY KEY, pid INT,"
        " CONSTRAINT c_p FOREIGN KEY (pid) REFERENCES p (id) ON DELETE SET NULL);",
        "CREATE TABLE p (id INT PRIMARY KEY);"
        "CREATE TABLE c (id INT PRIMARY KEY, pid INT,"
        " CONSTRAINT c_p FOREIGN KEY (pid) REFERENCES p (id) ON DELETE CASCADE);",
    ),
    "the columns of a foreign key change type": (
        "CREATE TABLE p (id INT PRIMARY KEY);"
        "CREATE TABLE c (id INT PRIMARY KEY, pid INT,"
        " CONSTRAINT c_p FOREIGN KEY (pid) REFERENCES p (id));",
        "CREATE TABLE p (id BIGINT PRIMARY KEY);"
        "CREATE TABLE c (id INT PRIMARY KEY, pid BIGINT,"
        " CONSTRAINT c_p FOREIGN KEY (pid) REFERENCES p (id));",
    ),
    "partitioning added": (T + ";", T + " PARTITION BY HASH (id) PARTITIONS 4;"),
    "partitioning changed": (
        T + " PARTITION BY HASH (id) PARTITIONS 4;",
        T + " PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (100),"
        " PARTITION p1 VALUES LESS THAN MAXVALUE);",
    ),
    "view algorithm and security": (
        T + "; CREATE VIEW v AS SELECT id FROM t;",
        T + "; CREATE ALGORITHM=MERGE SQL SECURITY INVOKER VIEW v AS SELECT id FROM t;",
    ),
    # Views are made in dependency order, not name order.
    "a view over a view of a later name": (
        T + ";",
        T + "; CREATE VIEW zz AS SELECT id, a FROM t; CREATE VIEW aa AS SELECT id FROM zz;",
    ),
    "a new table starts its counter where the file says": (
        T + ";",
        T + "; CREATE TABLE n (id INT AUTO_INCREMENT PRIMARY KEY) AUTO_INCREMENT=500;",
    ),
    "a generated column changes from virtual to stored": (
        T.replace("b INT", "b INT AS (id * 2) VIRTUAL") + ";",
        T.replace("b INT", "b INT AS (id * 2) STORED") + ";",
    ),
    # Dropped and added again in one ALTER, the server keeps the old flag.
    "an index becomes ignored": (
        T.replace("b INT)", "b INT, KEY t_b (b))") + ";",
        T.replace("b INT)", "b INT, KEY t_b (b) IGNORED)") + ";",
    ),
    # An added index goes to the end of its group; a direct load has it where it is written.
    "an index added before another": (
        T.replace("b INT)", "b INT, KEY t_b (b))") + ";",
        T.replace("b INT)", "b INT, KEY t_a (a), KEY t_b (b))") + ";",
    ),
    "an index added back before a foreign key's own": (
        "CREATE TABLE p (id INT PRIMARY KEY);"
        "CREATE TABLE c (id INT PRIMARY KEY, pid INT, x INT,"
        " CONSTRAINT c_p FOREIGN KEY (pid) REFERENCES p (id));",
        "CREATE TABLE p (id INT PRIMARY KEY);"
        "CREATE TABLE c (id INT PRIMARY KEY, pid INT, x INT, UNIQUE KEY c_u (x), KEY c_x (x),"
        " CONSTRAINT c_p FOREIGN KEY (pid) REFERENCES p (id));",
    ),
    # An index keeps the block size it was built with when the table's option changes.
    "the table's key block size removed": (
        T.replace("b INT)", "b INT, KEY t_b (b))") + " ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=4;",
        T.replace("b INT)", "b INT, KEY t_b (b))") + ";",
    ),
    "the table's key block size changed": (
        T + " ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=4;",
        T + " ROW_FORMAT=COMPRESSED KEY_BLOCK_SIZE=8;",
    ),
    # A dump's tables may reference each other (it turns the checks off); apply keeps
    # them on. And back: each of the tables is still referenced by the other.
    "new tables that reference each other": (
        T + ";",
        T + "; SET FOREIGN_KEY_CHECKS=0;"
        " CREATE TABLE x (id INT PRIMARY KEY, y INT,"
        " CONSTRAINT x_y FOREIGN KEY (y) REFERENCES y (id));"
        " CREATE TABLE y (id INT PRIMARY KEY, x INT,"
        " CONSTRAINT y_x FOREIGN KEY (x) REFERENCES x (id));"
        " SET FOREIGN_KEY_CHECKS=1;",
    ),
    # The dropped table's key needs the index the alteration drops (error 1553).
    "a table dropped with the key its foreign key needs": (
        "CREATE TABLE p (id INT PRIMARY KEY, k INT, UNIQUE KEY p_k (k));"
        "CREATE TABLE c (id INT PRIMARY KEY, pk INT,"
        " CONSTRAINT c_p FOREIGN KEY (pk) REFERENCES p (k));",
        "CREATE TABLE p (id INT PRIMARY KEY, k INT);",
    ),
    # The server cannot MODIFY a column into or out of being VIRTUAL (error 1907): it is
    # dropped and added again, with the index and the check that name it.
    "a column becomes generated": (
        T.replace("b INT)", "b INT, KEY t_b (b), CONSTRAINT t_c CHECK (b > 0))") + ";",
        T.replace("b INT)", "b INT AS (id + 1) VIRTUAL, KEY t_b (b), CONSTRAINT t_c CHECK (b > 0))")
        + ";",
    ),
    "a virtual column becomes stored data": (
        T.replace("b INT", "b INT AS (id * 2) VIRTUAL") + ";",
        T + ";",
    ),
    # A check is shown where it was added: an added one went last, where a direct load has
    # it before others.
    "a check added before another": (
        "CREATE TABLE t (a INT, b INT, CONSTRAINT c1 CHECK (a > 0), CONSTRAINT c3 CHECK (b > 0));",
        "CREATE TABLE t (a INT, b INT, CONSTRAINT c1 CHECK (a > 0), CONSTRAINT c2 CHECK (a < 9),"
        " CONSTRAINT c3 CHECK (b > 0));",
    ),
    # Each key on a retyped column is dropped first; added back in the ALTER of its table,
    # it needs the referenced table retyped already, which in a cycle (or a table's
    # reference to itself, checked against the table as it was) no order gives (error 150).
    "a cycle of foreign keys retyped from INT to BIGINT": (
        "SET FOREIGN_KEY_CHECKS=0;"
        " CREATE TABLE a (id INT PRIMARY KEY, c INT,"
        " CONSTRAINT ac FOREIGN KEY (c) REFERENCES c (id));"
        " CREATE TABLE b (id INT PRIMARY KEY, a INT,"
        " CONSTRAINT ba FOREIGN KEY (a) REFERENCES a (id));"
        " CREATE TABLE c (id INT PRIMARY KEY, b INT,"
        " CONSTRAINT cb FOREIGN KEY (b) REFERENCES b (id));"
        " SET FOREIGN_KEY_CHECKS=1;",
        "SET FOREIGN_KEY_CHECKS=0;"
        " CREATE TABLE a (id BIGINT PRIMARY KEY, c BIGINT,"
        " CONSTRAINT ac FOREIGN KEY (c) REFERENCES c (id));"
        " CREATE TABLE b (id BIGINT PRIMARY KEY, a BIGINT,"
        " CONSTRAINT ba FOREIGN KEY (a) REFERENCES a (id));"
        " CREATE TABLE c (id BIGINT PRIMARY KEY, b BIGINT,"
        " CONSTRAINT cb FOREIGN KEY (b) REFERENCES b (id));"
        " SET FOREIGN_KEY_CHECKS=1;",
    ),
    "a reference to its own table retyped": (
        "CREATE TABLE t (id INT PRIMARY KEY, up INT, CONSTRAINT t_up FOREIGN KEY (up)"
        " REFERENCES t (id) ON DELETE CASCADE);",
        "CREATE TABLE t (id BIGINT UNSIGNED PRIMARY KEY, up BIGINT UNSIGNED,"
        " CONSTRAINT t_up FOREIGN KEY (up) REFERENCES t (id) ON DELETE CASCADE);",
    ),
    # SHOW CREATE shows an application-time period as a line of its own: it was kept.
    "an application-time period dropped": (
        "CREATE TABLE t (id INT, s DATE NOT NULL, e DATE NOT NULL, PERIOD FOR p (s, e),"
        " UNIQUE KEY u (id, p WITHOUT OVERLAPS));",
        "CREATE TABLE t (id INT, s DATE NOT NULL, e DATE NOT NULL, UNIQUE KEY u (id));",
    ),
    # A view's string literals have the collation of the session that created it: a dump
    # sets it before each view ('x' = 'X' is 1 under utf8mb4_general_ci, 0 under _bin).
    "a view's literals keep the file's collation": (
        T + "; CREATE VIEW v AS SELECT id, 'x' = 'X' AS same, 'é' AS e FROM t;",
        T + "; SET collation_connection = utf8mb4_bin;"
        " CREATE VIEW v AS SELECT id, 'x' = 'X' AS same, 'é' AS e FROM t;"
        " SET NAMES latin1; CREATE VIEW w AS SELECT id, 'x' AS x FROM v;"
        " SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci; CREATE VIEW u AS SELECT 'ü' AS u;",
    ),
    # SHOW CREATE keeps a quoted name's line feed, and a comment's U+2028, form feed or NEL:
    # a column line read as two made an internal error, or a plan of "ADD y, ADD '".
    "a comment holds line separators": (
        "CREATE TABLE t (a INT COMMENT 'x\u2028y', b INT);",
        "CREATE TABLE t (a INT COMMENT 'x\u2028y\x0cz\x85', b INT, c INT COMMENT 'n\u2029');",
    ),
    "names hold line feeds": (
        "CREATE TABLE `t\nx` (`a\nb` INT, `) c` INT, KEY `k\n)` (`a\nb`));",
        "CREATE TABLE `t\nx` (`a\nb` BIGINT, `) c` INT);"
        "CREATE TABLE `c\n)` (id INT PRIMARY KEY, `p\nid` INT,"
        " CONSTRAINT `f\n)` FOREIGN KEY (`p\nid`) REFERENCES `c\n)` (id));",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_edit_leaves_what_a_direct_load_makes(mysql_db: str, mysql_db2: str, case: str) -> None:
    a, b = CASES[case]
    _edit(mysql_db, mysql_db2, a, b)


def test_unchanged_options_are_not_restated(mysql_db: str, mysql_db2: str) -> None:
    """A comment change sets the comment alone: restating ``ENGINE`` would rebuild."""
    statements = _edit(mysql_db, mysql_db2, T + ";", T + " COMMENT='c';")
    assert [" ".join(s.split()) for s in statements] == [
        "ALTER TABLE `t` COMMENT='c', ALGORITHM=INSTANT"
    ]


# Retypes the server refuses whatever the rows (it cannot cast an INT to a UUID): found on
# the probe's empty copies and refused at plan time, before a statement runs (the plan had
# dropped the foreign key on the column, then failed on the ALTER after it).
REFUSED_RETYPES = {
    "int to uuid": (T, T.replace("id INT", "id UUID")),
    "int to uuid under a foreign key": (
        "CREATE TABLE p (id INT PRIMARY KEY);"
        "CREATE TABLE c (id INT PRIMARY KEY, pid INT,"
        " CONSTRAINT c_p FOREIGN KEY (pid) REFERENCES p (id));",
        "CREATE TABLE p (id UUID PRIMARY KEY);"
        "CREATE TABLE c (id INT PRIMARY KEY, pid UUID,"
        " CONSTRAINT c_p FOREIGN KEY (pid) REFERENCES p (id));",
    ),
    "inet4 to inet6": ("CREATE TABLE u (i INET4);", "CREATE TABLE u (i INET6);"),
}


@pytest.mark.parametrize("case", sorted(REFUSED_RETYPES))
def test_a_retype_the_server_cannot_make_is_refused_at_plan_time(mysql_db: str, case: str) -> None:
    a, b = REFUSED_RETYPES[case]
    _plan_apply(mysql_db, a)
    before = _shown(mysql_db)
    with open_target(mysql_db) as t, pytest.raises(PlanError) as err:
        planner.plan(t, b)
    message = str(err.value)
    assert err.value.reason == "Unsupported", message
    assert "Cannot cast" in message and "\n" not in message, message
    assert "ptah_probe" not in message, message
    assert _shown(mysql_db) == before


UUID_A = (
    "CREATE TABLE p (id VARCHAR(36) NOT NULL PRIMARY KEY);"
    "CREATE TABLE c (id INT PRIMARY KEY, pid VARCHAR(36),"
    " CONSTRAINT c_p FOREIGN KEY (pid) REFERENCES p (id));"
)
UUID_B = UUID_A.replace("VARCHAR(36)", "UUID")
GOOD_UUID = "123e4567-e89b-12d3-a456-426614174000"


@pytest.mark.parametrize("value", [GOOD_UUID, "not-a-uuid"])
def test_text_retyped_to_uuid_converts_or_changes_nothing(mysql_db: str, value: str) -> None:
    """Whether the rows convert is known at apply only: a value that is not a UUID fails
    the apply before its first statement (the plan's foreign key drop had run, and the
    ALTER after it failed: the key stayed dropped); values that are convert."""
    _plan_apply(mysql_db, UUID_A)
    _direct(mysql_db, f"INSERT INTO p VALUES ('{value}'); INSERT INTO c VALUES (1, '{value}');")
    before = _shown(mysql_db)
    with open_target(mysql_db) as t:
        plan = planner.plan(t, UUID_B)
        result = planner.apply(
            t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
        )
        if value == GOOD_UUID:
            assert result.outcome == "succeeded", result.message
            assert planner.plan(t, UUID_B).statements == []
            with t.connection.cursor() as cur:
                cur.execute("SELECT CAST(pid AS CHAR) FROM c")
                assert cur.fetchall() == ((GOOD_UUID,),)
            return
    assert result.outcome == "failed", result.message
    assert result.progress.executed == 0
    assert "holds values that do not convert to uuid" in result.message, result.message
    assert _shown(mysql_db) == before


def test_a_column_spelled_in_other_letters_case_keeps_its_values(
    mysql_db: str, mysql_db2: str
) -> None:
    """Column names are case-insensitive to the server: ``UserId`` to ``userid`` is the
    same column renamed (CHANGE COLUMN), its values kept, with its index, check,
    generated column and foreign keys on either side, retyped too; it was dropped and
    added again (destructive, the values lost)."""
    a = (
        "CREATE TABLE p (ID INT PRIMARY KEY);"
        "CREATE TABLE c (id INT PRIMARY KEY, UserId INT CHECK (UserId > 0), x INT,"
        " g INT AS (UserId + 1) VIRTUAL, KEY k (UserId, x),"
        " CONSTRAINT f FOREIGN KEY (UserId) REFERENCES p (ID));"
    )
    b = (
        "CREATE TABLE p (id BIGINT PRIMARY KEY);"
        "CREATE TABLE c (id INT PRIMARY KEY, x INT, userid BIGINT CHECK (userid > 0),"
        " g INT AS (userid + 1) VIRTUAL, KEY k (userid, x),"
        " CONSTRAINT f FOREIGN KEY (userid) REFERENCES p (id));"
    )
    _plan_apply(mysql_db, a)
    _direct(mysql_db, "INSERT INTO p VALUES (5); INSERT INTO c (id, UserId, x) VALUES (1, 5, 6);")
    with open_target(mysql_db) as t:
        plan = planner.plan(t, b)
    assert not any("destructive" in s.hazards for s in plan.statements), plan.statements
    _plan_apply(mysql_db, b)
    _direct(mysql_db2, b)
    assert _shown(mysql_db) == _shown(mysql_db2)
    with open_target(mysql_db) as t, t.connection.cursor() as cur:
        cur.execute("SELECT id, x, userid, g FROM c")
        assert cur.fetchall() == ((1, 6, 5, 6),)
