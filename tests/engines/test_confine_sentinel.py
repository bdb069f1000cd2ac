"""A plan writes nothing but its scratch: a sentinel database beside the target proves it.

For each engine a sentinel database (a table with rows) sits beside the target.
Its contents are checksummed, hostile desired files are planned against the
target (whole-database statements naming the sentinel, names qualified with it,
attach, server files, accounts, global variables), and the checksum is taken
again. Each plan must be refused with the statement's line and reason
``StatementRefused``; the sentinel, the target and the server are unchanged.
The last case of each engine turns the guard off and shows the same hostile
file *does* change the sentinel: the proof can fail.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ptah.engines import confine, planner
from ptah.engines.connect import open_target
from ptah.engines.model import SchemaPolicy
from ptah.engines.sqlite import confine as sqconfine
from ptah.runner import operations
from ptah.runner.emit import Run
from ptah.runner.frame import ResultFrame
from support.databases import database_of, missing, with_database

pytestmark = pytest.mark.integration


def _refused_plan(url: str, sql: str, tmp_path: Path) -> dict[str, object]:
    """Plan through the runner's own operation; return the frame's reason and message."""
    desired = tmp_path / f"desired-{uuid.uuid4().hex[:6]}.sql"
    desired.write_text(sql)
    with open_target(url) as target:
        before = planner.current_fingerprint(target)
        # The runner's payload, read as the operator reads it.
        run = Run.on(target, "plan", "op-sentinel")
        frame = ResultFrame.model_validate(operations.plan(run, str(desired), None))
        assert planner.current_fingerprint(target) == before  # the target is untouched
    assert frame.outcome == "failed", frame
    return {"reason": frame.reason, "message": frame.data.get("message", "")}


def _line_of(sql: str, needle: str) -> int:
    return next(i for i, line in enumerate(sql.splitlines(), 1) if needle in line)


def _assert_confined(
    url: str,
    hostile: list[tuple[str, str]],
    state: Callable[[], str],
    tmp_path: Path,
) -> None:
    before = state()
    for sql, first_bad in hostile:
        got = _refused_plan(url, sql, tmp_path)
        assert got["reason"] == "StatementRefused", got
        assert f"line {_line_of(sql, first_bad)}:" in str(got["message"]), got
        assert state() == before, f"sentinel changed by {sql!r}"


def _disarm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(confine, "check", lambda sql, engine: confine.split(sql, engine))
    monkeypatch.setattr(sqconfine, "authorizer", lambda *args: 0)


# -- MariaDB -------------------------------------------------------------------------


@pytest.fixture
def mysql_sentinel(mysql_url: str) -> Iterator[str]:
    name = "ptah_sentinel_" + uuid.uuid4().hex[:8]
    with open_target(mysql_url) as admin, admin.connection.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
        cur.execute(f"CREATE TABLE `{name}`.keep (id INT PRIMARY KEY, v VARCHAR(20))")
        cur.execute(f"INSERT INTO `{name}`.keep VALUES (1, 'one'), (2, 'two')")
        cur.execute(f"CREATE SEQUENCE `{name}`.seq")
    yield name
    with open_target(mysql_url) as admin, admin.connection.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cur.execute(f"DROP DATABASE IF EXISTS `{name}_new`")
        cur.execute(f"DROP USER IF EXISTS `{name}`@'%'")


def _mysql_state(url: str, name: str, outfile: str) -> Callable[[], str]:
    def state() -> str:
        with open_target(url) as admin, admin.connection.cursor() as cur:
            cur.execute(
                "SELECT schema_name FROM information_schema.schemata WHERE schema_name IN (%s, %s)",
                (name, name + "_new"),
            )
            parts = [repr(sorted(r[0] for r in cur.fetchall()))]
            cur.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = %s ORDER BY 1",
                (name,),
            )
            for (table,) in cur.fetchall():
                cur.execute(f"SHOW CREATE TABLE `{name}`.`{table}`")
                parts.append(cur.fetchone()[1])
                cur.execute(f"SELECT * FROM `{name}`.`{table}` ORDER BY 1")
                parts.append(repr(cur.fetchall()))
            cur.execute("SELECT @@global.max_connections, @@global.general_log")
            parts.append(repr(cur.fetchone()))
            cur.execute("SELECT COUNT(*) FROM mysql.user WHERE user = %s", (name,))
            parts.append(repr(cur.fetchone()))
        parts.append(str(os.path.exists(outfile)))
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()

    return state


def test_mysql_plans_of_hostile_files_leave_the_sentinel(
    mysql_db: str,
    mysql_url: str,
    mysql_sentinel: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = mysql_sentinel
    outfile = f"/tmp/ptah-sentinel-{uuid.uuid4().hex[:8]}"
    table = "CREATE TABLE film (\n  id INT PRIMARY KEY\n);\n"
    sample = (
        f"-- a well-known sample's header\nDROP DATABASE IF EXISTS {s};\n"
        f"CREATE DATABASE {s};\nUSE {s};\n\n{table}"
    )
    hostile = [
        (sample, "DROP DATABASE"),
        (f"{table}/*!40101 DROP DATABASE `{s}` */;\n", "/*!40101"),
        # A versioned comment nested in another is code to the server too, and its "*/"
        # ends both: read as a regular comment, it hid the DROP's object from the check.
        (f"{table}/*!50000 DROP /*!50000 DATABASE `{s}` */;\n", "/*!50000"),
        (f"{table}/*M!100000 DROP TABLE /*! `{s}`.keep */;\n", "/*M!"),
        (f"{table}CREATE TABLE `{s}`.keep2 (id INT);\n", "keep2"),
        (f"{table}INSERT INTO {s}.keep VALUES (3, 'three');\n", "INSERT"),
        (f"{table}create view v as\n  select * from film, `{s}`.keep;\n", "create view"),
        (f"{table}DROP TABLE {s.upper()}.KEEP;\n", "DROP TABLE"),
        (f"{table}CREATE DATABASE {s}_new;\n", "CREATE DATABASE"),
        (f"{table}SET GLOBAL max_connections = 7;\n", "SET GLOBAL"),
        (f"{table}SET @@global.general_log = 1;\n", "SET @@global"),
        (f"{table}CREATE USER `{s}`@'%' IDENTIFIED BY 'x';\n", "CREATE USER"),
        (f"{table}GRANT ALL ON `{s}`.* TO `{s}`@'%';\n", "GRANT"),
        (f"{table}SELECT 1 INTO OUTFILE '{outfile}';\n", "OUTFILE"),
        (f"{table}LOAD DATA INFILE '/etc/hostname' INTO TABLE film;\n", "LOAD DATA"),
        (f"{table}INSTALL PLUGIN example SONAME 'ha_example';\n", "INSTALL"),
        # The server read a string's end elsewhere than the check: one query, two statements.
        (
            f"{table}SET sql_mode = 'NO_BACKSLASH_ESCAPES';\n"
            f"SELECT '\\'; DROP DATABASE {s}; -- ';\n",
            "NO_BACKSLASH",
        ),
        (f"{table}SET NAMES gbk;\nSELECT '\u4e01\\'; DROP DATABASE {s}; -- ';\n", "gbk"),
        (
            f"{table}SELECT 1 FROM (SELECT 1 AS \u00a0) t\n"
            f"WHERE 1 --\u00a0; DROP DATABASE {s}; -- \n;\n",
            "--\u00a0",
        ),
        (
            f"{table}DELIMITER //\nCREATE PROCEDURE p()\nBEGIN\n  DROP DATABASE {s};\nEND//\n"
            "DELIMITER ;\nCALL p();\n",
            "CREATE PROCEDURE",
        ),
        (f"{table}SELECT SETVAL({s}.seq, 1000);\n", "SETVAL"),  # moved the sequence
        # SPHINX (ha_sphinx.so ships with the server): its COMMENT is a searchd address the
        # server connects to at the first SELECT.
        (
            f"{table}CREATE TABLE s (id BIGINT UNSIGNED NOT NULL, weight INT NOT NULL,\n"
            "  query VARCHAR(3072) NOT NULL, INDEX(query))\n"
            "  ENGINE=SPHINX COMMENT='sphinx://127.0.0.1:19312/idx';\n"
            "SELECT * FROM s WHERE query = 'x';\n",
            "CREATE TABLE s",
        ),
        # A role switch (as PostgreSQL refuses it) and the binary log's session variables.
        (f"{table}SET ROLE NONE;\n", "SET ROLE"),
        (f"{table}SET sql_log_off = 1;\n", "sql_log_off"),
        (f"{table}SET gtid_seq_no = 1000000;\nINSERT INTO film VALUES (1);\n", "gtid_seq_no"),
        # Lists of tables: the sentinel's table was moved into the scratch and dropped.
        (f"{table}CREATE TABLE c (id INT);\nRENAME TABLE c TO d, {s}.keep TO c;\n", "RENAME"),
        (f"{table}CREATE TABLE c (id INT);\nALTER TABLE c RENAME AS {s}.c;\n", "ALTER"),
        (f"{table}CREATE TABLE c (id INT);\nALTER TABLE c RENAME = {s}.c;\n", "ALTER"),
        # A modifier between the verb and the table, a comma in a list of tables.
        (f"{table}UPDATE IGNORE film, {s}.keep SET keep.v = 'x';\n", "UPDATE"),
        (f"{table}DELETE IGNORE keep FROM film, {s}.keep;\n", "DELETE"),
        (f"{table}REPLACE LOW_PRIORITY {s}.keep VALUES (1, 'x');\n", "REPLACE"),
        # A body of one statement, and a handler's statement, ran unjudged at CALL p().
        (f"{table}CREATE PROCEDURE p() DROP DATABASE {s};\nCALL p();\n", "CREATE PROCEDURE"),
        # A SHOW reads where its FROM/IN says: another database's table list.
        (f"{table}SHOW TABLES FROM {s};\n", "SHOW TABLES"),
        (f"{table}SHOW COLUMNS FROM keep IN `{s}`;\n", "SHOW COLUMNS"),
        (
            f"{table}DELIMITER //\nCREATE PROCEDURE p() BEGIN\n"
            f"  DECLARE CONTINUE HANDLER FOR SQLEXCEPTION DROP DATABASE {s};\n"
            "  SIGNAL SQLSTATE '45000';\nEND//\nDELIMITER ;\nCALL p();\n",
            "CREATE PROCEDURE",
        ),
    ]
    state = _mysql_state(mysql_url, s, outfile)
    _assert_confined(mysql_db, hostile, state, tmp_path)
    before = state()
    _disarm(monkeypatch)  # the proof can fail: without the guard the sample destroys it
    with open_target(mysql_db) as target:
        planner.plan(target, sample)
    assert state() != before


def test_mysql_names_that_begin_with_digits_are_read_as_names(
    mysql_db: str, mysql_url: str, tmp_path: Path
) -> None:
    # The tokenizer read "9ptah_..." as a number and a name: no qualified name was seen.
    s = "9ptah_sentinel_" + uuid.uuid4().hex[:8]
    with open_target(mysql_url) as admin, admin.connection.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{s}`")
        cur.execute(f"CREATE TABLE `{s}`.keep (id INT PRIMARY KEY, v VARCHAR(20))")
        cur.execute(f"INSERT INTO `{s}`.keep VALUES (1, 'one')")
    try:
        table = "CREATE TABLE film (\n  id INT PRIMARY KEY\n);\n"
        hostile = [(f"{table}RENAME TABLE {s}.keep TO stolen;\n", "RENAME")]
        state = _mysql_state(mysql_url, s, f"/tmp/ptah-sentinel-{uuid.uuid4().hex[:8]}")
        _assert_confined(mysql_db, hostile, state, tmp_path)
    finally:
        with open_target(mysql_url) as admin, admin.connection.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{s}`")


@pytest.mark.parametrize(
    "tail",
    [
        "LOCK TABLES film WRITE;",
        "SET SESSION TRANSACTION READ ONLY;",
        "SET max_statement_time = 0.000001;",
        "SET sql_select_limit = 0;",
    ],
)
def test_mysql_what_a_file_leaves_in_its_session_ends_with_its_load(
    mysql_db: str, mysql_url: str, tail: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scratch was dropped on the loading session: these kept it on the server (or broke
    # the inspection) and the plan failed with an internal error.
    from ptah.engines.mysql import ops

    mark = uuid.uuid4().hex[:12]
    monkeypatch.setattr(ops.secrets, "token_hex", lambda _n: mark)
    with open_target(mysql_db) as target:
        plan = planner.plan(target, f"CREATE TABLE film (id INT PRIMARY KEY);\n{tail}\n")
    assert any("`film`" in s.sql for s in plan.statements), plan
    with open_target(mysql_url) as admin, admin.connection.cursor() as cur:
        cur.execute("SHOW DATABASES LIKE %s", (f"ptah_scratch_{mark}",))
        assert cur.fetchall() == ()


@pytest.mark.parametrize("server_mode", ["NO_BACKSLASH_ESCAPES", "ANSI", "ORACLE"])
def test_mysql_a_server_default_mode_does_not_change_how_the_file_is_read(
    mysql_db: str,
    mysql_url: str,
    mysql_sentinel: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server_mode: str,
) -> None:
    """A server whose own default sql_mode reads backslashes or double quotes otherwise
    (set here on each new session, as a server's global default would be, without
    touching the shared test server): the file is still loaded as the check read it.
    Without the pin the first file dropped the sentinel database."""
    from ptah.engines.mysql import ops

    real_connect = ops.connect

    def connect_as_configured(
        url: object, database: str | None = None, read_timeout: float | None = None
    ) -> object:
        conn = real_connect(url, database, read_timeout)  # type: ignore[arg-type]
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = %s", (server_mode,))
        return conn

    monkeypatch.setattr(ops, "connect", connect_as_configured)
    s = mysql_sentinel
    state = _mysql_state(mysql_url, s, f"/tmp/ptah-sentinel-{uuid.uuid4().hex[:8]}")
    before = state()
    files = [
        f"CREATE TABLE film (id INT PRIMARY KEY);\nSELECT '\\'; DROP DATABASE `{s}`; -- ';\n",
        'CREATE TABLE film (id INT PRIMARY KEY, note VARCHAR(40) DEFAULT "a;b");\n',
    ]
    for sql in files:
        with open_target(mysql_db) as target:
            plan = planner.plan(target, sql)
        assert any("`film`" in st.sql for st in plan.statements), plan
        assert state() == before, f"sentinel changed by {sql!r} under {server_mode}"


# A loadable function (UDF) is the server's, in mysql.func: one small library, built here
# when the test server has none (its plugin directory holds no UDF library of its own).
_UDF_SOURCE = r"""
#include <stdio.h>
#include <string.h>
typedef struct {
  unsigned int arg_count;
  int *arg_type;
  char **args;
  unsigned long *lengths;
  char *maybe_null;
  char **attributes;
  unsigned long *attribute_lengths;
  void *extension;
} args_t;
char ptah_udf_init(void *initid, args_t *args, char *message) { return 0; }
void ptah_udf_deinit(void *initid) {}
/* ptah_udf() is 42; ptah_udf('/path') also creates that file (server-wide code acting). */
long long ptah_udf(void *initid, args_t *args, char *is_null, char *error) {
  char path[512];
  if (args->arg_count == 1 && args->args[0] && args->lengths[0] < sizeof path) {
    memcpy(path, args->args[0], args->lengths[0]);
    path[args->lengths[0]] = 0;
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
  }
  return 42;
}
"""


@pytest.fixture
def mysql_udf(mysql_url: str, tmp_path: Path) -> Iterator[str]:
    import shutil
    import subprocess

    with open_target(mysql_url) as admin, admin.connection.cursor() as cur:
        cur.execute("SELECT @@plugin_dir")
        plugin_dir = Path(cur.fetchone()[0])
    library = plugin_dir / "ptah_udf.so"
    if not library.exists():
        if shutil.which("cc") is None or not os.access(plugin_dir, os.W_OK):
            missing("no C compiler (cc) or no write access to the server's plugin directory")
        source = tmp_path / "ptah_udf.c"
        source.write_text(_UDF_SOURCE)
        built = tmp_path / "ptah_udf.so"
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(built), str(source)], check=True)
        shutil.copy(built, library)
    with open_target(mysql_url) as admin, admin.connection.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM mysql.func WHERE name = 'ptah_udf'")
        if cur.fetchone()[0] == 0:
            cur.execute("CREATE FUNCTION ptah_udf RETURNS INTEGER SONAME 'ptah_udf.so'")
    yield "ptah_udf"
    with open_target(mysql_url) as admin, admin.connection.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM mysql.func WHERE name = 'ptah_udf'")
        if cur.fetchone()[0]:
            cur.execute("DROP FUNCTION ptah_udf")


def test_mysql_drop_function_in_a_file_is_the_scratch_function_never_the_servers_udf(
    mysql_db: str, mysql_url: str, mysql_udf: str
) -> None:
    """An unqualified DROP FUNCTION is, to MariaDB, first a loadable function's: each of
    these dropped the server's UDF during a read-only plan. The load qualifies the name
    with the scratch, so it is the file's own stored function (or nothing)."""
    files = [
        f"DROP FUNCTION IF EXISTS {mysql_udf};\n",
        f"/*!50003 DROP FUNCTION IF EXISTS `{mysql_udf}` */;\n",
        f"SET STATEMENT max_statement_time = 10 FOR DROP FUNCTION IF EXISTS {mysql_udf};\n",
        # a dump's own: the drop before each routine's CREATE
        "/*!50003 DROP FUNCTION IF EXISTS `f` */;\nCREATE FUNCTION f() RETURNS INT RETURN 1;\n"
        "DROP FUNCTION f;\n",
    ]
    for tail in files:
        with open_target(mysql_db) as target:
            plan = planner.plan(target, f"CREATE TABLE film (id INT PRIMARY KEY);\n{tail}")
        assert any("`film`" in st.sql for st in plan.statements), plan
        with open_target(mysql_url) as admin, admin.connection.cursor() as cur:
            cur.execute("SELECT name FROM mysql.func WHERE name = %s", (mysql_udf,))
            assert cur.fetchall() == ((mysql_udf,),), f"the server's UDF dropped by {tail!r}"
    with open_target(mysql_db) as target, pytest.raises(Exception, match="does not exist"):
        planner.plan(
            target, f"CREATE TABLE film (id INT PRIMARY KEY);\nDROP FUNCTION {mysql_udf};\n"
        )


def test_mysql_a_call_of_the_servers_udf_is_refused(
    mysql_db: str, mysql_url: str, mysql_udf: str, tmp_path: Path
) -> None:
    """An unqualified call resolves to a UDF before the database's own functions: the
    server's library code ran during a read-only plan (here it wrote a file). The load
    asks the server for its UDFs and refuses a file calling one."""
    outfile = f"/tmp/ptah-sentinel-{uuid.uuid4().hex[:8]}"
    table = "CREATE TABLE film (\n  id INT PRIMARY KEY\n);\n"
    hostile = [
        (f"{table}SELECT {mysql_udf}('{outfile}');\n", "SELECT"),
        (f"{table}CREATE VIEW v AS SELECT `{mysql_udf.upper()}` ('{outfile}') AS x;\n", "VIEW"),
        (
            f"{table}CREATE TABLE t (a INT, b INT AS ({mysql_udf}('{outfile}')) STORED);\n"
            "INSERT INTO t (a) VALUES (1);\n",
            "CREATE TABLE t",
        ),
    ]
    _assert_confined(mysql_db, hostile, lambda: str(os.path.exists(outfile)), tmp_path)
    with open_target(mysql_db) as target:  # a column or a stored function of that name
        plan = planner.plan(target, f"{table}CREATE TABLE u ({mysql_udf} INT);\n")
    assert any("`u`" in st.sql for st in plan.statements), plan


@contextlib.contextmanager
def _mysql_user(mysql_url: str, target_url: str, scratch_grants: str) -> Iterator[str]:
    """The URL of a new account with every privilege on the target's database and
    ``scratch_grants`` on the scratch databases (``ptah_scratch_%``): none on mysql.*, so
    it may not read mysql.func."""
    from urllib.parse import urlsplit

    user = "ptah_lim_" + uuid.uuid4().hex[:8]
    database = urlsplit(target_url).path.lstrip("/")
    with open_target(mysql_url) as admin, admin.connection.cursor() as cur:
        cur.execute(f"CREATE USER `{user}`@'%' IDENTIFIED BY 'lim-pw'")
        cur.execute(f"GRANT ALL ON `{database}`.* TO `{user}`@'%'")
        cur.execute(f"GRANT {scratch_grants} ON `ptah\\_scratch\\_%`.* TO `{user}`@'%'")
    p = urlsplit(target_url)
    try:
        yield f"mysql://{user}:lim-pw@{p.hostname}:{p.port}/{database}"
    finally:
        with open_target(mysql_url) as admin, admin.connection.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS `{user}`@'%'")


_SCRATCH_WITHOUT_ROUTINES = (
    "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, ALTER, CREATE VIEW, SHOW VIEW,"
    " TRIGGER, REFERENCES, CREATE TEMPORARY TABLES, LOCK TABLES, EVENT"
)


@pytest.mark.parametrize("routines", [True, False], ids=["may-create-routines", "may-not"])
def test_mysql_a_udf_call_is_refused_when_the_user_may_not_read_mysql_func(
    mysql_db: str, mysql_url: str, mysql_udf: str, tmp_path: Path, routines: bool
) -> None:
    """A plan's user who may not read mysql.func: the UDF list came back empty and the
    calls below ran the server's library code (it wrote the file). The server is asked
    by name (a stored function of a UDF's name cannot be created), and where the user
    may not create one either, a call the check cannot classify is refused."""
    outfile = f"/tmp/ptah-sentinel-{uuid.uuid4().hex[:8]}"
    table = "CREATE TABLE film (\n  id INT PRIMARY KEY\n);\n"
    hostile = [
        (f"{table}SELECT {mysql_udf}('{outfile}');\n", "SELECT"),
        (f"{table}CREATE VIEW v AS SELECT `{mysql_udf.upper()}` ('{outfile}') AS x;\n", "VIEW"),
        (
            f"{table}CREATE TABLE t (a INT, b INT AS ({mysql_udf} /* */ ('{outfile}')) STORED);\n"
            "INSERT INTO t (a) VALUES (1);\n",
            "CREATE TABLE t",
        ),
    ]
    grants = "ALL" if routines else _SCRATCH_WITHOUT_ROUTINES
    with _mysql_user(mysql_url, mysql_db, grants) as url:
        _assert_confined(url, hostile, lambda: str(os.path.exists(outfile)), tmp_path)
        if not routines:
            got = _refused_plan(url, hostile[0][0], tmp_path)
            assert "cannot tell from a server's loadable function" in str(got["message"]), got
        # An ordinary file still plans: built-ins, types, keys (a column's prefix too),
        # checks, a view; and a column of the UDF's name.
        ordinary = (
            f"{table}CREATE TABLE u (\n  id INT PRIMARY KEY,\n  {mysql_udf} VARCHAR(40),\n"
            "  kind ENUM('a', 'b') NOT NULL DEFAULT 'a',\n  made DATETIME DEFAULT now(),\n"
            "  note TEXT CHECK (CHAR_LENGTH(note) < 100),\n"
            f"  KEY k ({mysql_udf}(10)),\n  KEY n (note(20))\n);\n"
            "CREATE VIEW w AS SELECT CONCAT(id, '-', kind) AS label, IF(id > 1, 'x', 'y') AS f"
            " FROM u;\n"
            "CREATE TABLE pr (id INT, d DATE) PARTITION BY RANGE (YEAR(d))\n"
            "  (PARTITION p0 VALUES LESS THAN (2000), PARTITION p1 VALUES LESS THAN MAXVALUE);\n"
            "CREATE TABLE ph (id INT) PARTITION BY LINEAR HASH (id) PARTITIONS 2;\n"
            "CREATE TABLE pl (a INT) PARTITION BY LIST COLUMNS (a)\n"
            "  (PARTITION p VALUES IN (1, 2));\n"
            "CREATE TABLE pk (a INT) PARTITION BY KEY (a) PARTITIONS 2;\n"
            "CREATE TABLE ft (id INT PRIMARY KEY, b TEXT, FULLTEXT KEY f (b));\n"
            "CREATE VIEW fv AS SELECT id, COUNT(*) OVER (ORDER BY id) AS n FROM ft\n"
            "  WHERE MATCH (b) AGAINST ('x' IN BOOLEAN MODE) GROUP BY id;\n"
        )
        with open_target(url) as target:
            plan = planner.plan(target, ordinary)
        assert any("`u`" in st.sql for st in plan.statements), plan


def test_mysql_a_name_no_function_can_have_leaves_the_others_classified(
    mysql_db: str, mysql_url: str, mysql_udf: str, tmp_path: Path
) -> None:
    """A name the server cannot create a function of (longer than 64 characters, written
    before a parenthesis in a comment) made every name unclassified, and the file's own
    stored function's call was refused; the UDF's call still is."""
    long = "x" * 70
    own = (
        "CREATE TABLE film (\n  id INT PRIMARY KEY\n);\n"
        "CREATE FUNCTION add1(x INT) RETURNS INT DETERMINISTIC RETURN x + 1;\n"
        f"CREATE VIEW v AS SELECT add1(id) /* {long}(see the notes) */ AS n FROM film;\n"
    )
    with _mysql_user(mysql_url, mysql_db, "ALL") as url:
        with open_target(url) as target:
            plan = planner.plan(target, own, policy=SchemaPolicy(ignore=("function",)))
        assert any("`v`" in st.sql for st in plan.statements), plan
        hostile = f"{own}SELECT {mysql_udf}(1);\n"
        got = _refused_plan(url, hostile, tmp_path)
        assert "loadable function ptah_udf" in str(got["message"]), got


def test_mysql_a_column_named_like_a_udf_keeps_its_prefix_index(
    mysql_db: str, mysql_udf: str
) -> None:
    """``KEY k (name(10))`` is a column's prefix, not a call: it was refused when a UDF
    of the column's name was loaded."""
    sql = (
        f"CREATE TABLE u (\n  id INT PRIMARY KEY,\n  {mysql_udf} VARCHAR(40),\n"
        f"  KEY k ({mysql_udf}(10)),\n  UNIQUE KEY `{mysql_udf}` (id, `{mysql_udf}` (5))\n);\n"
        f"CREATE INDEX i ON u ({mysql_udf}(3));\n"
    )
    with open_target(mysql_db) as target:
        plan = planner.plan(target, sql)
    created = "\n".join(st.sql for st in plan.statements)
    assert f"(`{mysql_udf}`(10))" in created and f"(`{mysql_udf}`(3))" in created, created


def test_mysql_a_quoted_built_in_reads_no_server_file(
    mysql_db: str, mysql_url: str, tmp_path: Path
) -> None:
    """```load_file`(x)`` is the built-in (a quoted name resolves to it as a bare one
    does): the check looked for the bare word only, and the load's error echoed the
    server's file into the plan's message ('Incorrect integer value: ...')."""
    with open_target(mysql_url) as admin, admin.connection.cursor() as cur:
        cur.execute("SELECT LOAD_FILE('/etc/hostname')")
        content = cur.fetchone()[0]
    if not content:
        missing("the server reads no /etc/hostname (secure_file_priv or no such file)")
    secret = content.decode().strip()
    table = "CREATE TABLE film (\n  id INT PRIMARY KEY\n);\n"
    for call in ("`load_file`('/etc/hostname')", "`LOAD_FILE` ('/etc/hostname')"):
        sql = f"{table}CREATE TABLE leak (n INT);\nINSERT INTO leak VALUES ({call});\n"
        got = _refused_plan(mysql_db, sql, tmp_path)
        assert got["reason"] == "StatementRefused", got
        assert "line 5:" in str(got["message"]) and secret not in str(got["message"]), got


@pytest.mark.parametrize("name", ["sleep", "load_file", "get_lock", "benchmark"])
def test_mysql_a_column_named_like_a_built_in_keeps_its_prefix_index(
    mysql_db: str, name: str
) -> None:
    sql = f"CREATE TABLE u (\n  {name} VARCHAR(40),\n  KEY k ({name}(10))\n);\n"
    with open_target(mysql_db) as target:
        plan = planner.plan(target, sql)
    assert any(f"(`{name}`(10))" in st.sql for st in plan.statements), plan


# -- MariaDB migrations ----------------------------------------------------------------
# A versioned migration runs on the target itself: its own database's DDL and DML are
# its to do, anything past that database is refused before the run writes anything
# (ptah.engines.versioned.confine), by the History reading (the plan) and by Migrate.

MYSQL_MIGRATIONS = {
    "use another database": "USE {s};\nDROP TABLE keep;\n",
    "use, backticked, in a comment's shadow": "USE/**/`{s}`;\nDELETE FROM keep;\n",
    "qualified drop": "DROP TABLE {s}.keep;\n",
    "qualified insert": "INSERT INTO `{s}`.keep VALUES (3, 'three');\n",
    "rename into the target": "RENAME TABLE {s}.keep TO stolen;\n",
    "rename out of the target": "CREATE TABLE c (id INT);\nALTER TABLE c RENAME TO {s}.c;\n",
    "create table select": "CREATE TABLE c AS SELECT * FROM {s}.keep;\n",
    "drop database, comment inside": "DROP/**/DATABASE {s};\n",
    "drop schema, dash comment": "DROP -- x\n SCHEMA `{s}`;\n",
    "versioned comment": "/*!50001 DROP DATABASE {s} */;\n",
    "mariadb versioned comment": "/*M!100100 DELETE FROM {s}.keep */;\n",
    "create database": "CREATE DATABASE {s}_new;\n",
    "trigger body": "CREATE TRIGGER tr AFTER INSERT ON a FOR EACH ROW DELETE FROM {s}.keep;\n"
    "INSERT INTO a VALUES (1);\n",
    "procedure, called": "DELIMITER //\nCREATE PROCEDURE p() BEGIN DELETE FROM {s}.keep; END//\n"
    "DELIMITER ;\nCALL p();\n",
    "dynamic SQL in a procedure": "DELIMITER //\nCREATE PROCEDURE p() BEGIN\n"
    "  PREPARE st FROM 'DROP DATABASE {s}'; EXECUTE st;\nEND//\nDELIMITER ;\nCALL p();\n",
    "BEGIN NOT ATOMIC": "DELIMITER //\nBEGIN NOT ATOMIC\n  DELETE FROM {s}.keep;\nEND//\n"
    "DELIMITER ;\n",
    "execute immediate": "EXECUTE IMMEDIATE 'DROP DATABASE {s}';\n",
    "event body": "CREATE EVENT e ON SCHEDULE AT CURRENT_TIMESTAMP DO DELETE FROM {s}.keep;\n",
    "sequence": "SELECT SETVAL({s}.seq, 1000);\n",
    "view over it": "CREATE VIEW v AS SELECT * FROM {s}.keep;\n",
    "set statement for": "SET STATEMENT foreign_key_checks = 0 FOR DROP TABLE {s}.keep;\n",
    "set global": "SET GLOBAL max_connections = 7;\n",
    "sql_log_bin": "SET SESSION sql_log_bin = 0;\n",
    "grant": "GRANT SELECT ON `{s}`.* TO CURRENT_USER;\n",
    "create user": "CREATE USER `{s}`@'%' IDENTIFIED BY 'x';\n",
    "outfile": "SELECT 1 INTO OUTFILE '{outfile}';\n",
    "string hides a statement": "SET sql_mode = 'NO_BACKSLASH_ESCAPES';\n"
    "SELECT '\\'; DROP DATABASE {s}; -- ';\n",
    "lock tables": "LOCK TABLES {s}.keep WRITE;\n",
    "show another database": "SHOW TABLES FROM {s};\n",
}


def _migration_dir(tmp_path: Path, second: str, third: str | None = None) -> Path:
    from support.migration_dir import with_sum

    first = "CREATE TABLE a (id INT PRIMARY KEY);\n"
    directory = tmp_path / uuid.uuid4().hex[:6]
    directory.mkdir()
    files = {"0001_a.sql": first, "0002_x.sql": second}
    if third is not None:
        files["0003_y.sql"] = third
    for name, text in with_sum(files).items():
        (directory / name).write_text(text)
    return directory


def _migration_frames(url: str, directory: Path) -> tuple[ResultFrame, ResultFrame]:
    """The History reading and the Migrate run of ``directory``, through the runner's own
    operations."""
    frames = []
    for op in ("history", "migrate"):
        with open_target(url) as target:
            run = Run.on(target, op, f"op-{op}")
            if op == "history":
                payload = operations.history(run, [directory])
            else:
                payload = operations.migrate(run, [directory], None, None, 0.0, None)
        frames.append(ResultFrame.model_validate(payload))
    return frames[0], frames[1]


@pytest.mark.parametrize("name", sorted(MYSQL_MIGRATIONS))
def test_mysql_migrations_that_leave_the_target_are_refused(
    mysql_db: str, mysql_url: str, mysql_sentinel: str, tmp_path: Path, name: str
) -> None:
    s = mysql_sentinel
    outfile = f"/tmp/ptah-sentinel-{uuid.uuid4().hex[:8]}"
    state = _mysql_state(mysql_url, s, outfile)
    before = state()
    sql = MYSQL_MIGRATIONS[name].format(s=s, outfile=outfile)
    history, migrate = _migration_frames(mysql_db, _migration_dir(tmp_path, sql))
    for frame in (history, migrate):
        message = str(frame.data.get("message"))
        assert (frame.outcome, frame.reason) == ("refused", "StatementRefused"), frame
        assert "0002_x.sql line " in message and "\n" not in message, message
    assert migrate.data["applied"] == [], migrate.data  # not even the first file ran
    assert state() == before, f"sentinel changed by {sql!r}"
    with open_target(mysql_db) as target, target.connection.cursor() as cur:
        cur.execute("SHOW TABLES")
        assert cur.fetchall() == ()  # nor was the history table created


def test_mysql_migrations_may_use_their_own_database(
    mysql_db: str, mysql_url: str, mysql_sentinel: str, tmp_path: Path
) -> None:
    """Its own name, its session's settings, its waits, and DROP FUNCTION: qualified with
    the target's name by the runner, so a server's loadable function of that name stays."""
    from support.databases import database_of

    own = database_of(mysql_db)
    sql = (
        f"USE `{own}`;\nCREATE TABLE {own}.b (id INT);\nINSERT INTO `{own}`.b VALUES (1);\n"
        "SET foreign_key_checks = 0;\nALTER DATABASE CHARACTER SET utf8mb4;\n"
        f"SHOW TABLES FROM `{own}`;\nDO SLEEP(0);\n"
        "CREATE FUNCTION f() RETURNS INT RETURN 1;\nDROP FUNCTION IF EXISTS f;\n"
    )
    state = _mysql_state(mysql_url, mysql_sentinel, "/nonexistent")
    before = state()
    history, migrate = _migration_frames(mysql_db, _migration_dir(tmp_path, sql))
    assert history.outcome == "succeeded" and history.data["pending"] == ["1", "2"], history
    assert migrate.outcome == "succeeded" and migrate.data["applied"] == ["1", "2"], migrate
    assert state() == before


def test_mysql_a_migration_that_switches_database_is_stopped_at_run_time(
    mysql_db: str,
    mysql_db2: str,
    mysql_url: str,
    mysql_sentinel: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The second line: with the reading disarmed, a statement that moves the session to
    another database fails there, before the next statement or history row runs in it;
    and a qualified name does reach the sentinel (the proof can fail)."""
    from ptah.engines.versioned import confine as vconfine

    monkeypatch.setattr(vconfine, "check", lambda session, files: None)
    s = mysql_sentinel
    state = _mysql_state(mysql_url, s, "/nonexistent")
    before = state()
    sql = f"USE {s};\nDROP TABLE keep;\n"
    _, migrate = _migration_frames(mysql_db, _migration_dir(tmp_path, sql))
    assert migrate.outcome == "failed" and migrate.data["failure"]["statement"] == 1, migrate
    assert "switched the session" in migrate.data["failure"]["error"], migrate
    assert state() == before
    # On a second database (the first is dirty now): without the check, the sentinel's
    # table is gone.
    _migration_frames(mysql_db2, _migration_dir(tmp_path, f"DROP TABLE {s}.keep;\n"))
    assert state() != before


@pytest.mark.parametrize("mode", ["ANSI_QUOTES", "NO_BACKSLASH_ESCAPES"])
def test_mysql_a_session_that_reads_quotes_otherwise_is_refused(
    mysql_db: str, mysql_sentinel: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A server whose default mode reads quotes otherwise ("other".t is a name, not a
    string): the check cannot vouch for what it read, so nothing runs."""
    from ptah.engines.mysql import target as mytarget

    real = mytarget.connect

    def connect_as_configured(url: object, *args: object, **kwargs: object) -> object:
        conn = real(url, *args, **kwargs)  # type: ignore[arg-type]
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = %s", (mode,))
        return conn

    monkeypatch.setattr(mytarget, "connect", connect_as_configured)
    sql = f'CREATE TABLE "{mysql_sentinel}".t (id INT);\n'
    history, migrate = _migration_frames(mysql_db, _migration_dir(tmp_path, sql))
    for frame in (history, migrate):
        assert (frame.outcome, frame.reason) == ("refused", "StatementRefused"), frame
        assert mode in str(frame.data["message"]), frame


# -- SQLite --------------------------------------------------------------------------


def _sqlite_state(directory: Path, sentinel: Path) -> Callable[[], str]:
    def state() -> str:
        listing = sorted(p.name for p in directory.iterdir() if not p.name.startswith("desired-"))
        return hashlib.sha256(repr(listing).encode() + sentinel.read_bytes()).hexdigest()

    return state


def test_sqlite_plans_of_hostile_files_leave_the_sentinel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    data = tmp_path / "data"
    data.mkdir()
    sentinel = data / "sentinel.db"
    with sqlite3.connect(sentinel) as conn:
        conn.execute("CREATE TABLE keep (id INTEGER PRIMARY KEY, v TEXT)")
        conn.execute("INSERT INTO keep VALUES (1, 'one'), (2, 'two')")
    conn.close()
    url = f"sqlite:///{data}/target.db"
    table = "PRAGMA foreign_keys = ON;\nCREATE TABLE film (id INTEGER PRIMARY KEY);\n"
    attach = f"{table}ATTACH DATABASE '{sentinel}' AS s;\nDROP TABLE s.keep;\n"
    hostile = [
        (attach, "ATTACH"),
        (f"{table}attach '{data}/new.db' as n;\n", "attach"),
        (f"{table}VACUUM INTO '{data}/copy.db';\n", "VACUUM"),
        (f"{table}PRAGMA user_version = 3;\n", "user_version"),
        (f"{table}PRAGMA main.journal_mode = WAL;\n", "journal_mode"),
        (f"{table}CREATE TABLE s.keep2 (id);\n", "keep2"),
        (f'{table}create view v as select * from film, "s".keep;\n', "create view"),
        (f"{table}DETACH s;\n", "DETACH"),
    ]
    with open_target(url):
        pass  # the target file exists before the first checksum
    state = _sqlite_state(data, sentinel)
    _assert_confined(url, hostile, state, tmp_path)
    before = state()
    _disarm(monkeypatch)
    with open_target(url) as target, pytest.raises(Exception, match="does not load"):
        planner.plan(target, attach + "SELECT * FROM s.keep;\n")
    assert state() != before


# -- PostgreSQL ----------------------------------------------------------------------


@pytest.fixture
def pg_sentinel(pg_url: str) -> Iterator[str]:
    name = "ptah_sentinel_" + uuid.uuid4().hex[:8]
    with open_target(pg_url) as admin:
        admin.connection.execute(f'CREATE DATABASE "{name}"')
    with open_target(with_database(pg_url, name)) as db:
        db.connection.execute("CREATE TABLE keep (id int PRIMARY KEY, v text)")
        db.connection.execute("INSERT INTO keep VALUES (1, 'one'), (2, 'two')")
    yield name
    with open_target(pg_url) as admin:
        admin.connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.connection.execute(f'DROP ROLE IF EXISTS "{name}"')


def test_postgres_plans_of_hostile_files_leave_the_sentinel(
    pg_db: str, pg_url: str, pg_sentinel: str, tmp_path: Path
) -> None:
    s = pg_sentinel
    outfile = f"/tmp/ptah-sentinel-{uuid.uuid4().hex[:8]}"
    sentinel_url = with_database(pg_url, s)

    def state() -> str:
        with open_target(pg_url) as admin:
            dbs = admin.connection.execute(
                "SELECT datname FROM pg_database WHERE datname = %s", (s,)
            ).fetchall()
            roles = admin.connection.execute(
                "SELECT rolname FROM pg_roles WHERE rolname = %s", (s,)
            ).fetchall()
        with open_target(sentinel_url) as db:
            rows = db.connection.execute("SELECT * FROM keep ORDER BY id").fetchall()
        return repr((dbs, roles, rows, os.path.exists(outfile)))

    table = "CREATE TABLE film (\n  id int PRIMARY KEY\n);\n"
    hostile = [
        (f"DROP DATABASE IF EXISTS {s};\nCREATE DATABASE {s};\n\\connect {s}\n{table}", "DROP"),
        (f"{table}\\connect {s}\nDROP TABLE keep;\n", "\\connect"),
        (f"{table}CREATE ROLE {s} LOGIN;\n", "CREATE ROLE"),
        (f"{table}INSERT INTO {s}.public.keep VALUES (3, 'x');\n", "INSERT"),
        (f"{table}COPY (SELECT 1) TO '{outfile}';\n", "COPY"),
        (f"{table}ALTER SYSTEM SET work_mem = '64MB';\n", "ALTER SYSTEM"),
        # What acts outside reached by another name: each wrote the file in a plan.
        (
            f"{table}SELECT lo_from_bytea(424242, 'x');\n"
            f"SELECT U&\"lo\\005fexport\"(424242, '{outfile}');\n",
            "U&",
        ),
        (
            f"{table}SELECT lo_from_bytea(424243, 'x');\nSELECT * FROM ts_stat("
            f"$q$SELECT to_tsvector(lo_export(424243, '{outfile}')::text)$q$);\n",
            "ts_stat",
        ),
        (
            f"{table}CREATE OPERATOR ### (LEFTARG = oid, RIGHTARG = text, FUNCTION = lo_export);"
            f"\nSELECT lo_from_bytea(424244, 'x');\nSELECT 424244::oid ### '{outfile}';\n",
            "OPERATOR",
        ),
        (
            f"{table}CREATE FUNCTION d(a text, b text) RETURNS int LANGUAGE plpgsql AS"
            " $b$ BEGIN EXECUTE a; RETURN 1; END $b$;\n"
            "CREATE OPERATOR ### (LEFTARG = text, RIGHTARG = text, PROCEDURE = d);\n"
            f"CREATE TABLE t AS SELECT $c$COPY (SELECT 1) TO PROGRAM 'touch {outfile}'$c$"
            " ### 'y' AS z;\n",
            "CREATE TABLE t AS",
        ),
        (
            f"{table}UPDATE pg_proc SET proname = 'harmless' WHERE proname = 'lo_export';\n"
            f"SELECT lo_from_bytea(424245, 'x');\nSELECT harmless(424245, '{outfile}');\n",
            "UPDATE pg_proc",
        ),
        (
            f"{table}SELECT lo_from_bytea(424246, 'x');\n"
            f"CREATE FUNCTION f() RETURNS int RETURN lo_export(424246, '{outfile}');\n"
            "SELECT f();\n",
            "SELECT f()",
        ),
        # The inspection read this table instead of the catalog (a forged schema).
        (f"{table}CREATE TEMP TABLE pg_namespace (oid oid, nspname name);\n", "TEMP"),
        (f"{table}SELECT 1 -- note\r; COPY (SELECT 1) TO PROGRAM 'touch {outfile}';\n;\n", "note"),
        (
            f"{table}SELECT E'a'\n'\\', ' ; COPY (SELECT 1) TO PROGRAM $$touch {outfile}$$ ;"
            " SELECT ' AS q --';\n;\n",
            "COPY",
        ),
        (
            f"{table}CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $b$ BEGIN\n"
            f"  COPY (SELECT 1) TO PROGRAM 'touch {outfile}';\nEND $b$;\nSELECT f();\n",
            "SELECT f()",
        ),
        # The failing statement's replay, one query each, read the next one with backslash
        # escapes: the check's SELECT of two strings ran a program on the server.
        (
            f"{table}SET standard_conforming_strings = off;\n"
            f"SELECT 'a\\', ' ; COPY (SELECT 1) TO PROGRAM $$touch {outfile}$$ ;"
            " SELECT ' AS q --';\n"
            ";\nSELECT 1/0;\n",
            "standard_conforming_strings",
        ),
    ]
    _assert_confined(pg_db, hostile, state, tmp_path)


def _pg_server_log(pg_url: str) -> Path | None:
    """The server's log file when this machine can read it (the test servers' own)."""
    with open_target(pg_url) as admin:
        directory, current = admin.connection.execute(
            "SELECT current_setting('data_directory'), pg_current_logfile()"
        ).fetchone()
    for candidate in (current and Path(directory) / current, Path(directory) / "server.log"):
        if candidate and os.access(candidate, os.R_OK):
            return Path(candidate)
    return None


def test_postgres_a_plan_writes_nothing_into_the_servers_log(
    pg_db: str, pg_url: str, tmp_path: Path
) -> None:
    # "SET log_min_duration_statement = 0" made the server log the file's statements: a
    # read-only plan wrote text of its choosing (a forged FATAL line) into the server's log.
    log = _pg_server_log(pg_url)
    if log is None:
        missing("the server's log file is not readable here")
    mark = f"ptah-forged-{uuid.uuid4().hex[:8]}"
    table = "CREATE TABLE film (\n  id int PRIMARY KEY\n);\n"
    line = f"SELECT '{mark} FATAL:  password authentication failed for user \"postgres\"';\n"
    hostile = [
        (f"{table}SET log_min_duration_statement = 0;\n{line}", "log_min_duration"),
        (f"{table}SELECT set_config('log_statement', 'all', false);\n{line}", "set_config"),
    ]
    _assert_confined(pg_db, hostile, lambda: str(mark in log.read_text(errors="replace")), tmp_path)


def test_postgres_a_plan_reports_no_secret_of_the_server(pg_db: str, tmp_path: Path) -> None:
    # A plan's failure reports the server's error: a cast of another role's password hash
    # (or another session's query) put it in the plan's result.
    table = "CREATE TABLE film (\n  id int PRIMARY KEY\n);\n"
    files = [
        (
            f"{table}SELECT rolpassword::int FROM pg_authid WHERE rolpassword IS NOT NULL;\n",
            "SELECT",
        ),
        (
            f"{table}CREATE VIEW act AS SELECT query FROM pg_stat_activity;\n"
            "SELECT query::int FROM act WHERE query <> '';\n",
            "FROM act",
        ),
        # pageinspect: pg_authid's raw page (role names and hashes) in the plan's error
        (
            f"{table}CREATE EXTENSION IF NOT EXISTS pageinspect;\n"
            "SELECT (SELECT string_agg(encode(t_data, 'escape'), '|')\n"
            "  FROM heap_page_items(get_raw_page('pg_authid', 0)))::int;\n",
            "SELECT (SELECT string_agg",
        ),
    ]
    for sql, first_bad in files:
        got = _refused_plan(pg_db, sql, tmp_path)
        assert "SCRAM-SHA-256$" not in str(got["message"]), got
        assert got["reason"] == "StatementRefused", got
        assert f"line {_line_of(sql, first_bad)}:" in str(got["message"]), got


def test_postgres_a_file_does_not_redefine_what_the_inspection_reads_by(
    pg_db: str, tmp_path: Path
) -> None:
    # The inspection calls pg_catalog's format_type on the loading session: redefined by the
    # file, it made the plan of "title text" create "title bigint" (a forged plan).
    table = "CREATE TABLE film (\n  id int PRIMARY KEY,\n  title text\n);\n"
    forged = "RETURNS text LANGUAGE sql STABLE AS $$ SELECT 'bigint'::text $$;\n"
    files = [
        (f"{table}CREATE OR REPLACE FUNCTION pg_catalog.format_type(oid, integer)\n{forged}", "OR"),
        (
            f"{table}SET search_path = pg_catalog;\n"
            f"CREATE OR REPLACE FUNCTION format_type(oid, integer)\n{forged}",
            "search_path",
        ),
        (
            f"{table}ALTER FUNCTION format_type(oid, integer) RENAME TO format_type_orig;\n"
            f"CREATE FUNCTION public.format_type(oid, integer)\n{forged}"
            "ALTER FUNCTION public.format_type(oid, integer) SET SCHEMA pg_catalog;\n",
            "SET SCHEMA",
        ),
    ]
    for sql, first_bad in files:
        got = _refused_plan(pg_db, sql, tmp_path)
        assert got["reason"] == "StatementRefused", got
        assert f"line {_line_of(sql, first_bad)}:" in str(got["message"]), got


def test_postgres_plan_of_many_statements_leaves_the_cluster_catalogs(
    pg_db: str, pg_url: str, pg_sentinel: str, tmp_path: Path
) -> None:
    # A file of more than one batch loads in committed batches: a write to a catalog all
    # databases share (pg_authid) stayed, and gave another role CREATEDB.
    s = pg_sentinel
    with open_target(pg_url) as admin:
        admin.connection.execute(f'CREATE ROLE "{s}" NOLOGIN NOCREATEDB')

    def state() -> str:
        with open_target(pg_url) as admin:
            row = admin.connection.execute(
                "SELECT rolcreatedb FROM pg_authid WHERE rolname = %s", (s,)
            ).fetchone()
        return repr(row)

    tables = "".join(f"CREATE TABLE t{i} (id int);\n" for i in range(2100))
    hostile = [
        (f"UPDATE pg_authid SET rolcreatedb = true WHERE rolname = '{s}';\n{tables}", "UPDATE")
    ]
    _assert_confined(pg_db, hostile, state, tmp_path)


def test_postgres_a_role_default_does_not_change_how_the_file_is_read(
    pg_db: str, pg_url: str, tmp_path: Path
) -> None:
    """A role whose default is standard_conforming_strings = off (ALTER ROLE ... SET, as a
    cluster may have it): "SELECT 'a\\''; COPY ...; -- '" is one string to the check, and
    to such a session a string, a COPY TO PROGRAM and a comment. The loading session
    starts with the server's default reading, so the program never runs. (Without it the
    file was written.)"""
    from urllib.parse import urlsplit, urlunsplit

    role = "ptah_scs_" + uuid.uuid4().hex[:8]
    outfile = f"/tmp/ptah-sentinel-{uuid.uuid4().hex[:8]}"
    with open_target(pg_url) as admin:
        admin.connection.execute(f"CREATE ROLE {role} LOGIN SUPERUSER PASSWORD 'scs-pw'")
        admin.connection.execute(f"ALTER ROLE {role} SET standard_conforming_strings = off")
    parts = urlsplit(pg_db)
    as_role = urlunsplit(parts._replace(netloc=f"{role}:scs-pw@{parts.hostname}:{parts.port}"))
    try:
        sql = (
            "CREATE TABLE film (id int PRIMARY KEY);\n"
            f"SELECT 'a\\''; COPY (SELECT 1) TO PROGRAM $$touch {outfile}$$; -- ';\n"
        )
        with open_target(as_role) as target:
            plan = planner.plan(target, sql)
        assert any("film" in st.sql for st in plan.statements), plan
        assert not os.path.exists(outfile), "the desired file ran a program on the server"
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(outfile)
        with open_target(pg_url) as admin:
            admin.connection.execute(f"DROP OWNED BY {role}")
            admin.connection.execute(f"DROP ROLE {role}")


# -- PostgreSQL migrations -------------------------------------------------------------
# As on MariaDB: a migration's own database is its to change (its defaults included), the
# cluster is not: another database, roles, tablespaces, the server's configuration, files,
# programs and libraries, other sessions, other servers, role switches; and dynamic SQL it
# cannot read runs nowhere while the migrations run. A sentinel database and a sentinel
# role beside the target prove it.

_NO_TX = "-- ptah:no-transaction\n"
_RUN = (
    "CREATE FUNCTION run(q text) RETURNS void LANGUAGE plpgsql AS $b$ BEGIN EXECUTE q; END $b$;\n"
)
PG_MIGRATIONS = {
    "drop database": "DROP DATABASE {s};\n",
    "drop database, no transaction": _NO_TX + "DROP DATABASE IF EXISTS {s};\n",
    "create database": _NO_TX + "CREATE DATABASE {s}_new;\n",
    "alter another database": "ALTER DATABASE {s} CONNECTION LIMIT 0;\n",
    "alter another database's defaults": "ALTER DATABASE {s} SET work_mem = '7MB';\n",
    "rename the own database": "ALTER DATABASE {own} RENAME TO {s}_moved;\n",
    "own database's sessions switch role": "ALTER DATABASE {own} SET role = '{s}';\n",
    "alter system": _NO_TX + "ALTER SYSTEM SET work_mem = '77MB';\n",
    "create role": "CREATE ROLE {s}_new LOGIN;\n",
    "alter role": "ALTER ROLE {s} SUPERUSER;\n",
    "alter role set": "ALTER ROLE {s} SET work_mem = '7MB';\n",
    "alter role in database": "ALTER ROLE {s} IN DATABASE {own} SET work_mem = '7MB';\n",
    "drop role": "DROP ROLE {s};\n",
    "grant membership": "GRANT pg_read_server_files TO {s};\n",
    "grant on another database": "GRANT CREATE ON DATABASE {s} TO {s};\n",
    "drop tablespace": _NO_TX + "DROP TABLESPACE IF EXISTS {s};\n",
    "copy to program": "COPY (SELECT 1) TO PROGRAM 'touch {outfile}';\n",
    "copy to a server file": "COPY (SELECT 1) TO '{outfile}';\n",
    "copy from a server file": "COPY a FROM '/etc/hostname';\n",
    "pg_read_file": "SELECT pg_read_file('/etc/hostname');\n",
    "lo_export": "SELECT lo_export(lo_from_bytea(0, 'x'), '{outfile}');\n",
    "lo_import": "SELECT lo_import('/etc/hostname');\n",
    "terminate others": "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
    " WHERE datname = '{s}';\n",
    "dblink": "CREATE EXTENSION IF NOT EXISTS dblink;\n"
    "SELECT dblink_exec('dbname={s}', 'DELETE FROM keep');\n",
    "postgres_fdw": "CREATE EXTENSION IF NOT EXISTS postgres_fdw;\n"
    "CREATE SERVER sv FOREIGN DATA WRAPPER postgres_fdw OPTIONS (dbname '{s}');\n",
    "subscription": "CREATE SUBSCRIPTION {s} CONNECTION 'dbname={s}' PUBLICATION p"
    " WITH (connect = false);\n",
    "set session authorization": "SET SESSION AUTHORIZATION {s};\n",
    "set role": "SET ROLE {s};\n",
    "set_config role": "SELECT set_config('role', '{s}', false);\n",
    "load": "LOAD 'auto_explain';\n",
    "checkpoint": "CHECKPOINT;\n",
    "reindex system": _NO_TX + "REINDEX SYSTEM {own};\n",
    "vacuum full of everything": _NO_TX + "VACUUM FULL;\n",
    "three-part name": "INSERT INTO {s}.public.keep VALUES (3, 'x');\n",
    "shared catalog write": "UPDATE pg_authid SET rolsuper = true WHERE rolname = '{s}';\n",
    "string hides a statement": "SET standard_conforming_strings = off;\n"
    "SELECT 'a\\', ' ; ALTER ROLE {s} SUPERUSER; SELECT ' AS q --';\n",
    "DO, dynamic": "DO $$ BEGIN EXECUTE format('ALTER ROLE %I SUPERUSER', '{s}'); END $$;\n",
    "DO, constant": "DO $$ BEGIN EXECUTE 'ALTER ROLE {s} SUPERUSER'; END $$;\n",
    "DO, static": "DO $$ BEGIN DROP ROLE {s}; END $$;\n",
    "DO, another language": "DO LANGUAGE plpython3u $$ import os $$;\n",
    "routine of dynamic SQL, called": _RUN + "SELECT run('ALTER ROLE {s} SUPERUSER');\n",
    "routine a DO block creates, called": "DO $a$ BEGIN CREATE FUNCTION run(q text) RETURNS"
    " void LANGUAGE plpgsql AS $b$ BEGIN EXECUTE q; END $b$; END $a$;\n"
    "SELECT run('ALTER ROLE {s} SUPERUSER');\n",
    "trigger of dynamic SQL, fired": "CREATE FUNCTION tf() RETURNS trigger LANGUAGE plpgsql AS"
    " $b$ BEGIN EXECUTE 'ALTER ROLE {s} SUPERUSER'; RETURN NEW; END $b$;\n"
    "CREATE TRIGGER tr AFTER INSERT ON a FOR EACH ROW EXECUTE FUNCTION tf();\n"
    "INSERT INTO a VALUES (1);\n",
}


@pytest.fixture
def pg_sentinel_role(pg_url: str, pg_sentinel: str) -> str:
    """A role named as the sentinel database (pg_sentinel drops it afterwards)."""
    with open_target(pg_url) as admin:
        admin.connection.execute(f'CREATE ROLE "{pg_sentinel}" NOLOGIN')
    return pg_sentinel


def _pg_state(pg_url: str, s: str, outfile: str) -> Callable[[], str]:
    """The sentinel database (its settings and rows), the sentinel role, the server's
    configuration files, a server file that must not appear."""

    def state() -> str:
        with open_target(pg_url) as admin:
            c = admin.connection
            dbs = c.execute(
                "SELECT datname, datconnlimit, datallowconn FROM pg_database"
                " WHERE datname LIKE %s ORDER BY 1",
                (s + "%",),
            ).fetchall()
            roles = c.execute(
                "SELECT rolname, rolsuper, rolcanlogin, rolconfig FROM pg_roles"
                " WHERE rolname LIKE %s ORDER BY 1",
                (s + "%",),
            ).fetchall()
            members = c.execute(
                "SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member"
                " WHERE r.rolname = %s",
                (s,),
            ).fetchall()
            settings = c.execute(
                "SELECT setdatabase, setrole, setconfig FROM pg_db_role_setting ORDER BY 1, 2"
            ).fetchall()
            files = c.execute(
                "SELECT name, setting FROM pg_file_settings WHERE sourcefile LIKE '%auto.conf'"
            ).fetchall()
        with open_target(with_database(pg_url, s)) as db:
            rows = db.connection.execute("SELECT * FROM keep ORDER BY id").fetchall()
        return repr((dbs, roles, members, settings, files, rows, os.path.exists(outfile)))

    return state


@pytest.mark.parametrize("name", sorted(PG_MIGRATIONS))
def test_postgres_migrations_that_leave_the_target_are_refused(
    pg_db: str, pg_url: str, pg_sentinel_role: str, tmp_path: Path, name: str
) -> None:
    s = pg_sentinel_role
    outfile = f"/tmp/ptah-sentinel-{uuid.uuid4().hex[:8]}"
    state = _pg_state(pg_url, s, outfile)
    before = state()
    sql = PG_MIGRATIONS[name].format(s=s, outfile=outfile, own=database_of(pg_db))
    history, migrate = _migration_frames(pg_db, _migration_dir(tmp_path, sql))
    for frame in (history, migrate):
        message = str(frame.data.get("message"))
        assert (frame.outcome, frame.reason) == ("refused", "StatementRefused"), frame
        assert "0002_x.sql line " in message and "\n" not in message, message
        assert "scratch" not in message, message
    assert migrate.data["applied"] == [], migrate.data  # not even the first file ran
    assert state() == before, f"sentinel changed by {sql!r}"
    with open_target(pg_db) as target:
        tables = target.connection.execute(
            "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace"
        ).fetchall()
    assert tables == []  # nor was the history table created


def test_postgres_a_routine_a_later_migration_calls_is_refused(
    pg_db: str, pg_url: str, pg_sentinel_role: str, tmp_path: Path
) -> None:
    """The pending files are read together: a routine of dynamic SQL defined by one and
    called by the next is refused at the call, before the first file runs."""
    s = pg_sentinel_role
    state = _pg_state(pg_url, s, "/nonexistent")
    before = state()
    third = f"SELECT run('ALTER ROLE {s} SUPERUSER');\n"
    history, migrate = _migration_frames(pg_db, _migration_dir(tmp_path, _RUN, third))
    for frame in (history, migrate):
        assert (frame.outcome, frame.reason) == ("refused", "StatementRefused"), frame
        assert "0003_y.sql line 1: calls run()" in str(frame.data["message"]), frame
    assert migrate.data["applied"] == []
    assert state() == before


def test_postgres_migrations_may_change_their_own_database(
    pg_db: str, pg_url: str, pg_sentinel_role: str, tmp_path: Path
) -> None:
    """What migrations ordinarily do passes and runs: functions and triggers with dynamic
    SQL in their bodies (stored, not run), extensions, grants to an existing role, the
    search_path, the database's own defaults, comments, a DO block's constant EXECUTE,
    temporary tables, VACUUM of a table (no transaction)."""
    own, s = database_of(pg_db), pg_sentinel_role
    second = (
        "CREATE EXTENSION IF NOT EXISTS pg_trgm;\n"
        "CREATE SCHEMA app;\n"
        # the history table's schema left out: the runner's rows still go to it
        "SET search_path = app;\n"
        "CREATE TABLE b (id int PRIMARY KEY, v text);\n"
        "CREATE TABLE b_log (id int);\n"
        "CREATE FUNCTION audit() RETURNS trigger LANGUAGE plpgsql AS $b$ BEGIN\n"
        "  EXECUTE format('INSERT INTO app.%I_log VALUES ($1)', TG_TABLE_NAME) USING NEW.id;\n"
        "  RETURN NEW; END $b$;\n" + _RUN + f"GRANT USAGE ON SCHEMA app TO {s};\n"
        f"GRANT SELECT, INSERT ON b TO {s};\n"
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA app GRANT SELECT ON TABLES TO {s};\n"
        "COMMENT ON TABLE b IS 'the b table';\n"
        f"COMMENT ON DATABASE {own} IS 'the app';\n"
        f"ALTER DATABASE {own} SET work_mem = '8MB';\n"
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_type WHERE typname = 'mood') THEN\n"
        "  CREATE TYPE mood AS ENUM ('ok'); END IF; END $$;\n"
        "DO $$ BEGIN EXECUTE 'CREATE INDEX b_v ON app.b (v)'; END $$;\n"
        "CREATE TEMP TABLE staging AS SELECT 1 AS id;\n"
        "CREATE TRIGGER tr AFTER INSERT ON b FOR EACH ROW EXECUTE FUNCTION audit();\n"
        "RESET search_path;\n"
    )
    third = _NO_TX + "VACUUM ANALYZE app.b;\n"
    state = _pg_state(pg_url, s, "/nonexistent")
    before = state()
    history, migrate = _migration_frames(pg_db, _migration_dir(tmp_path, second, third))
    assert history.outcome == "succeeded" and history.data["pending"] == ["1", "2", "3"], history
    assert migrate.outcome == "succeeded", migrate
    assert migrate.data["applied"] == ["1", "2", "3"], migrate
    with open_target(pg_db) as target:
        c = target.connection
        assert c.execute(
            "SELECT count(*) FROM pg_proc WHERE proname IN ('audit', 'run')"
        ).fetchone() == (2,)
        assert c.execute("SELECT has_table_privilege(%s, 'app.b', 'INSERT')", (s,)).fetchone() == (
            True,
        )
        assert c.execute("SELECT to_regclass('app.b_v') IS NOT NULL").fetchone() == (True,)
    # Only its own database's defaults changed: the sentinel's state but that setting.
    after = state()
    assert after != before and "work_mem=8MB" in after
    with open_target(pg_url) as admin:
        admin.connection.execute(f'ALTER DATABASE "{own}" RESET ALL')
    assert state() == before
    with open_target(pg_db) as target:  # the grants, so that the role can be dropped
        target.connection.execute(f'DROP OWNED BY "{s}"')


def test_postgres_a_migration_that_switches_role_is_stopped_at_run_time(
    pg_db: str, pg_url: str, pg_sentinel_role: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second line: with the reading disarmed, a statement that switches the session's
    role fails there (the file rolled back, or stopped at it), before anything more runs
    under that role; and the same migration without the guard does act as the other role
    (the proof can fail)."""
    from ptah.engines.versioned import confine as vconfine
    from ptah.engines.versioned import dialects

    monkeypatch.setattr(vconfine, "check", lambda session, files: None)
    s = pg_sentinel_role
    # What runs after the switch runs as the other role (its own settings change), which
    # may write the history table too: nothing but the guard stops the run.
    hostile = (
        f"GRANT ALL ON ptah_schema_history TO {s};\nSET ROLE {s};\n"
        "ALTER ROLE CURRENT_USER SET work_mem = '7MB';\n"
    )
    state = _pg_state(pg_url, s, "/nonexistent")
    before = state()
    for sql in (hostile, _NO_TX + hostile):
        _, migrate = _migration_frames(pg_db, _migration_dir(tmp_path, sql))
        assert migrate.outcome == "failed", migrate
        assert migrate.data["failure"]["statement"] == 2, migrate
        assert "another role" in migrate.data["failure"]["error"], migrate
        assert state() == before
        with open_target(pg_url) as admin:  # a clean target for the next run
            admin.connection.execute(f'DROP DATABASE "{database_of(pg_db)}" WITH (FORCE)')
            admin.connection.execute(f'CREATE DATABASE "{database_of(pg_db)}"')
    monkeypatch.setattr(dialects.Session, "_run_postgres", _unguarded)
    _, migrate = _migration_frames(pg_db, _migration_dir(tmp_path, hostile))
    assert migrate.outcome == "succeeded", migrate
    assert state() != before
    with open_target(pg_db) as target:  # the grant, so that the role can be dropped
        target.connection.execute(f'DROP OWNED BY "{s}"')


def _unguarded(self: object, text: str) -> None:
    with self.conn.cursor() as cur:  # type: ignore[attr-defined]
        cur.execute(text)


def test_postgres_a_database_default_does_not_change_how_a_migration_is_read(
    pg_db: str, pg_url: str, pg_sentinel_role: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The target's default reads a backslash as an escape (standard_conforming_strings
    off): the check read one SELECT of two strings, and so does the server, because the
    runner's session reads as the check does; without that, the server ran the statement
    hidden in the strings (the proof can fail)."""
    from ptah.engines.versioned import dialects

    s = pg_sentinel_role
    with open_target(pg_url) as admin:
        admin.connection.execute(
            f'ALTER DATABASE "{database_of(pg_db)}" SET standard_conforming_strings = off'
        )
    state = _pg_state(pg_url, s, "/nonexistent")
    before = state()
    sql = f"SELECT 'a\\', ' ; ALTER ROLE {s} SET work_mem = ''7MB''; SELECT ' AS q --';\n"
    history, migrate = _migration_frames(pg_db, _migration_dir(tmp_path, sql))
    assert history.outcome == "succeeded", history
    assert migrate.outcome == "succeeded" and migrate.data["applied"] == ["1", "2"], migrate
    assert state() == before
    with open_target(pg_url) as admin:
        admin.connection.execute(f'DROP DATABASE "{database_of(pg_db)}" WITH (FORCE)')
        admin.connection.execute(f'CREATE DATABASE "{database_of(pg_db)}"')
        admin.connection.execute(
            f'ALTER DATABASE "{database_of(pg_db)}" SET standard_conforming_strings = off'
        )
    monkeypatch.setattr(dialects, "_PG_AS_CHECKED", ())
    _migration_frames(pg_db, _migration_dir(tmp_path, sql))
    assert state() != before
