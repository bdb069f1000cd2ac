"""A busy table and a writer that counts its own stalls, for the online-plan tests and
``bench/online.py``.

The writer runs a loop of one-row inserts and updates on its own connection
(autocommit, as an application would) and records how long each took; a change that
blocks the table's writers shows as one long operation (the one that waited).
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ptah.engines import planner
from ptah.engines.connect import open_target
from ptah.engines.model import Online, SchemaPolicy
from ptah.engines.planner import ApplyResult
from ptah.engines.urls import DbUrl

ROWS = 1_000_000
PARENTS = 1000
_BASES = itertools.count(10_000_000 + random.randrange(10**6) * 10**6, 10**6)

PG_BASE = """
CREATE TABLE parent (id int PRIMARY KEY);
CREATE TABLE big (id bigint PRIMARY KEY, a int, b text, ref int);
CREATE INDEX big_a ON big (a);
"""

# name -> the desired schema: the base with one change on the big table.
PG_CHANGES = {
    "create index": PG_BASE + "CREATE INDEX big_b ON big (b, a);",
    "changed index": PG_BASE.replace("ON big (a);", "ON big (a, b);"),
    "foreign key": PG_BASE.replace("ref int)", "ref int REFERENCES parent (id))"),
    "check": PG_BASE.replace("ref int)", "ref int, CHECK (md5(b) <> 'x'))"),
    "set not null": PG_BASE.replace("a int,", "a int NOT NULL,"),
}

MY_BASE = """
CREATE TABLE big (id bigint PRIMARY KEY, a int, b varchar(40), ref int, KEY big_a (a));
"""
MY_CHANGES = {
    "create index": MY_BASE.replace("KEY big_a (a))", "KEY big_a (a), KEY big_b (b, a))"),
    "add column": MY_BASE.replace("ref int,", "ref int, c int,"),
    "change column type": MY_BASE.replace("a int,", "a bigint,"),
}


def fill_postgres(url: str) -> None:
    """The base schema with ``ROWS`` rows (built once per module: it takes seconds)."""
    with open_target(url) as t:
        conn = t.connection
        conn.execute(PG_BASE)
        conn.execute(f"INSERT INTO parent SELECT generate_series(1, {PARENTS})")
        conn.execute(
            "INSERT INTO big SELECT g, g %% 1000, md5(g::text), 1 + g %% %s"
            " FROM generate_series(1, %s) g",
            (PARENTS, ROWS),
        )
        conn.execute("VACUUM ANALYZE big")


def fill_mysql(url: str) -> None:
    with open_target(url) as t, t.connection.cursor() as cur:
        cur.execute(MY_BASE)
        cur.execute(
            f"INSERT INTO big SELECT seq, seq % 1000, md5(seq), 1 + seq % 1000 FROM seq_1_to_{ROWS}"
        )


@dataclass
class Writer:
    """Inserts and updates in a loop on its own connection, timing each."""

    url: str
    engine: str
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _ops(self, conn: Any) -> Callable[[int], None]:
        rng = random.Random(7)
        base = next(_BASES)  # each writer's inserts have ids of their own
        if self.engine == "postgres":

            def pg(i: int) -> None:
                conn.execute(
                    "INSERT INTO big (id, a, b, ref) VALUES (%s, %s, md5(%s::text), %s)",
                    (base + i, i % 1000, i, 1 + i % PARENTS),
                )
                conn.execute("UPDATE big SET a = a + 1 WHERE id = %s", (rng.randrange(1, ROWS),))

            return pg

        def my(i: int) -> None:
            with conn.cursor() as cur:
                cur.execute(
                    "INSERT INTO big (id, a, b, ref) VALUES (%s, %s, md5(%s), %s)",
                    (base + i, i % 1000, i, 1 + i % PARENTS),
                )
                cur.execute("UPDATE big SET a = a + 1 WHERE id = %s", (rng.randrange(1, ROWS),))

        return my

    def _run(self, ready: threading.Event) -> None:
        with open_target(self.url) as t:
            op = self._ops(t.connection)
            i = 0
            while not self._stop.is_set():
                t0 = time.perf_counter()
                try:
                    op(i)
                except Exception as exc:  # a failed write is a finding, not a crash
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    break
                self.latencies.append(time.perf_counter() - t0)
                i += 1
                if i == 20:
                    ready.set()
                time.sleep(0.002)
        ready.set()

    def start(self) -> None:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait(30)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)

    @property
    def longest(self) -> float:
        return max(self.latencies, default=0.0)

    @property
    def p99(self) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]

    def stalls(self, threshold: float = 0.1) -> int:
        """Operations that waited longer than ``threshold`` seconds."""
        return sum(1 for x in self.latencies if x > threshold)


@contextmanager
def writing(url: str, engine: str) -> Iterator[Writer]:
    writer = Writer(url, engine)
    writer.start()
    try:
        yield writer
    finally:
        writer.stop()


@dataclass
class Run:
    """One change applied under the writer."""

    result: ApplyResult
    writer: Writer
    seconds: float
    statements: list[Any]


def change(url: str, desired: str, online: Online, dev_url: DbUrl | None = None) -> Run:
    """Plan ``desired`` with ``online`` and apply it while the writer writes."""
    with open_target(url) as t:
        plan = planner.plan(t, desired, dev_url=dev_url, policy=SchemaPolicy(online=online))
        assert plan.statements, "the change plans nothing"
        with writing(url, t.engine) as writer:
            t0 = time.perf_counter()
            result = planner.apply(
                t,
                plan.statements,
                plan.fingerprint_before,
                allow_destructive=True,
                expected_after=plan.fingerprint_after,
            )
            seconds = time.perf_counter() - t0
        assert not writer.errors, writer.errors
        return Run(result, writer, seconds, plan.statements)


def converge(url: str, desired: str) -> None:
    """Take the target back to ``desired`` (between runs), online."""
    with open_target(url) as t:
        plan = planner.plan(t, desired)
        if plan.statements:
            result = planner.apply(
                t, plan.statements, plan.fingerprint_before, True, plan.fingerprint_after
            )
            assert result.outcome == "succeeded", result.message
