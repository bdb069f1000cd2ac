"""A Flyway-style directory (versioned, repeatable and undo files) through the operator:
the repeatables run after the versions and show apart from them in status; an edited
repeatable runs once more (one more Migrate Job) and the resource is Ready again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import migflow
import pytest
from e2esupport import Operator, secret
from migflow import (
    configmap,
    history,
    migrate_jobs,
    migration,
    ready_at,
    replace_configmap,
    uid_of,
    wait_mstatus,
    with_sum,
)

from ptah.engines.versioned.directory import read_directory
from ptah.kube.real import RealCluster

pytestmark = pytest.mark.integration

mysql_database = migflow.mysql_database

VIEW = "DROP VIEW IF EXISTS user_names;\nCREATE VIEW user_names AS SELECT name FROM users;\n"
FILES = {
    "V1__users.sql": "CREATE TABLE users (id INTEGER PRIMARY KEY, name VARCHAR(100));\n",
    "V2__seed.sql": "INSERT INTO users (id, name) VALUES (1, 'ann');\n",
    "R__user_names.sql": VIEW,
    "U2__unseed.sql": "DELETE FROM users;\n",
}


def _checksum(files: dict[str, str], name: str, tmp: Path) -> str:
    tmp.mkdir(parents=True, exist_ok=True)
    for n, text in files.items():
        (tmp / n).write_text(text)
    return next(f.checksum for f in read_directory([tmp]).repeatables if f.name == name)


def _repeatable_rows(url: str) -> list[tuple[str, str]]:
    rows = migflow.query(
        url,
        "SELECT script, checksum FROM ptah_schema_history"
        " WHERE kind = 'repeatable' ORDER BY installed_rank",
    )
    return [(str(a), str(b)) for a, b in rows]


def _repeatable_applied(checksum: str) -> Callable[[dict[str, Any]], bool]:
    def pred(s: dict[str, Any]) -> bool:
        h = s.get("history") or {}
        states = {r["name"]: r for r in h.get("repeatables") or []}
        r = states.get("R__user_names.sql") or {}
        return (
            ready_at(["1", "2"])(s)
            and r.get("state") == "applied"
            and r.get("appliedChecksum") == checksum
            and not s.get("pendingRepeatables")
        )

    return pred


def test_repeatable_runs_after_versions_and_again_once_edited(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    secret(kube, namespace, "db", url)
    configmap(kube, namespace, "mig", with_sum(FILES))
    operator.start()
    migration(kube, namespace, "app", "db", "sqlite", configmaps=["mig"])
    first = _checksum(FILES, "R__user_names.sql", tmp_path / "a")
    s = wait_mstatus(
        kube,
        namespace,
        "app",
        "Ready with the repeatable",
        _repeatable_applied(first),
        log=operator.log_path,
    )
    assert s["history"]["undoIgnored"] == ["U2__unseed.sql"]
    uid = uid_of(kube, namespace, "app")
    assert len(migrate_jobs(kube, namespace, uid)) == 1
    assert sorted(history(url)) == ["1", "2"]
    assert _repeatable_rows(url) == [("R__user_names.sql", first)]

    edited = {
        **FILES,
        "R__user_names.sql": VIEW.replace("SELECT name", "SELECT UPPER(name) AS name"),
    }
    replace_configmap(kube, namespace, "mig", with_sum(edited))
    second = _checksum(edited, "R__user_names.sql", tmp_path / "b")
    wait_mstatus(
        kube,
        namespace,
        "app",
        "Ready with the edited repeatable",
        _repeatable_applied(second),
        log=operator.log_path,
    )
    assert len(migrate_jobs(kube, namespace, uid)) == 2
    assert _repeatable_rows(url) == [("R__user_names.sql", first), ("R__user_names.sql", second)]
    assert migflow.query(url, "SELECT name FROM user_names") == [("ANN",)]
