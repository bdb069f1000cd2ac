"""One Pod as local processes: start, supervise, restart, kill, and its Pod status.

Each container runs in its own session and process group (``start_new_session``), so a
kill reaches everything it spawned. stdout and stderr go, unbuffered and interleaved, to
``<pod-dir>/logs/<container>.log``; a restart keeps the previous run's log as
``<container>.previous.log`` (what ``kubectl logs --previous`` serves).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptah.testing.devcluster import images, podspec

JSON = dict[str, Any]
TERMINAL = ("Succeeded", "Failed")


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class AgentContext:
    """What every pod run needs from the agent."""

    state_dir: Path
    sources: podspec.Sources
    base_env: dict[str, str]
    runner_repositories: tuple[str, ...]
    bin_dir: Path
    node_allocatable: dict[str, str]


@dataclass
class ContainerRun:
    spec: JSON
    init: bool
    log_dir: Path
    proc: subprocess.Popen[bytes] | None = None
    state: str = "waiting"  # waiting | running | terminated
    waiting_reason: str = "ContainerCreating"
    waiting_message: str = ""
    started_at: str = ""
    finished_at: str = ""
    exit_code: int = 0
    signal: int = 0
    reason: str = ""
    message: str = ""
    restart_count: int = 0
    ever_ran: bool = False
    last_terminated: JSON | None = None
    container_id: str = ""
    no_restart: bool = False
    next_start: float = 0.0
    backoff: float = 1.0

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    @property
    def previous_log_path(self) -> Path:
        return self.log_dir / f"{self.name}.previous.log"

    @property
    def running(self) -> bool:
        return self.state == "running"

    def terminated_state(self) -> JSON:
        out: JSON = {
            "exitCode": self.exit_code,
            "reason": self.reason,
            "startedAt": self.started_at or None,
            "finishedAt": self.finished_at,
            "containerID": self.container_id or None,
        }
        if self.signal:
            out["signal"] = self.signal
        if self.message:
            out["message"] = self.message[-4000:]
        return {k: v for k, v in out.items() if v is not None}

    def status(self) -> JSON:
        if self.state == "running":
            state: JSON = {"running": {"startedAt": self.started_at}}
        elif self.state == "terminated":
            state = {"terminated": self.terminated_state()}
        else:
            waiting: JSON = {"reason": self.waiting_reason}
            if self.waiting_message:
                waiting["message"] = self.waiting_message[-4000:]
            state = {"waiting": waiting}
        out: JSON = {
            "name": self.name,
            "image": str(self.spec.get("image", "")),
            "imageID": str(self.spec.get("image", "")),
            "ready": self.state == "running" and not self.init,
            "started": self.state == "running",
            "restartCount": self.restart_count,
            "state": state,
            "lastState": {"terminated": self.last_terminated} if self.last_terminated else {},
        }
        if self.container_id:
            out["containerID"] = self.container_id
        return out

    def poll(self) -> bool:
        """Record the process's exit; True when the state changed."""
        if self.proc is None or self.state != "running":
            return False
        code = self.proc.poll()
        if code is None:
            return False
        self.finish(code)
        return True

    def finish(self, code: int) -> None:
        self.state = "terminated"
        self.finished_at = now_rfc3339()
        if code < 0:
            self.signal = -code
            self.exit_code = 128 - code
            self.reason = "Error"
        else:
            self.signal = 0
            self.exit_code = code
            self.reason = "Completed" if code == 0 else "Error"
        self.proc = None

    def fail_to_start(self, reason: str, message: str, no_restart: bool) -> None:
        if self.ever_ran:
            self.restart_count += 1
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.write_bytes(b"")
        now = now_rfc3339()
        self.state = "terminated"
        self.exit_code = 128
        self.signal = 0
        self.reason = reason
        self.message = message
        self.started_at = now
        self.finished_at = now
        self.no_restart = no_restart
        self.ever_ran = True

    def kill(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)


def kill_pod_processes(state_dir: Path) -> int:
    """Kill process groups of pods under ``state_dir`` still alive (e.g. an agent died).

    A pid counts only if its environment still carries the pod's ``PTAH_POD_UID``.
    """
    killed = 0
    for pidfile in (state_dir / "pods").glob("*/*/run/*.pid"):
        try:
            pid_text, uid = pidfile.read_text().split()
            pid = int(pid_text)
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except (OSError, ValueError):
            continue
        if f"PTAH_POD_UID={uid}".encode() in environ.split(b"\0"):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
                killed += 1
    return killed


class PodRun:
    def __init__(self, pod: JSON, ctx: AgentContext) -> None:
        self.pod = pod
        self.ctx = ctx
        meta = pod["metadata"]
        self.uid = str(meta["uid"])
        self.namespace = str(meta["namespace"])
        self.name = str(meta["name"])
        self.dir = podspec.pod_dir(ctx.state_dir, pod)
        logs = self.dir / "logs"
        spec = pod["spec"]
        self.init = [ContainerRun(c, True, logs) for c in spec.get("initContainers") or []]
        self.app = [ContainerRun(c, False, logs) for c in spec.get("containers") or []]
        self.policy = str(spec.get("restartPolicy") or "Always")
        self.volumes: dict[str, Path] | None = None
        self.start_time = now_rfc3339()
        self.started_mono = time.monotonic()
        self.deadline_exceeded = False
        self.terminating = False
        self.kill_deadline: float | None = None
        self.frozen_phase: str | None = None
        self.init_failed = False
        self.conditions: dict[str, tuple[str, str]] = {}
        self.last_sent: JSON | None = None
        self.next_volume_try = 0.0

    # -- lifecycle ------------------------------------------------------------------------

    def containers(self) -> list[ContainerRun]:
        return [*self.init, *self.app]

    def step(self) -> None:
        for c in self.containers():
            c.poll()
        if self.terminating or self.frozen_phase is not None:
            return
        now = time.monotonic()
        deadline = self.pod["spec"].get("activeDeadlineSeconds")
        if deadline is not None and now - self.started_mono > float(deadline):
            self.deadline_exceeded = True
            self.kill_now()
            return
        if self.volumes is None:
            if now < self.next_volume_try:
                return
            try:
                self.volumes = podspec.materialise_volumes(self.pod, self.dir, self.ctx.sources)
            except podspec.ConfigError as err:
                self.next_volume_try = now + 1.0
                for c in self.containers():
                    c.waiting_reason, c.waiting_message = "ContainerCreating", str(err)
                return
        for c in self.init:
            if c.state == "terminated" and c.exit_code == 0:
                continue
            if c.state == "running":
                return
            if c.state == "terminated":
                if self.policy == "Never" or c.no_restart:
                    self.init_failed = True
                    for a in self.app:
                        a.waiting_reason = "PodInitializing"
                    return
                self._maybe_restart(c, now)
                return
            self._start(c, now)
            return
        for c in self.app:
            if c.state == "waiting":
                self._start(c, now)
            elif c.state == "terminated" and self._will_restart(c):
                self._maybe_restart(c, now)

    def _will_restart(self, c: ContainerRun) -> bool:
        if c.no_restart:
            return False
        return self.policy == "Always" or (self.policy == "OnFailure" and c.exit_code != 0)

    def _maybe_restart(self, c: ContainerRun, now: float) -> None:
        """A container that just exited waits out its back-off (CrashLoopBackOff)."""
        c.last_terminated = c.terminated_state()
        c.state = "waiting"
        c.waiting_reason = "CrashLoopBackOff"
        c.waiting_message = f"back-off {c.backoff:.0f}s restarting failed container"
        c.next_start = now + c.backoff
        c.backoff = min(c.backoff * 2, 10.0)

    def _start(self, c: ContainerRun, now: float) -> None:
        assert self.volumes is not None
        if c.next_start and now < c.next_start:
            return
        try:
            plan = podspec.plan_container(
                self.pod,
                c.spec,
                self.dir,
                self.volumes,
                self.ctx.sources,
                self.base_env(),
                self.ctx.runner_repositories,
                self.ctx.bin_dir,
                self.ctx.node_allocatable,
            )
        except podspec.ConfigError as err:
            c.waiting_reason, c.waiting_message = err.reason, str(err)
            c.next_start = now + 1.0
            return
        except images.ImageNotMappableError as err:
            c.fail_to_start(err.reason, str(err), no_restart=True)
            return
        except OSError as err:
            c.fail_to_start("StartError", str(err), no_restart=False)
            return
        c.log_dir.mkdir(parents=True, exist_ok=True)
        if c.ever_ran:  # a restart: the previous run's log becomes --previous
            c.restart_count += 1
            with contextlib.suppress(OSError):
                c.log_path.replace(c.previous_log_path)
        try:
            with open(c.log_path, "ab") as log:
                proc = subprocess.Popen(
                    plan.argv,
                    cwd=plan.cwd,
                    env=plan.env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    close_fds=True,
                )
        except OSError as err:
            c.fail_to_start("StartError", f"{plan.argv[0]}: {err}", no_restart=False)
            return
        c.proc = proc
        c.state = "running"
        c.ever_ran = True
        c.started_at = now_rfc3339()
        c.finished_at = ""
        c.reason = c.message = ""
        c.container_id = f"ptah://{self.uid}/{c.name}/{proc.pid}"
        c.next_start = 0.0
        run_dir = self.dir / "run"
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / f"{c.name}.pid").write_text(f"{proc.pid} {self.uid}\n")

    def base_env(self) -> dict[str, str]:
        env = dict(self.ctx.base_env)
        env.update(
            HOSTNAME=self.name,
            PTAH_POD_NAME=self.name,
            PTAH_POD_NAMESPACE=self.namespace,
            PTAH_POD_UID=self.uid,
        )
        return env

    def kill(self, grace_seconds: float) -> None:
        """Begin termination: SIGTERM now, SIGKILL after the grace period."""
        if self.terminating:
            return
        self.terminating = True
        for c in self.containers():
            c.kill(signal.SIGTERM)
        self.kill_deadline = time.monotonic() + grace_seconds

    def escalate(self) -> None:
        if self.kill_deadline is not None and time.monotonic() >= self.kill_deadline:
            for c in self.containers():
                c.kill(signal.SIGKILL)

    def kill_now(self) -> None:
        for c in self.containers():
            c.kill(signal.SIGKILL)
        for c in self.containers():
            if c.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    c.proc.wait(timeout=5)
                c.poll()

    def all_stopped(self) -> bool:
        return all(c.state != "running" for c in self.containers())

    # -- status ---------------------------------------------------------------------------

    def phase(self) -> str:
        if self.frozen_phase is not None:
            return self.frozen_phase
        phase = self._phase()
        if phase in TERMINAL:
            self.frozen_phase = phase
            for c in self.containers():
                c.kill(signal.SIGKILL)
        return phase

    def _phase(self) -> str:
        if self.init_failed or self.deadline_exceeded:
            return "Failed"
        if self.terminating and self.all_stopped():
            codes = [c.exit_code for c in self.app if c.ever_ran]
            return "Succeeded" if codes and all(x == 0 for x in codes) else "Failed"
        if any(not (c.state == "terminated" and c.exit_code == 0) for c in self.init):
            return "Pending"
        if any(c.state == "waiting" and not c.ever_ran for c in self.app):
            return "Pending"
        if any(c.state == "running" for c in self.app):
            return "Running"
        stopped = [c for c in self.app if c.state != "running"]
        if any(self._will_restart(c) or c.state == "waiting" for c in stopped):
            return "Running"
        if all(c.exit_code == 0 for c in stopped):
            return "Succeeded"
        return "Failed"

    def _condition(self, ctype: str, ok: bool) -> JSON:
        status = "True" if ok else "False"
        prev = self.conditions.get(ctype)
        if prev is None or prev[0] != status:
            self.conditions[ctype] = (status, now_rfc3339())
        return {
            "type": ctype,
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": self.conditions[ctype][1],
        }

    def status(self) -> JSON:
        phase = self.phase()
        inits_done = all(c.state == "terminated" and c.exit_code == 0 for c in self.init)
        ready = phase == "Running" and all(c.running for c in self.app)
        status: JSON = {
            "phase": phase,
            "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}],
            "startTime": self.start_time,
            "conditions": [
                self._condition("PodReadyToStartContainers", self.volumes is not None),
                self._condition("Initialized", inits_done),
                self._condition("Ready", ready),
                self._condition("ContainersReady", ready),
                self._condition("PodScheduled", True),
            ],
            "containerStatuses": [c.status() for c in self.app],
        }
        if self.init:
            status["initContainerStatuses"] = [c.status() for c in self.init]
        if self.deadline_exceeded:
            status["reason"] = "DeadlineExceeded"
            status["message"] = "Pod was active on the node longer than activeDeadlineSeconds"
        return status
