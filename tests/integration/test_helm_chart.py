"""The Helm chart: it lints, renders, grants exactly docs/rbac.md, and what it renders
is accepted by the real local control plane, where its ServiceAccount can do exactly
what the operator needs.

The operator it describes, installed with ``helm install`` and rolled out by the
Deployment controller on the real node, is ``tests/e2e/test_chart_realnode.py``; here
the Deployment is rendered with no replicas, so nothing starts.

helm comes from ``bash hack/tools.sh`` (built from the Go module proxy); a missing helm
fails under CI naming that command, and skips elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ptah.api.common import RunnerSpec

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "ptah"
INSTALL = "bash hack/tools.sh"
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
FORBIDDEN_VERBS = {"*", "delete", "deletecollection", "escalate", "bind", "impersonate"}
ROLLOUT_CHILDREN = {"ptahschemas", "ptahmigrations"}


# ----------------------------------------------------------------------- helm


def _helm_path() -> Path | None:
    cache = Path(os.environ.get("PTAH_CACHE") or Path.home() / ".cache" / "ptah")
    cached = cache / "tools" / "bin" / "helm"
    if cached.exists():
        return cached
    found = shutil.which("helm")
    return Path(found) if found else None


@pytest.fixture(scope="module")
def helm() -> Path:
    path = _helm_path()
    if path is None:
        message = f"helm is not installed: run `{INSTALL}` (builds helm v3.22.0 from Go modules)"
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return path


def render(
    helm: Path, *sets: str, namespace: str = "ptah-system", release: str = "ptah"
) -> list[Any]:
    argv = [str(helm), "template", release, str(CHART), "--namespace", namespace]
    for s in sets:
        argv += ["--set", s]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def render_fails(helm: Path, *sets: str) -> str:
    argv = [str(helm), "template", "ptah", str(CHART)]
    for s in sets:
        argv += ["--set", s]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode != 0, "expected the chart to refuse these values"
    return proc.stderr


def of(docs: list[Any], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d.get("kind") == kind]


def operator_rules(docs: list[Any]) -> list[dict[str, Any]]:
    roles = [
        d
        for d in of(docs, "ClusterRole") + of(docs, "Role")
        if d["metadata"]["name"] in ("ptah", "ptah-leases")
    ]
    return [r for role in roles for r in role["rules"]]


# -------------------------------------------------------------- static checks


def test_lint(helm: Path) -> None:
    proc = subprocess.run(
        [str(helm), "lint", "--strict", str(CHART)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_chart_crds_are_the_generated_ones_and_upgrade_with_the_chart(helm: Path) -> None:
    generated = sorted((ROOT / "deploy" / "crds").glob("*.yaml"))
    copies = sorted((CHART / "files" / "crds").glob("*.yaml"))
    assert [p.name for p in copies] == [p.name for p in generated]
    for src, copy in zip(generated, copies, strict=True):
        assert copy.read_text() == src.read_text(), (
            f"{copy} differs from {src}: cp deploy/crds/*.yaml deploy/helm/ptah/files/crds/"
        )
    assert not (CHART / "crds").exists(), "crds/ is never upgraded by helm; use templates"
    rendered = {d["metadata"]["name"]: d for d in of(render(helm), "CustomResourceDefinition")}
    for src in generated:
        want = yaml.safe_load(src.read_text())
        got = rendered[want["metadata"]["name"]]
        assert got["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        got_meta = {k: v for k, v in got["metadata"].items() if k not in ("annotations", "labels")}
        assert got_meta == want["metadata"] and got["spec"] == want["spec"]
    assert not of(render(helm, "crds.install=false"), "CustomResourceDefinition")


def test_deployment_defaults(helm: Path) -> None:
    docs = render(helm)
    (dep,) = of(docs, "Deployment")
    assert dep["spec"]["replicas"] == 2
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["command"] == ["ptah", "operator", "run"]
    assert "--leader-elect" in c["args"] and "--lock-namespace=ptah-system" in c["args"]
    assert not any(a.startswith("--namespace-scope") for a in c["args"])
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["serviceAccountName"] == "ptah"
    (svc,) = of(docs, "Service")
    assert svc["spec"]["ports"][0]["name"] == "metrics"
    assert not of(docs, "ServiceMonitor")
    assert of(docs, "PodDisruptionBudget")
    (cm,) = of(docs, "ConfigMap")
    runner = json.loads(cm["data"]["runner-defaults.json"])
    assert runner["image"] == "ptah/ptah:0.1.0"
    assert "serviceAccountName" not in runner  # no runner account exists cluster-wide


def test_single_replica_without_election(helm: Path) -> None:
    docs = render(helm, "replicaCount=1", "leaderElection.enabled=false")
    (dep,) = of(docs, "Deployment")
    assert "--no-leader-elect" in dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not of(docs, "PodDisruptionBudget")
    assert "leaderElection.enabled" in render_fails(helm, "leaderElection.enabled=false")


def test_the_supervise_interval_is_the_operator_s_own_unless_set(helm: Path) -> None:
    """Unset, the operator derives it from the database Lease (30 s, or a quarter of a
    shorter Lease); set, it reaches the operator, which refuses more than that quarter."""
    (dep,) = of(render(helm), "Deployment")
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not any(a.startswith("--supervise-seconds") for a in args)
    (dep,) = of(render(helm, "operator.superviseSeconds=20"), "Deployment")
    assert "--supervise-seconds=20" in dep["spec"]["template"]["spec"]["containers"][0]["args"]


def test_the_operation_slots_reach_the_operator(helm: Path) -> None:
    (dep,) = of(render(helm), "Deployment")
    assert "--max-operations=16" in dep["spec"]["template"]["spec"]["containers"][0]["args"]
    (dep,) = of(render(helm, "operator.maxOperations=0"), "Deployment")
    assert "--max-operations=0" in dep["spec"]["template"]["spec"]["containers"][0]["args"]


def test_label_scoping_reaches_the_operator(helm: Path) -> None:
    docs = render(helm, "watch.labelSelector=team=a")
    (dep,) = of(docs, "Deployment")
    assert "--label-selector=team=a" in dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "equality only" in render_fails(helm, "watch.labelSelector=team!=a")


def test_service_monitor_is_optional(helm: Path) -> None:
    docs = render(
        helm, "metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=prom"
    )
    (sm,) = of(docs, "ServiceMonitor")
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    assert sm["metadata"]["labels"]["release"] == "prom"


def _doc_table() -> set[tuple[str, str, frozenset[str], str]]:
    """(group, resource, verbs, scope) rows of docs/rbac.md's operator table."""
    text = (ROOT / "docs" / "rbac.md").read_text()
    section = text.split("## The operator", 1)[1].split("###", 1)[0]
    rows = set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or cells[0] in ("API group", "---"):
            continue
        group = "" if cells[0] == "(core)" else cells[0]
        verbs = frozenset(v.strip() for v in cells[2].split(","))
        rows.add((group, cells[1], verbs, cells[3]))
    return rows


def _chart_table(docs: list[Any]) -> set[tuple[str, str, frozenset[str], str]]:
    rows = set()
    for role in of(docs, "ClusterRole") + of(docs, "Role"):
        name = role["metadata"]["name"]
        if name not in ("ptah", "ptah-leases"):
            continue
        scope = "lock" if name.endswith("-leases") else "watched"
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for res in rule["resources"]:
                    rows.add((group, res, frozenset(rule["verbs"]), scope))
    return rows


def test_rbac_is_exactly_the_documented_table(helm: Path) -> None:
    assert _chart_table(render(helm)) == _doc_table()


@pytest.mark.parametrize("sets", [(), ("watch.namespaces={team-a,team-b}",)])
def test_rbac_least_privilege(helm: Path, sets: tuple[str, ...]) -> None:
    docs = render(helm, *sets)
    roles = of(docs, "ClusterRole") + of(docs, "Role")
    assert roles
    for role in roles:
        for rule in role["rules"]:
            where = f"{role['kind']} {role['metadata']['name']}: {rule}"
            assert "*" not in rule["apiGroups"] and "*" not in rule["resources"], where
            forbidden = set(FORBIDDEN_VERBS)
            if set(rule["resources"]) <= ROLLOUT_CHILDREN:
                forbidden.discard("delete")  # a rollout's child of a removed target
            assert not forbidden & set(rule["verbs"]), where
            assert "resourceNames" not in rule or rule["resourceNames"], where
            if "secrets" in rule["resources"]:
                assert set(rule["verbs"]) <= {"get", "list", "watch"}, where
                assert not WRITE_VERBS & set(rule["verbs"]), where
            if "pods" in rule["resources"]:
                assert not WRITE_VERBS & set(rule["verbs"]), "Pods are made by the Job controller"
    for binding in of(docs, "ClusterRoleBinding") + of(docs, "RoleBinding"):
        assert binding["roleRef"]["name"] not in ("cluster-admin", "admin", "edit")


def test_namespace_scoping(helm: Path) -> None:
    docs = render(helm, "watch.namespaces={team-a,team-b}")
    (dep,) = of(docs, "Deployment")
    assert (
        "--namespace-scope=team-a,team-b"
        in dep["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    operator_roles = [r for r in of(docs, "Role") if r["metadata"]["name"] == "ptah"]
    assert sorted(r["metadata"]["namespace"] for r in operator_roles) == ["team-a", "team-b"]
    assert [r["metadata"]["name"] for r in of(docs, "ClusterRole")] == [
        "ptah-viewer",
        "ptah-approver",
    ]
    assert not of(docs, "ClusterRoleBinding")
    (leases,) = [r for r in of(docs, "Role") if r["metadata"]["name"] == "ptah-leases"]
    assert leases["metadata"]["namespace"] == "ptah-system"
    runners = [s for s in of(docs, "ServiceAccount") if s["metadata"]["name"] == "ptah-runner"]
    assert sorted(s["metadata"]["namespace"] for s in runners) == ["team-a", "team-b"]
    assert all(s["automountServiceAccountToken"] is False for s in runners)
    (cm,) = of(docs, "ConfigMap")
    assert json.loads(cm["data"]["runner-defaults.json"])["serviceAccountName"] == "ptah-runner"


def test_plan_cache_is_off_unless_configured(helm: Path) -> None:
    """No cache configured: no claim, no cacheVolume, the runner's security context as
    given (the Pods are what they were before the cache existed)."""
    docs = render(helm, "watch.namespaces={team-a}")
    assert not of(docs, "PersistentVolumeClaim")
    runner = json.loads(of(docs, "ConfigMap")[0]["data"]["runner-defaults.json"])
    assert "cacheVolume" not in runner
    assert "fsGroup" not in runner["podSecurityContext"]


def test_plan_cache_claims_per_watched_namespace(helm: Path) -> None:
    docs = render(
        helm,
        "watch.namespaces={team-a,team-b}",
        "runner.cache.persistentVolumeClaim.create=true",
        "runner.cache.persistentVolumeClaim.storageClassName=fast",
    )
    claims = of(docs, "PersistentVolumeClaim")
    assert sorted(c["metadata"]["namespace"] for c in claims) == ["team-a", "team-b"]
    assert {c["metadata"]["name"] for c in claims} == {"ptah-plan-cache"}
    assert all(c["spec"]["accessModes"] == ["ReadWriteMany"] for c in claims)
    assert all(c["spec"]["storageClassName"] == "fast" for c in claims)
    runner = json.loads(of(docs, "ConfigMap")[0]["data"]["runner-defaults.json"])
    assert runner["cacheVolume"] == {"persistentVolumeClaim": {"claimName": "ptah-plan-cache"}}
    assert runner["podSecurityContext"]["fsGroup"] == 10001  # the non-root runner writes it
    RunnerSpec.model_validate(runner)
    assert "watch.namespaces" in render_fails(
        helm, "runner.cache.persistentVolumeClaim.create=true"
    )


def test_plan_cache_volume_as_given(helm: Path) -> None:
    docs = render(
        helm,
        "runner.cache.volume.persistentVolumeClaim.claimName=shared",
        "runner.podSecurityContext.fsGroup=2000",
    )
    assert not of(docs, "PersistentVolumeClaim")
    runner = json.loads(of(docs, "ConfigMap")[0]["data"]["runner-defaults.json"])
    assert runner["cacheVolume"] == {"persistentVolumeClaim": {"claimName": "shared"}}
    assert runner["podSecurityContext"]["fsGroup"] == 2000
    RunnerSpec.model_validate(runner)


# ------------------------------------------------------------ real cluster


@pytest.fixture
def installed(helm: Path, cluster: Any, namespace: str) -> Iterator[dict[str, Any]]:
    """The chart rendered for ``namespace`` (watching only it), no replicas, applied."""
    docs = render(
        helm,
        f"watch.namespaces={{{namespace}}}",
        "replicaCount=0",
        "rbac.userRoles=false",
        namespace=namespace,
        release="ptah",
    )
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    yield {"docs": docs}


def test_rendered_chart_is_accepted_and_grants_what_the_operator_needs(
    installed: dict[str, Any], cluster: Any, namespace: str
) -> None:
    docs = installed["docs"]
    # Every object the chart describes was accepted by the real API server.
    for doc in docs:
        kind, name = doc["kind"].lower(), doc["metadata"]["name"]
        ns = ["--namespace", doc["metadata"].get("namespace", namespace)]
        cluster.kubectl("get", kind, name, *ns)
    (dep,) = of(docs, "Deployment")
    sa = dep["spec"]["template"]["spec"]["serviceAccountName"]
    who = f"system:serviceaccount:{namespace}:{sa}"

    def can(verb: str, resource: str, ns: str = namespace) -> bool:
        proc = cluster.kubectl(
            "auth", "can-i", verb, resource, f"--as={who}", "-n", ns, check=False
        )
        return proc.stdout.strip() == "yes"

    assert can("patch", "ptahschemas.ptah.io/status") and can("create", "jobs.batch")
    assert can("get", "pods/log") and can("create", "leases.coordination.k8s.io")
    assert not can("delete", "jobs.batch") and not can("create", "secrets")
    # A rollout writes its children and their approvals, and deletes a removed target's
    # child; it deletes nothing else, approvals included.
    assert can("create", "ptahschemas.ptah.io") and can("delete", "ptahmigrations.ptah.io")
    assert can("create", "ptahapprovals.ptah.io")
    assert not can("delete", "ptahapprovals.ptah.io") and not can("delete", "ptahplans.ptah.io")
    assert not can("update", "secrets") and not can("create", "pods")
    assert not can("list", "ptahschemas.ptah.io", "default"), "namespace scoping"
