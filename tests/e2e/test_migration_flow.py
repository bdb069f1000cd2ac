"""PtahMigration from creation to an applied directory, on the real control plane with
the operator as its own process, against real SQLite, PostgreSQL and MariaDB targets.

Each engine: a directory (a ConfigMap carrying ``ptah.sum``) is applied and the
resource is Ready with the versions in status; a file added to the ConfigMap (no spec
change, no new generation) is read and applied; an applied file edited in place is a
Stalled ``ChecksumMismatch`` and nothing runs. Then the directory's other sources:
several ConfigMaps merged (together larger than the 1 MiB object limit), and a volume.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import migflow
import pytest
from e2esupport import (
    Operator,
    events,
    secret,
    wait_passes,
)
from migflow import (
    condition,
    configmap,
    history,
    migrate_jobs,
    migration,
    ready_at,
    replace_configmap,
    split_with_sum,
    uid_of,
    wait_mstatus,
    with_sum,
    write_tree,
)

from ptah.kube.kinds import MIGRATION
from ptah.kube.real import RealCluster

pytestmark = pytest.mark.integration

# Fixtures shared by the migration e2e modules.
mysql_database = migflow.mysql_database
target = migflow.target

FILES = {
    "0001_users.sql": "CREATE TABLE users (id INTEGER PRIMARY KEY, name VARCHAR(100) NOT NULL);\n",
    "0002_teams.sql": (
        "CREATE TABLE teams (id INTEGER PRIMARY KEY, title VARCHAR(100));\n"
        "INSERT INTO teams (id, title) VALUES (1, 'core');\n"
    ),
}
THIRD = {"0003_email.sql": "ALTER TABLE users ADD COLUMN email VARCHAR(200);\n"}
EDITED = "CREATE TABLE users (id INTEGER PRIMARY KEY, name VARCHAR(120) NOT NULL);\n"


def test_directory_applied_extended_and_an_edit_refused(
    kube: RealCluster, namespace: str, operator: Operator, target: tuple[str, str]
) -> None:
    engine, url = target
    secret(kube, namespace, "db", url)
    configmap(kube, namespace, "mig", with_sum(FILES))
    operator.start()
    migration(kube, namespace, "app", "db", engine, configmaps=["mig"])

    s = wait_mstatus(
        kube, namespace, "app", "Ready at 2", ready_at(["1", "2"]), log=operator.log_path
    )
    assert s["lastMutation"]["outcome"] == "Succeeded"
    assert s["pendingVersions"] == []
    assert condition(s, "Ready")["status"] == "True"
    rows = history(url)
    assert sorted(rows) == ["1", "2"] and all(r["finished_at"] for r in rows.values())
    uid = uid_of(kube, namespace, "app")
    assert len(migrate_jobs(kube, namespace, uid)) == 1

    # A file added to the ConfigMap: no generation change, the source moved.
    replace_configmap(kube, namespace, "mig", with_sum({**FILES, **THIRD}))
    s = wait_mstatus(
        kube, namespace, "app", "Ready at 3", ready_at(["1", "2", "3"]), log=operator.log_path
    )
    assert sorted(history(url)) == ["1", "2", "3"]
    assert len(migrate_jobs(kube, namespace, uid)) == 2
    obj = kube.get(MIGRATION, namespace, "app")
    assert obj is not None and obj["metadata"]["generation"] == 1

    # An applied file edited in place (and re-hashed, as `ptah migrate hash` would):
    # Stalled with the mismatch, and nothing runs.
    before = history(url)
    replace_configmap(
        kube, namespace, "mig", with_sum({**FILES, **THIRD, "0001_users.sql": EDITED})
    )
    s = wait_mstatus(
        kube,
        namespace,
        "app",
        "Stalled on the edited file",
        lambda s: condition(s, "Stalled").get("status") == "True",
        log=operator.log_path,
    )
    stalled = condition(s, "Stalled")
    assert stalled["reason"] == "ChecksumMismatch", stalled
    assert "applied migration 1 was edited" in stalled["message"]
    assert "nothing was run" in stalled["message"]
    assert [m["version"] for m in s["history"]["mismatched"]] == ["1"]
    assert condition(s, "Ready")["status"] == "False"
    wait_passes(kube, operator, MIGRATION, namespace, "app")
    assert len(migrate_jobs(kube, namespace, uid)) == 2
    assert history(url) == before
    reasons = [e["reason"] for e in events(kube, namespace, "app")]
    assert "MigrateSucceeded" in reasons, reasons


def _big_file(n: int, size: int) -> str:
    """A migration of about ``size`` bytes: a long comment, then one statement."""
    line = "-- " + "x" * 96 + "\n"
    return line * (size // len(line)) + f"CREATE TABLE big_{n} (id INTEGER PRIMARY KEY);\n"


def test_several_configmaps_larger_than_one_object(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    """Three ConfigMaps, each under the 1 MiB object limit, together about 2 MiB: each is
    mounted at /ptah/migrations/<i>, passed as a repeated --dir, and merged by the runner,
    which checks the one ptah.sum (in the first ConfigMap) against the merged directory."""
    db = tmp_path / "app.db"
    files = {f"{n:04d}_big_{n}.sql": _big_file(n, 340_000) for n in range(1, 7)}
    parts = split_with_sum(files, 3)
    for i, part in enumerate(parts):
        assert sum(len(v) for v in part.values()) < 900_000
        configmap(kube, namespace, f"mig-{i}", part)
    secret(kube, namespace, "db", f"sqlite:///{db}")
    operator.start()
    migration(kube, namespace, "big", "db", "sqlite", configmaps=[f"mig-{i}" for i in range(3)])
    versions = [str(n) for n in range(1, 7)]
    s = wait_mstatus(kube, namespace, "big", "Ready", ready_at(versions), log=operator.log_path)
    assert s["history"]["directoryHash"]
    assert sorted(history(f"sqlite:///{db}")) == versions


def test_volume_directory_and_target_version(
    kube: RealCluster, namespace: str, operator: Operator, tmp_path: Path
) -> None:
    """A directory from a Pod volume (hostPath on the local node), applied up to
    spec.targetVersion; raising the target applies the rest."""
    db = tmp_path / "app.db"
    tree = write_tree(tmp_path / "migrations", {**FILES, **THIRD})
    secret(kube, namespace, "db", f"sqlite:///{db}")
    operator.start()
    volume: dict[str, Any] = {"hostPath": {"path": str(tree), "type": "Directory"}}
    migration(kube, namespace, "vol", "db", "sqlite", volume=volume, targetVersion="2")
    s = wait_mstatus(
        kube, namespace, "vol", "Ready at 2", ready_at(["1", "2"]), log=operator.log_path
    )
    assert s["history"]["pending"] == ["3"] and s["pendingVersions"] == []
    kube.patch(MIGRATION, namespace, "vol", {"spec": {"targetVersion": None}})
    wait_mstatus(
        kube, namespace, "vol", "Ready at 3", ready_at(["1", "2", "3"]), log=operator.log_path
    )
    assert sorted(history(f"sqlite:///{db}")) == ["1", "2", "3"]
