"""The PostgreSQL corpus: each schema from empty, re-planned empty, and dumped like psql's load."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pgcorpus import apply_plan, assert_same_dump, database, ensure_roles, psql_load

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
