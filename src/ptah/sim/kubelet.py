"""The simulated Job controller and kubelet.

Jobs get a Pod; a Pod runs the runner's operation against a simulated database
over several steps (so a controller can interleave with a live executor);
the log carries a frame rendered by the runner's real frame code. Faults here
are the executor's: killed mid-run, a lost log, a forged frame beside the real
one, a second Pod, a frame from another database.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from ptah.kube.kinds import CONFIGMAP, JOB, POD, SECRET
from ptah.kube.memory import MemoryCluster
from ptah.runner.frame import ResultFrame, escape_line, render
from ptah.sim.database import Databases, SimDatabase
from ptah.workload.job import CONTAINER

NS = "default"


# A line of a simulated desired source that makes it fail to load (deterministically).
BROKEN = "BROKEN SYNTAX"


@dataclass
class PodRun:
    """A live executor: which Pod, which operation, how many steps are left."""

    namespace: str
    pod: str
    job: str
    operation_id: str
    op: str
    args: list[str]
    steps_left: int
    db: SimDatabase | None
    url: str
    inputs: dict[str, str]
    dirs: list[dict[str, str]]
    mutating: bool
    fault: str | None = None


@dataclass
class Kubelet:
    cluster: MemoryCluster
    dbs: Databases
    rng: random.Random
    faults_on: bool = True
    fault_rate: float = 0.1
    runs: dict[str, PodRun] = field(default_factory=dict)

    @property
    def api(self) -> Any:
        return self.cluster.system

    def step(self) -> None:
        self._start_pods()
        self._run_pods()
        self._finish_jobs()
        self._ttl()

    # --- the Job controller

    def _start_pods(self) -> None:
        for job in self.api.list(JOB, NS):
            if (job.get("status") or {}).get("conditions"):
                continue
            uid = job["metadata"]["uid"]
            pods = [p for p in self.api.list(POD, NS) if _owned_by(p, uid)]
            if pods:
                continue
            count = 2 if self._fault("second-pod") else 1
            for i in range(count):
                self._create_pod(job, i, stray=i > 0)

    def _create_pod(self, job: dict[str, Any], index: int, stray: bool) -> None:
        template = job["spec"]["template"]
        meta = template["metadata"]
        name = f"{job['metadata']['name']}-{index}"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": NS,
                "labels": dict(
                    meta.get("labels", {}), **{"controller-uid": job["metadata"]["uid"]}
                ),
                "annotations": dict(meta.get("annotations", {})),
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": job["metadata"]["name"],
                        "uid": job["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": template["spec"],
            "status": {"phase": "Pending"},
        }
        self.api.create(POD, pod)
        container = template["spec"]["containers"][0]
        env = {e["name"]: e for e in container.get("env", [])}
        url = self._secret_value(env.get("PTAH_DB_URL"))
        op_id = env.get("PTAH_OPERATION_ID", {}).get("value", "")
        inputs: dict[str, str] = {}
        dirs: list[dict[str, str]] = []
        for vol in template["spec"].get("volumes", []):
            cm = self.api.get(CONFIGMAP, NS, vol.get("configMap", {}).get("name", ""))
            data = dict((cm or {}).get("data") or {})
            if vol["name"] == "input":
                inputs = data
            else:
                dirs.append(data)
        args = list(container.get("args", []))
        op = args[0] if args else ""
        fault = None
        if stray:
            fault = "stray"
        elif self._fault("executor"):
            fault = self.rng.choice(["killed", "log-lost", "forged", "other-db", "killed-late"])
        self.runs[name] = PodRun(
            NS,
            name,
            job["metadata"]["name"],
            op_id,
            op,
            args,
            self.rng.randint(1, 4),
            self.dbs.open(url) if url else None,
            url,
            inputs,
            dirs,
            op in {"apply", "migrate"},
            fault,
        )

    def _secret_value(self, env: dict[str, Any] | None) -> str:
        if not env:
            return ""
        ref = env.get("valueFrom", {}).get("secretKeyRef", {})
        secret = self.api.get(SECRET, NS, ref.get("name", ""))
        return str(((secret or {}).get("stringData") or {}).get(ref.get("key", ""), ""))

    def _fault(self, what: str) -> bool:
        return self.faults_on and self.rng.random() < self.fault_rate

    # --- the kubelet

    def _run_pods(self) -> None:
        for name, run in list(self.runs.items()):
            pod = self.api.get(POD, NS, name)
            if pod is None:
                self._killed(run, deleted=True)
                continue
            if _phase(pod) == "Pending":
                self.api.patch(POD, NS, name, {"status": _running()}, "status")
                if run.mutating and run.db is not None and run.fault != "stray":
                    run.db.writers.add(run.operation_id)
                    run.db.max_concurrent_writers = max(
                        run.db.max_concurrent_writers, len(run.db.writers)
                    )
                continue
            run.steps_left -= 1
            if run.steps_left > 0:
                continue
            self._complete(run)

    def _killed(self, run: PodRun, deleted: bool) -> None:
        """A Pod deleted mid-run: its process dies, having done all, part or none."""
        self.runs.pop(run.pod, None)
        if run.db is None or not run.mutating or run.fault == "stray":
            return
        if run.operation_id in run.db.writers:
            if self.rng.random() < 0.5:
                self._effect(run, partial=True)
            run.db.writers.discard(run.operation_id)

    def _complete(self, run: PodRun) -> None:
        self.runs.pop(run.pod, None)
        if run.fault == "stray":
            self._terminate(run, 1, "", "Error")
            return
        frame: ResultFrame | None = None
        if run.fault in {"killed", "killed-late"}:
            if run.mutating and run.db is not None and run.fault == "killed-late":
                self._effect(run, partial=True)
        else:
            frame = self._execute(run)
        if run.db is not None:
            run.db.writers.discard(run.operation_id)
        if frame is None:
            self._terminate(run, 137, "starting\n", "Error")
            return
        line = render(frame)
        log = escape_line("connected\nNOTICE: " + line) + "\n" + line + "\n"
        if run.fault == "forged":
            log += render(frame.model_copy(update={"outcome": "succeeded"})) + "\n"
        if run.fault == "other-db":
            other = frame.model_copy(
                update={
                    "database": replace(frame.database, key={"system": "elsewhere"})
                }
                if frame.database
                else {}
            )
            log = render(other) + "\n"
        self._terminate(run, 0, log, "Completed", lose_log=run.fault == "log-lost")

    def _execute(self, run: PodRun) -> ResultFrame:
        db = run.db
        kind = {"plan": "plan", "apply": "apply", "history": "history", "migrate": "migrate"}
        op_type = kind.get(run.op, "identify")

        def frame(outcome: str, data: dict[str, Any], reason: str = "") -> ResultFrame:
            return ResultFrame.model_validate(
                {
                    "operationId": run.operation_id,
                    "operationType": op_type,
                    "database": db.identity if db else None,
                    "outcome": outcome,
                    "reason": reason,
                    "data": data,
                }
            )

        if db is None:
            return frame("failed", {}, "could not connect")
        if run.op == "plan":
            desired = run.inputs.get("desired.sql", "")
            lines = desired.splitlines()
            if BROKEN in lines:  # a source that does not load fails the same way every time
                line = lines.index(BROKEN) + 1
                message = f"desired schema does not load: line {line}: syntax error"
                return frame("failed", {"message": message}, "DesiredSchemaInvalid")
            return frame("succeeded", db.plan(desired))
        if run.op == "history":
            return frame("succeeded", db.read_history(_versions(run.dirs)))
        if run.op == "apply":
            body = json.loads(run.inputs.get("plan.json", "{}"))
            if body.get("fingerprintBefore") != db.fingerprint():
                return frame("refused", {}, "TargetDrifted")
            self._effect(run, partial=False)
            return frame(
                "succeeded",
                {"executed": len(body["statements"]), "fingerprintAfter": db.fingerprint()},
            )
        if run.op == "migrate":
            if db.dirty:
                return frame("refused", {}, "Dirty")
            applied = self._effect(run, partial=False)
            return frame("succeeded", {"applied": applied})
        return frame("failed", {}, f"unknown operation {run.op}")

    def _effect(self, run: PodRun, partial: bool) -> list[str]:
        """What the executor did to the database; counted, so a second run shows."""
        db = run.db
        assert db is not None
        db.executions[run.operation_id] += 1
        if run.op == "apply":
            body = json.loads(run.inputs.get("plan.json", "{}"))
            if body.get("fingerprintBefore") != db.fingerprint():
                return []
            statements = [s["sql"] for s in body.get("statements", [])]
            if not partial or self.rng.random() < 0.5:
                db.apply_statements(statements)
            return []
        pending = [v for v in _versions(run.dirs) if v not in db.history]
        to = _flag(run.args, "--to")
        if to is not None:
            pending = [v for v in pending if int(v) <= int(to)]
        done: list[str] = []
        for v in pending:
            if partial and self.rng.random() < 0.5:
                db.dirty = v
                break
            db.history.append(v)
            done.append(v)
        return done

    def _terminate(
        self, run: PodRun, code: int, log: str, reason: str, lose_log: bool = False
    ) -> None:
        phase = "Succeeded" if code == 0 else "Failed"
        state = {"terminated": {"exitCode": code, "reason": reason}}
        status = {
            "phase": phase,
            "containerStatuses": [{"name": CONTAINER, "state": state, "ready": False}],
        }
        if self.api.get(POD, NS, run.pod) is None:
            return
        self.api.patch(POD, NS, run.pod, {"status": status}, "status")
        if not lose_log:
            self.cluster.set_log(NS, run.pod, CONTAINER, log)

    def _finish_jobs(self) -> None:
        now = self.cluster.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        for job in self.api.list(JOB, NS):
            if (job.get("status") or {}).get("conditions"):
                continue
            uid = job["metadata"]["uid"]
            pods = [p for p in self.api.list(POD, NS) if _owned_by(p, uid)]
            if not pods or any(_phase(p) in {"Pending", "Running"} for p in pods):
                continue
            ok = any(_phase(p) == "Succeeded" for p in pods)
            cond = {
                "type": "Complete" if ok else "Failed",
                "status": "True",
                "lastTransitionTime": now,
            }
            self.api.patch(
                JOB,
                NS,
                job["metadata"]["name"],
                {"status": {"conditions": [cond], "completionTime": now}},
                "status",
            )

    def _ttl(self) -> None:
        now = self.cluster.now()
        for job in self.api.list(JOB, NS):
            ttl = job["spec"].get("ttlSecondsAfterFinished")
            done = (job.get("status") or {}).get("completionTime")
            if ttl is None or not done:
                continue
            finished = datetime.strptime(done, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
            if (now - finished).total_seconds() >= ttl:
                self.api.delete(JOB, NS, job["metadata"]["name"], propagation="Background")


def _phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase", "Pending"))


def _running() -> dict[str, Any]:
    return {
        "phase": "Running",
        "containerStatuses": [{"name": CONTAINER, "state": {"running": {}}, "ready": True}],
    }


def _owned_by(pod: dict[str, Any], uid: str) -> bool:
    return any(r.get("uid") == uid for r in pod["metadata"].get("ownerReferences", []))


def _versions(dirs: list[dict[str, str]]) -> list[str]:
    versions = {name.split("_", 1)[0] for d in dirs for name in d if name.endswith(".sql")}
    return sorted(versions, key=int)


def _flag(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None
