"""Two runners started at once on one database apply each file exactly once, whichever
of them the realm fence turns away."""

from __future__ import annotations

from pathlib import Path

import pytest
from migsupport import expected_exit, history_rows, query, start, write_dir

from ptah.runner.frame import parse_result_for

pytestmark = pytest.mark.integration


def _files(sleep: str) -> dict[str, str]:
    files = {"1_log.sql": "CREATE TABLE applied_log (file INTEGER NOT NULL);"}
    for n in range(2, 6):
        body = f"INSERT INTO applied_log (file) VALUES ({n});\n"
        if n == 3:
            body += sleep + ";\n"
        files[f"{n}_file{n}.sql"] = body
    return files


SLEEP = {
    "postgres": "SELECT pg_sleep(1)",
    "mysql": "DO SLEEP(1)",
    "sqlite": "SELECT COUNT(*) FROM applied_log",
}


@pytest.mark.parametrize("attempt", range(2))
def test_two_runners_apply_each_file_once(db_url: str, tmp_path: Path, attempt: int) -> None:
    engine = db_url.split("://")[0].replace("postgresql", "postgres")
    d = write_dir(tmp_path / "m", _files(SLEEP[engine]))
    procs = [start(db_url, "migrate", [d]) for _ in range(2)]
    frames = []
    for proc, opid in procs:
        out, err = proc.communicate(timeout=120)
        verdict = parse_result_for(out, opid)
        assert verdict.frame is not None, (verdict, out, err)
        assert proc.returncode == expected_exit(verdict.frame), err
        frames.append(verdict.frame)
    # Overlapping runs: the second is fenced (tests/migrations/test_fence.py proves it
    # deterministically); runs that happen not to overlap both succeed. Either way each
    # file is applied exactly once.
    outcomes = sorted(f.outcome for f in frames)
    assert outcomes in (["fenced", "succeeded"], ["succeeded", "succeeded"]), frames
    applied = [v for f in frames for v in f.data["applied"]]
    assert sorted(applied, key=int) == ["1", "2", "3", "4", "5"]
    rows = query(db_url, "SELECT file, COUNT(*) FROM applied_log GROUP BY file ORDER BY file")
    assert rows == [(n, 1) for n in range(2, 6)]
    assert sorted(history_rows(db_url), key=int) == ["1", "2", "3", "4", "5"]
