"""The PostgreSQL corpus: each schema from empty, re-planned empty, and dumped like psql's load."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pgcorpus import apply_plan, assert_same_dump, database, ensure_roles, psql_load, raw_dump

CORPUS = sorted((Path(__file__).parent / "schemas" / "pg").glob("*.sql"))

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus_schema_round_trips(pg_url: str, path: Path) -> None:
    sql = path.read_text()
    ensure_roles(pg_url)
    with database(pg_url) as ptah_db, database(pg_url) as psql_db:
        plan = apply_plan(ptah_db, sql)
        assert plan.statements
        # psql has no ownership policy: the roles a dump names become the loading role.
        psql_load(psql_db, re.sub(r"OWNER TO [\w\"]+;", "OWNER TO CURRENT_USER;", sql))
        assert_same_dump(ptah_db, psql_db)


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_pg_dump_output_is_a_desired_file(pg_url: str, path: Path) -> None:
    """What pg_dump -s writes today (\\restrict, SETs, OWNER TO) plans, applies, round-trips."""
    sql = re.sub(r"OWNER TO [\w\"]+;", "OWNER TO CURRENT_USER;", path.read_text())
    ensure_roles(pg_url)
    with database(pg_url) as psql_db, database(pg_url) as ptah_db:
        psql_load(psql_db, sql)
        dumped = raw_dump(psql_db)
        apply_plan(ptah_db, dumped)
        assert_same_dump(ptah_db, psql_db)
