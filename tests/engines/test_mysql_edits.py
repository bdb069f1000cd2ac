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
    """``SHOW CREATE`` of every table and view of the database (counters left out)."""
    out: dict[str, str] = {}
    with open_target(url) as t, t.connection.cursor() as cur:
        cur.execute(
            "SELECT table_name, table_type FROM information_schema.tables"
            " WHERE table_schema = DATABASE() ORDER BY 1"
        )
        for name, kind in cur.fetchall():
            view = kind == "VIEW"
            cur.execute(f"SHOW CREATE {'VIEW' if view else 'TABLE'} `{name}`")
            text = cur.fetchone()[1]
            out[name] = _SCRATCH_QUALIFIER.sub("", text)
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
