"""Background processes owned by one dev cluster, tracked by pid files.

A pid file ``<state>/run/<name>.pid`` holds the pid and the process's start time
(field 22 of ``/proc/<pid>/stat``), so a recycled pid is never mistaken for ours and
``ptah dev down`` stops only what ``ptah dev up`` started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path


def _stat(pid: int) -> tuple[str, str] | None:
    """(state letter, start time) of a live pid, else None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return fields[0], fields[19]


class Proc:
    def __init__(self, run_dir: Path, name: str) -> None:
        self.run_dir = run_dir
        self.name = name

    @property
    def pidfile(self) -> Path:
        return self.run_dir / f"{self.name}.pid"

    def pid(self) -> int | None:
        """Our process's pid if it is alive."""
        try:
            pid_text, start = self.pidfile.read_text().split()
            pid = int(pid_text)
        except (OSError, ValueError):
            return None
        st = _stat(pid)
        if st is None or st[0] in ("Z", "X") or st[1] != start:
            return None
        return pid

    def alive(self) -> bool:
        return self.pid() is not None

    def start(self, argv: Sequence[str], log: Path, env: dict[str, str] | None = None) -> int:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            out.write(f"\n=== {time.strftime('%F %T')} start: {' '.join(argv)}\n".encode())
            out.flush()
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                env=env,
            )
        st = _stat(proc.pid)
        start = st[1] if st else "0"
        self.pidfile.write_text(f"{proc.pid} {start}\n")
        return proc.pid

    def stop(self, timeout: float = 15.0) -> bool:
        """SIGTERM, then SIGKILL after ``timeout``; True if it was running."""
        pid = self.pid()
        if pid is None:
            self.pidfile.unlink(missing_ok=True)
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.pid() is not None:
            _reap(pid)
            time.sleep(0.1)
        if self.pid() is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            time.sleep(0.2)
        _reap(pid)
        self.pidfile.unlink(missing_ok=True)
        return True


def _reap(pid: int) -> None:
    """Collect our own exited child (a test session starts the daemons itself)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
