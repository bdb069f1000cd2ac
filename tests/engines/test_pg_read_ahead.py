"""A scratch's inspection read by two sessions at once (:class:`inspect.ReadAhead`: a
helper session reads some of its queries while the inspecting session reads the others)
reads what the inspecting session alone reads: the same schema for every schema of the
corpus, the same text where the inspecting session's own settings print defaults,
literals and names otherwise, and whatever the helper cannot read is read by the
inspecting session."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pgcorpus import database, ensure_roles, psql_load

from ptah.engines.model import Schema
from ptah.engines.postgres import inspect
from ptah.engines.postgres.target import connect
from ptah.engines.urls import parse_url

CORPUS = sorted((Path(__file__).parent / "schemas" / "pg").glob("*.sql"))

pytestmark = pytest.mark.integration


def _read(conn: Any, helper: Any = None) -> Schema:
    with conn.transaction(force_rollback=True):
        schema = inspect.inspect(conn, helper)
    schema["_meta"].pop("censusSeconds")
    return schema


def _sessions(url: str) -> Iterator[tuple[Any, Any]]:
    main = connect(parse_url(url), autocommit=True)
    helper = connect(parse_url(url), autocommit=True)
    try:
        yield main, helper
    finally:
        main.close()
        helper.close()


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_read_ahead_reads_what_one_session_reads(pg_url: str, path: Path) -> None:
    ensure_roles(pg_url)
    with database(pg_url) as db:
        psql_load(db, re.sub(r"OWNER TO [\w\"]+;", "OWNER TO CURRENT_USER;", path.read_text()))
        for main, helper in _sessions(db):
            alone = _read(main)
            assert _read(main, helper) == alone
            # Each query the helper read is its own (not the same rows handed twice).
            assert alone["table"] or alone["function"] or alone["view"]


PRINTED = """
CREATE TABLE public."Kept" (
  id bigint PRIMARY KEY,
  day date DEFAULT '2024-03-01',
  at timestamptz DEFAULT '2024-03-01 12:00:00+00',
  span interval DEFAULT '1 day 02:00:00',
  ratio double precision DEFAULT 0.1,
  raw bytea DEFAULT '\\x00ff',
  CHECK (day > '2000-01-31' AND ratio < 0.3)
);
CREATE INDEX kept_recent ON public."Kept" (at) WHERE at > '2024-01-01 00:00:00+00';
"""

# What the desired file may set in its session, and the inspection reads under.
SESSION = (
    "SET DateStyle = 'SQL, DMY'",
    "SET IntervalStyle = 'sql_standard'",
    "SET TimeZone = 'Asia/Tokyo'",
    "SET extra_float_digits = 0",
    "SET bytea_output = 'escape'",
    "SET quote_all_identifiers = on",
)


def test_the_helper_prints_as_the_inspecting_session_does(pg_db: str) -> None:
    psql_load(pg_db, PRINTED)
    for main, helper in _sessions(pg_db):
        plain = _read(main)
        for statement in SESSION:
            main.execute(statement)
        alone = _read(main)
        assert alone != plain  # the settings print the same schema otherwise
        assert _read(main, helper) == alone


def test_what_the_helper_cannot_read_the_inspecting_session_reads(pg_db: str) -> None:
    psql_load(pg_db, PRINTED)
    for main, helper in _sessions(pg_db):
        # A setting the helper cannot take (its session used a temporary table already):
        # it reads nothing, the inspecting session everything.
        helper.execute("CREATE TEMP TABLE scratchpad (x int)")
        main.execute("SET temp_buffers = '16MB'")
        alone = _read(main)
        assert _read(main, helper) == alone
        # A helper gone (its session closed): likewise.
        helper.close()
        assert _read(main, helper) == alone
