"""The node agent: a Node named ``ptah-local`` whose Pods are local processes.

It registers the Node (Ready, InternalIP 127.0.0.1, kubelet port), renews its Lease in
``kube-node-lease``, binds every Pod that no scheduler placed (``pods/binding``), runs
bound Pods through :mod:`ptah.testing.devcluster.runtime`, reports their status, finishes their
deletion (kill, then delete with grace period 0), and serves their logs.

It authenticates with the cluster's admin client certificate (``pki/admin.crt``,
group ``system:masters``): simple, and acceptable for a loopback-only dev cluster.

Run: ``python -m ptah.testing.devcluster.agent --state-dir DIR`` (``ptah dev up`` does this).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import queue
import shutil
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ptah.testing.devcluster import config, images, paths, podspec
from ptah.testing.devcluster.apiclient import ApiClient, ApiError, Credentials
from ptah.testing.devcluster.logserver import LogSource, serve
from ptah.testing.devcluster.runtime import (
    TERMINAL,
    AgentContext,
    PodRun,
    kill_pod_processes,
    now_rfc3339,
)

JSON = dict[str, Any]
log = logging.getLogger("ptah.testing.devcluster.agent")

NODE_ALLOCATABLE = {"cpu": "8", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}
LEASE_SECONDS = 40
SCHEDULERS = ("default-scheduler", "")


def micro_time() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())


class ApiSources:
    """Secrets, ConfigMaps and service-account tokens for podspec, read uncached."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    def secret(self, namespace: str, name: str) -> JSON | None:
        return self.api.get_or_none(f"/api/v1/namespaces/{namespace}/secrets/{name}")

    def config_map(self, namespace: str, name: str) -> JSON | None:
        return self.api.get_or_none(f"/api/v1/namespaces/{namespace}/configmaps/{name}")

    def service_account_token(
        self, pod: JSON, audience: str | None, expiration_seconds: int
    ) -> str:
        meta = pod["metadata"]
        sa = pod["spec"].get("serviceAccountName") or "default"
        body: JSON = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [audience] if audience else [],
                "expirationSeconds": max(expiration_seconds, 600),
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        }
        try:
            resp = self.api.post(
                f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{sa}/token", body
            )
        except ApiError as err:
            raise podspec.ConfigError(f"token for serviceaccount {sa}: {err}") from err
        return str(resp["status"]["token"])


class Agent:
    def __init__(self, cfg: config.ClusterConfig, runner_images: Sequence[str] = ()) -> None:
        self.cfg = cfg
        self.node = cfg.node_name
        creds = Credentials(
            server=cfg.server,
            ca_file=cfg.pki.ca_crt,
            cert_file=cfg.pki.crt("admin"),
            key_file=cfg.pki.key("admin"),
        )
        self.api = ApiClient(creds)
        self.watch_api = ApiClient(creds)
        self.beat_api = ApiClient(creds)
        self.events: queue.Queue[tuple[str, JSON]] = queue.Queue()
        self.stop = threading.Event()
        self.runs: dict[str, PodRun] = {}
        self.by_name: dict[tuple[str, str], PodRun] = {}
        bin_dir = paths.venv_bin_dir()
        base_env = {
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(cfg.ports.apiserver),
            "KUBERNETES_SERVICE_PORT_HTTPS": str(cfg.ports.apiserver),
        }
        for name in ("LANG", "LC_ALL", "TZ"):
            if name in os.environ:
                base_env[name] = os.environ[name]
        self.ctx = AgentContext(
            state_dir=cfg.state_dir,
            sources=ApiSources(self.api),
            base_env=base_env,
            runner_repositories=images.configured_runner_repositories(
                [*cfg.runner_images, *runner_images]
            ),
            bin_dir=bin_dir,
            node_allocatable=NODE_ALLOCATABLE,
        )

    # -- node -----------------------------------------------------------------------------

    def register_node(self) -> None:
        path = f"/api/v1/nodes/{self.node}"
        if self.api.get_or_none(path) is None:
            self.api.post(
                "/api/v1/nodes",
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": self.node,
                        "labels": {
                            "kubernetes.io/hostname": self.node,
                            "kubernetes.io/os": "linux",
                            "kubernetes.io/arch": "amd64",
                            "ptah.io/local-node": "true",
                        },
                    },
                    "spec": {},
                },
            )
        self.node_status()

    def node_status(self) -> None:
        now = now_rfc3339()
        conds = [
            ("Ready", "True", "KubeletReady", "ptah node agent is posting ready status"),
            ("MemoryPressure", "False", "KubeletHasSufficientMemory", "no pressure"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "no pressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID", "no pressure"),
        ]
        status = {
            "conditions": [
                {
                    "type": t,
                    "status": s,
                    "reason": r,
                    "message": m,
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": self.started_at,
                }
                for t, s, r, m in conds
            ],
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": self.node},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.cfg.ports.kubelet}},
            "capacity": NODE_ALLOCATABLE,
            "allocatable": NODE_ALLOCATABLE,
            "nodeInfo": {
                "machineID": "ptah-local",
                "systemUUID": "ptah-local",
                "bootID": self.boot_id,
                "kernelVersion": platform.release(),
                "osImage": "ptah local processes",
                "containerRuntimeVersion": "ptah-process://0.1.0",
                "kubeletVersion": paths.KUBERNETES_VERSION,
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        }
        self.beat_api.patch(f"/api/v1/nodes/{self.node}/status", {"status": status})

    def renew_lease(self) -> None:
        ns = "kube-node-lease"
        path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{self.node}"
        spec = {
            "holderIdentity": self.node,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": micro_time(),
        }
        try:
            self.beat_api.patch(path, {"spec": spec}, "application/merge-patch+json")
        except ApiError as err:
            if err.status != 404:
                raise
            self.beat_api.post(
                f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": self.node, "namespace": ns},
                    "spec": spec,
                },
            )

    def heartbeat_loop(self) -> None:
        last_status = time.monotonic()
        while not self.stop.wait(10.0):
            try:
                self.renew_lease()
                if time.monotonic() - last_status >= 40.0:
                    self.node_status()
                    last_status = time.monotonic()
            except Exception:
                log.exception("heartbeat failed")

    # -- watch ----------------------------------------------------------------------------

    def watch_loop(self) -> None:
        rv = ""
        while not self.stop.is_set():
            try:
                if not rv:
                    listing = self.watch_api.get("/api/v1/pods")
                    for pod in listing.get("items", []):
                        self.events.put(("pod", pod))
                    # Pods deleted while no watch ran get no DELETED event: resync.
                    uids = [str(p["metadata"]["uid"]) for p in listing.get("items", [])]
                    self.events.put(("resync", {"uids": uids}))
                    rv = str(listing["metadata"]["resourceVersion"])
                for event in self.watch_api.watch("/api/v1/pods", rv, timeout_seconds=240):
                    kind = event.get("type")
                    obj = event.get("object") or {}
                    if kind == "ERROR":
                        rv = ""
                        break
                    rv = str(obj.get("metadata", {}).get("resourceVersion", rv))
                    if kind == "BOOKMARK":
                        continue
                    self.events.put(("deleted" if kind == "DELETED" else "pod", obj))
                    if self.stop.is_set():
                        return
            except ApiError as err:
                if err.status == 410:
                    rv = ""
                    continue
                log.warning("pod watch: %s", err)
                self.stop.wait(1.0)
            except Exception as err:
                log.warning("pod watch: %s", err)
                self.stop.wait(1.0)

    # -- pods -----------------------------------------------------------------------------

    def handle_pod(self, pod: JSON) -> None:
        meta = pod["metadata"]
        spec = pod.get("spec", {})
        uid = str(meta["uid"])
        node = spec.get("nodeName") or ""
        if not node:
            if (
                spec.get("schedulerName", "") in SCHEDULERS
                and not meta.get("deletionTimestamp")
                and not spec.get("schedulingGates")
            ):
                self.bind(pod)
            return
        if node != self.node:
            return
        run = self.runs.get(uid)
        if run is None:
            phase = pod.get("status", {}).get("phase")
            if meta.get("deletionTimestamp"):
                self.finish_delete(pod, None)
                return
            if phase in TERMINAL:
                return
            if any(
                "running" in cs.get("state", {}) or "terminated" in cs.get("state", {})
                for cs in pod.get("status", {}).get("containerStatuses") or []
            ):
                self.fail_orphan(pod)
                return
            run = PodRun(pod, self.ctx)
            self.runs[uid] = run
            self.by_name[(run.namespace, run.name)] = run
        run.pod = pod
        if meta.get("deletionTimestamp") and not run.terminating:
            grace = float(meta.get("deletionGracePeriodSeconds") or 0)
            run.kill(min(grace, 30.0))
        self.sync(run)

    def bind(self, pod: JSON) -> None:
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.node},
        }
        try:
            self.api.post(
                f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding", body
            )
        except ApiError as err:
            if err.status not in (404, 409):
                log.warning("bind %s/%s: %s", meta["namespace"], meta["name"], err)

    def fail_orphan(self, pod: JSON) -> None:
        """A Pod that ran under an earlier agent: its processes are gone; say so."""
        meta = pod["metadata"]
        statuses = []
        for cs in pod.get("status", {}).get("containerStatuses") or []:
            state = cs.get("state", {})
            if "running" in state:
                cs = dict(cs)
                cs["state"] = {
                    "terminated": {
                        "exitCode": 137,
                        "reason": "NodeAgentRestarted",
                        "startedAt": state["running"].get("startedAt"),
                        "finishedAt": now_rfc3339(),
                    }
                }
                cs["ready"] = False
                cs["started"] = False
            statuses.append(cs)
        body = {
            "status": {
                "phase": "Failed",
                "reason": "NodeAgentRestarted",
                "message": "the ptah node agent restarted; the pod's processes were stopped",
                "containerStatuses": statuses,
            }
        }
        self.patch_status(meta["namespace"], meta["name"], body)

    def patch_status(self, ns: str, name: str, body: JSON) -> bool:
        try:
            self.api.patch(f"/api/v1/namespaces/{ns}/pods/{name}/status", body)
            return True
        except ApiError as err:
            if err.status != 404:
                log.warning("status %s/%s: %s", ns, name, err)
            return False

    def sync(self, run: PodRun) -> None:
        run.step()
        if run.terminating:
            run.escalate()
            if run.all_stopped():
                self.finish_delete(run.pod, run)
                return
        status = run.status()
        if status != run.last_sent and self.patch_status(
            run.namespace, run.name, {"status": status}
        ):
            run.last_sent = status

    def finish_delete(self, pod: JSON, run: PodRun | None) -> None:
        meta = pod["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        if run is not None and run.frozen_phase is None:
            self.patch_status(ns, name, {"status": run.status()})
        try:
            self.api.delete(
                f"/api/v1/namespaces/{ns}/pods/{name}",
                {
                    "apiVersion": "v1",
                    "kind": "DeleteOptions",
                    "gracePeriodSeconds": 0,
                    "preconditions": {"uid": uid},
                },
            )
        except ApiError as err:
            if err.status not in (404, 409):
                log.warning("delete %s/%s: %s", ns, name, err)
                return
        self.forget(uid, pod)

    def forget(self, uid: str, pod: JSON) -> None:
        run = self.runs.pop(uid, None)
        if run is not None:
            run.kill_now()
            if self.by_name.get((run.namespace, run.name)) is run:
                del self.by_name[(run.namespace, run.name)]
        shutil.rmtree(podspec.pod_dir(self.cfg.state_dir, pod), ignore_errors=True)

    def log_lookup(self, ns: str, pod: str, container: str, previous: bool) -> LogSource | None:
        run = self.by_name.get((ns, pod))
        if run is None:
            return None
        for c in run.containers():
            if c.name == container:
                path = c.previous_log_path if previous else c.log_path
                return LogSource(path=path, running=lambda c=c: c.running)  # type: ignore[misc]
        return None

    # -- main -----------------------------------------------------------------------------

    def run(self) -> None:
        self.started_at = now_rfc3339()
        self.boot_id = os.urandom(8).hex()
        kill_pod_processes(self.cfg.state_dir)
        pki = self.cfg.pki
        server = serve(
            self.cfg.ports.kubelet,
            pki.crt("kubelet"),
            pki.key("kubelet"),
            pki.ca_crt,
            self.log_lookup,
        )
        self.register_node()
        self.renew_lease()
        for target in (self.watch_loop, self.heartbeat_loop):
            threading.Thread(target=target, name=target.__name__, daemon=True).start()
        log.info("node %s ready; kubelet port %d", self.node, self.cfg.ports.kubelet)
        try:
            while not self.stop.is_set():
                try:
                    kind, obj = self.events.get(timeout=0.2)
                except queue.Empty:
                    kind, obj = "tick", {}
                try:
                    if kind == "pod":
                        self.handle_pod(obj)
                    elif kind == "deleted":
                        self.forget(str(obj["metadata"]["uid"]), obj)
                    elif kind == "resync":
                        live = set(obj["uids"])
                        for uid, run in list(self.runs.items()):
                            if uid not in live:
                                self.forget(uid, run.pod)
                    if kind == "tick" or self.events.empty():
                        for run in list(self.runs.values()):
                            self.sync(run)
                except Exception:
                    log.exception("pod handling failed (%s)", kind)
        finally:
            server.shutdown()
            for run in list(self.runs.values()):
                run.kill_now()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ptah.testing.devcluster.agent")
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--runner-image", action="append", default=[])
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    cfg = config.ClusterConfig.load(args.state_dir)
    agent = Agent(cfg, args.runner_image)

    def on_signal(signum: int, _frame: object) -> None:
        agent.stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    agent.run()
    log.info("stopped; %s", json.dumps({"pods_killed": len(agent.runs)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
