"""Online plans without a database: the statement model, apply's steps, the policy's
options and the PostgreSQL statement forms (the real servers: tests/engines/test_online.py)."""

from __future__ import annotations

import pytest

from ptah.api.common import OnlinePolicy
from ptah.api.resources import PlannedStatement
from ptah.engines.model import LOCK_HEAVY, NEW, NONE, SHARED, Online, Statement
from ptah.engines.ops import Progress, Timeouts
from ptah.engines.postgres import online as pgonline
from ptah.engines.postgres.ops import steps
from support.plans import plan_spec


def test_statement_json_round_trip_keeps_transaction_and_lock() -> None:
    s = Statement("ALTER TABLE t VALIDATE CONSTRAINT c", ("x",), transaction=NEW, lock="SUE")
    assert s.to_json() == {
        "sql": s.sql,
        "hazards": ["x"],
        "transaction": "new",
        "lock": "SUE",
    }
    assert Statement.from_json(s.to_json()) == s
    plain = Statement("CREATE TABLE t (a int)")
    assert plain.to_json() == {"sql": plain.sql, "hazards": []}
    # A plan written before statements said where they run: CONCURRENTLY still runs alone.
    old = Statement.from_json({"sql": "CREATE INDEX CONCURRENTLY i ON t (a)", "hazards": []})
    assert old.transaction == NONE and not old.transactional
    with pytest.raises(ValueError):
        Statement.from_json({"sql": "SELECT 1", "transaction": "sometimes"})


def test_planned_statement_wire_is_the_engine_json() -> None:
    s = Statement("DROP INDEX CONCURRENTLY i", ("h",), transaction=NONE, lock="SUE")
    assert PlannedStatement.model_validate(s.to_json()).wire() == s.to_json()
    plain = Statement("CREATE TABLE t (a int)")
    # An old plan's statements (no transaction, no lock) keep their digest.
    assert PlannedStatement.model_validate(plain.to_json()).wire() == plain.to_json()


def test_steps_cut_where_apply_commits() -> None:
    a, b = Statement("A"), Statement("B")
    c = Statement("C", transaction=NONE)
    v = Statement("V", transaction=NEW)
    got = steps([a, b, c, v, a, c, b])
    assert [(i, [s.sql for s in g]) for i, g in got] == [
        (0, ["A", "B"]),
        (2, ["C"]),
        (3, ["V", "A"]),
        (5, ["C"]),
        (6, ["B"]),
    ]
    assert steps([]) == [(0, [])]


def test_backoff_doubles_up_to_thirty_seconds() -> None:
    t = Timeouts(backoff_seconds=1.5)
    assert [t.backoff(n) for n in (1, 2, 3, 6)] == [1.5, 3.0, 6.0, 30.0]


def test_progress_records_each_retry() -> None:
    p = Progress()
    p.retried(2, 1, 0.5, "canceling statement due to lock timeout")
    assert p.retries == [
        {
            "statement": 2,
            "attempt": 1,
            "backoffSeconds": 0.5,
            "error": "canceling statement due to lock timeout",
        }
    ]
    assert "statement 3 timed out waiting for a lock (try 1)" in p.notes[0]


def test_online_techniques_from_the_runner_options() -> None:
    assert Online.from_off(()) == Online()
    assert Online.from_off(("all",)) == Online.off()
    assert Online.from_off(("not-null", "indexes")) == Online(indexes=False, not_null=False)
    with pytest.raises(ValueError):
        Online.from_off(("sometimes",))


def test_online_policy_defaults_and_overrides() -> None:
    assert OnlinePolicy().plan_args() == []
    assert OnlinePolicy(enabled=False).plan_args() == [
        "--offline=indexes",
        "--offline=constraints",
        "--offline=not-null",
        "--offline=algorithm",
    ]
    only_indexes = OnlinePolicy.model_validate({"enabled": False, "indexes": True})
    assert "--offline=indexes" not in only_indexes.plan_args()
    assert OnlinePolicy(not_null=False).plan_args() == ["--offline=not-null"]
    assert OnlinePolicy().apply_args() == []
    timed = OnlinePolicy.model_validate({"lockTimeoutSeconds": 2.5, "lockRetries": 0})
    assert timed.apply_args() == ["--lock-timeout-seconds", "2.5", "--lock-retries", "0"]
    with pytest.raises(ValueError):
        OnlinePolicy.model_validate({"lockHeavy": "Sometimes"})


def test_plan_spec_names_its_lock_heavy_statements() -> None:
    spec = plan_spec(
        statements=[
            {"sql": "CREATE TABLE t (a int)"},
            {"sql": "CREATE INDEX i ON t (a)", "hazards": [LOCK_HEAVY]},
        ]
    )
    assert spec.lock_heavy() == ["[2]"]


def test_concurrent_index_forms() -> None:
    d = 'CREATE UNIQUE INDEX "Big Idx" ON app."My T" USING btree (a) WHERE (a > 0)'
    assert pgonline.concurrent_create(d) == (
        'CREATE UNIQUE INDEX CONCURRENTLY "Big Idx" ON app."My T" USING btree (a) WHERE (a > 0)'
    )
    assert pgonline.concurrent_create(d, "tmp").startswith(
        'CREATE UNIQUE INDEX CONCURRENTLY tmp ON app."My T" '
    )
    assert pgonline.built_index(pgonline.concurrent_create(d)) == 'app."Big Idx"'
    assert pgonline.built_index("CREATE INDEX i ON t (a)") is None
    stmt = pgonline.build_index(d, unique=True)
    assert stmt.transaction == NONE and "data-dependent" in stmt.hazards
    assert "allows reads and writes: builds index" in stmt.hazards


def test_temporary_names_fit_and_are_stable() -> None:
    long = "x" * 63
    name = pgonline.temporary_name(long, "_ptah_swap")
    assert len(name.encode()) <= 63 and name.endswith("_ptah_swap")
    assert name == pgonline.temporary_name(long, "_ptah_swap")
    assert pgonline.temporary_name('"Mixed"', "_ptah_swap") == '"Mixed_ptah_swap"'
    assert pgonline.split_index('app."Big Idx"') == ("app", '"Big Idx"')


@pytest.mark.parametrize(
    ("sql", "lock", "hazard"),
    [
        ("ALTER TABLE app.t ADD COLUMN c int", "ACCESS EXCLUSIVE", "locks reads and writes: brief"),
        (
            "ALTER TABLE app.t ALTER COLUMN c TYPE bigint USING c::bigint",
            "ACCESS EXCLUSIVE",
            "locks reads and writes: rewrites table",
        ),
        ("ALTER TABLE app.t SET LOGGED", "ACCESS EXCLUSIVE", "rewrites table"),
        ("CREATE TRIGGER tr AFTER INSERT ON app.t FOR EACH ROW", "SHARE ROW EXCLUSIVE", ""),
        ("DROP INDEX app.i", "ACCESS EXCLUSIVE", "locks reads and writes: brief"),
        ("DROP TABLE app.t", "ACCESS EXCLUSIVE", ""),
        ("CREATE POLICY p ON app.t FOR ALL TO PUBLIC", "ACCESS EXCLUSIVE", ""),
        ("ALTER TABLE app.t VALIDATE CONSTRAINT k", "SHARE UPDATE EXCLUSIVE", "scans table"),
    ],
)
def test_statements_on_existing_tables_name_their_lock(sql: str, lock: str, hazard: str) -> None:
    got = pgonline.describe(Statement(sql), {"app.t"}, {"app.i": "app.t"})
    assert got.lock == lock
    assert any(hazard in h for h in got.hazards), got.hazards


def test_statements_on_new_tables_take_no_lock_on_others() -> None:
    for sql in ("ALTER TABLE app.n ADD COLUMN c int", "COMMENT ON TABLE app.t IS 'x'"):
        got = pgonline.describe(Statement(sql), {"app.t"}, {})
        assert got.lock == "" and got.hazards == ()
    assert SHARED == "shared"


def test_approve_and_plan_show_the_lock_and_where_a_statement_runs() -> None:
    from ptah.cli.approve import render_plan
    from ptah.cli.local import render
    from ptah.engines.model import Plan
    from ptah.kube.kinds import SCHEMA

    build = Statement(
        "CREATE INDEX CONCURRENTLY i ON public.t USING btree (a)",
        ("allows reads and writes: builds index",),
        transaction=NONE,
        lock="SHARE UPDATE EXCLUSIVE",
    )
    check = Statement(
        "ALTER TABLE public.t VALIDATE CONSTRAINT c",
        ("data-dependent", "allows reads and writes: scans table"),
        transaction=NEW,
    )
    shown = render(Plan([build, check], "sha256:a", "sha256:b"))
    assert "-- [1] allows reads and writes: builds index, outside a transaction" in shown
    assert "-- [2] ! data-dependent, allows reads and writes: scans table, in a new" in shown
    spec = plan_spec(statements=[build.to_json(), check.to_json()])
    approved = render_plan(SCHEMA, "s", "d" * 12, spec, color=False)
    assert "-- [1] allows reads and writes: builds index, outside a transaction" in approved
    assert "scans table, in a new transaction" in approved


def test_runner_takes_the_online_and_lock_options() -> None:
    from ptah.runner.main import build_parser

    args = build_parser().parse_args(
        ["plan", "--desired", "d.sql", "--offline=indexes", "--offline", "not-null"]
    )
    assert args.offline == ["indexes", "not-null"]
    args = build_parser().parse_args(
        ["apply", "--plan", "p.json", "--lock-timeout-seconds", "2", "--lock-retries", "5"]
    )
    assert (args.lock_timeout_seconds, args.lock_retries, args.refuse_lock_heavy) == (2, 5, False)
    assert (
        build_parser().parse_args(["apply", "--plan", "p", "--refuse-lock-heavy"]).refuse_lock_heavy
    )
