"""Start-up of the three Ptah processes, beside ``python -c pass`` measured in the same run.

Every runner Job, every ``ptah`` command and every operator restart pays its process's
start-up, so each is timed from just before the process is spawned to the moment it
first talks to the outside:

* ``ptah-runner identify`` and ``ptah-runner plan``: to the first database round trip
  (a TCP relay in front of the PostgreSQL of ``hack/databases.sh`` stamps the first
  bytes each way; without it, SQLite, to the process's exit), and to exit;
* ``ptah status``: to its first API request (a local listener posing as the apiserver
  stamps the first bytes of the request), and ``ptah --help`` to exit;
* ``ptah operator run``: to its first API request, the same way.

Every child loads bytecode (a private cache written by a warm-up round), as the image's
processes do. Figures are wall-clock medians over ``--rounds`` interleaved rounds (the
machine is shared: compare ratios, not absolute times) and the child's CPU seconds. Then the
modules each entry imports before that moment (``python -X importtime``, cumulative,
the largest first) and the heavy packages among them, which must be none for the
runner before it connects.

With ``--baseline SRC`` (another checkout's ``src``, e.g. ``/work/main/src``), the
runner's ``identify`` is also run from that tree and from this one through the same
launcher, interleaved in the same rounds: the before/after of a start-up change.

    .venv/bin/python bench/startup.py [--rounds 7] [--baseline /work/main/src]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ptah.runner.main import LATE_PACKAGES

BIN = Path(sys.executable).parent
PY = sys.executable
RUNNER_TARGET_S = 0.15
HEAVY = LATE_PACKAGES


@dataclass
class Relay:
    """A TCP listener that stamps the first bytes of the first connection each way.

    With ``upstream`` it relays to it (the database); without, it answers nothing and
    closes (enough to see when a client's first request arrives).
    """

    upstream: tuple[str, int] | None = None
    sent: float | None = None  # first bytes from the client
    replied: float | None = None  # first bytes back to the client
    pid: int = 0  # the client process, whose CPU seconds are read at each stamp
    cpu: dict[str, float] = field(default_factory=dict)
    port: int = 0
    _sock: socket.socket = field(default_factory=socket.socket)

    def start(self) -> Relay:
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def reset(self, pid: int = 0) -> None:
        self.sent = self.replied = None
        self.pid, self.cpu = pid, {}

    def _stamp(self, name: str) -> None:
        if getattr(self, name) is not None:
            return
        setattr(self, name, time.perf_counter())
        try:  # nanoseconds on a CPU, all threads (schedstat; /proc/PID/stat has 10 ms ticks)
            ns = sum(
                int(Path(task, "schedstat").read_text().split()[0])
                for task in Path(f"/proc/{self.pid}/task").iterdir()
            )
            self.cpu[name] = ns / 1e9
        except (OSError, IndexError, ValueError):
            pass

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, stamp: str) -> None:
        try:
            while data := src.recv(65536):
                self._stamp(stamp)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def _serve(self, client: socket.socket) -> None:
        if self.upstream is None:
            try:
                if client.recv(65536):
                    self._stamp("sent")
            except OSError:
                pass
            client.close()
            return
        server = socket.create_connection(self.upstream)
        threading.Thread(target=self._pump, args=(server, client, "replied"), daemon=True).start()
        self._pump(client, server, "sent")
        client.close()
        server.close()


@dataclass
class Run:
    wall: float
    cpu: float
    first: float | None  # the first contact (round trip, request), from spawn
    first_cpu: float | None  # the process's CPU seconds by then (10 ms resolution)


def spawn(argv: list[str], env: dict[str, str], relay: Relay | None, stamp: str, kill: bool) -> Run:
    """Spawn ``argv``; with ``kill``, stop it once the relay saw ``stamp``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/tmp"
    )
    if relay is not None:
        relay.reset(proc.pid)  # before the child can have imported its way to a connect
    if kill and relay is not None:
        deadline = t0 + 30
        while getattr(relay, stamp) is None and time.perf_counter() < deadline:
            time.sleep(0.001)
        proc.kill()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if not kill and proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} exited {proc.returncode}")
    mark = getattr(relay, stamp) if relay is not None else None
    return Run(
        wall,
        usage.ru_utime + usage.ru_stime,
        None if mark is None else mark - t0,
        relay.cpu.get(stamp) if relay is not None else None,
    )


def importtime(
    code: str, env: dict[str, str], inside: tuple[str, ...] = ()
) -> tuple[list[tuple[int, str]], list[str]]:
    """Top-level imports of ``code`` by cumulative microseconds, and the heavy packages;
    with ``inside``, those modules instead, wherever in the import tree each first loads."""
    proc = subprocess.run(
        [PY, "-X", "importtime", "-c", code], env=env, capture_output=True, text=True, check=True
    )
    rows: list[tuple[int, str]] = []
    names: set[str] = set()
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line.split("|")
        if not cumulative.strip().isdigit():
            continue  # the header
        names.add(name.strip().split(".")[0])
        if name.strip() in inside or (not inside and not name.startswith("  ")):
            rows.append((int(cumulative), name.strip()))  # nested ones are indented further
    return sorted(rows, reverse=True), sorted(names & set(HEAVY))


# The stdlib psycopg 3's import brings (asyncio for one exception class, importlib.metadata
# for its version string): shown so that the driver's share of the runner's start-up is
# not a lump.
DRIVER_STDLIB = ("asyncio", "importlib.metadata", "ctypes.util", "logging", "ssl")


PROBE = """
import sys
import ptah.engines.connect as c
import ptah.runner.main as m
seen = []
real = c.open_url
def probe(url):
    seen.extend(sorted({n.split(".")[0] for n in sys.modules} & set(HEAVY)))
    return real(url)
c.open_url = probe  # the runner looks it up when it opens the target
code = m.main(["identify"])
sys.stderr.write("HEAVY-AT-CONNECT " + ",".join(seen) + "\\n")
"""


def heavy_at_connect(env: dict[str, str]) -> str:
    """The heavy packages loaded when ``ptah-runner identify`` opens its database."""
    proc = subprocess.run(
        [PY, "-c", f"HEAVY = {HEAVY!r}" + PROBE], env=env, capture_output=True, text=True
    )
    for line in proc.stderr.splitlines():
        if line.startswith("HEAVY-AT-CONNECT"):
            return line.split(" ", 1)[1].strip() or "none"
    raise SystemExit(f"runner probe failed: {proc.stderr.strip()[-300:]}")


def pg_upstream() -> tuple[str, tuple[str, int]] | None:
    """The bench PostgreSQL URL and its host/port, if ``hack/databases.sh`` set one up."""
    url = os.environ.get("PTAH_TEST_PG_BENCH_URL") or os.environ.get("PTAH_TEST_PG_URL")
    if not url:
        env = Path(os.environ.get("PTAH_CACHE", Path.home() / ".cache/ptah")) / "db/env"
        if env.exists():
            for line in env.read_text().splitlines():
                if line.startswith("PTAH_TEST_PG_URL="):
                    url = line.split("=", 1)[1]
    if not url:
        return None
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return url, (parts.hostname or "127.0.0.1", parts.port or 5432)


def via(url: str, port: int) -> str:
    """``url`` with its host and port replaced by the relay's."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    userinfo = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{userinfo}127.0.0.1:{port}"))


def fake_kubeconfig(directory: Path, port: int) -> Path:
    path = directory / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: bench}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u, namespace: bench}}]\n"
    )
    return path


def summary(label: str, runs: list[Run], ref: float, what: str) -> str:
    wall = statistics.median(r.wall for r in runs)
    cpu = statistics.median(r.cpu for r in runs)
    firsts = [r.first for r in runs if r.first is not None]
    text = f"{label:34s} exit {wall:6.3f}s ({wall / ref:5.1f}x ref)  cpu {cpu:6.3f}s"
    if firsts:
        first = statistics.median(firsts)
        text += f"  {what} {first:6.3f}s (min {min(firsts):.3f}s, {first / ref:4.1f}x ref)"
    cpus = [r.first_cpu for r in runs if r.first_cpu is not None]
    if cpus:
        text += f" cpu by then {statistics.median(cpus):.3f}s"
    return text


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--top", type=int, default=6, help="imports listed per entry")
    ap.add_argument("--baseline", type=Path, help="another tree's src: its runner beside this one")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ptah-bench-startup-"))
    # Every child loads bytecode, as in the image (whose stdlib, packages and ptah are all
    # compiled): a shell's PYTHONDONTWRITEBYTECODE would have a source tree's modules
    # compiled again in every run. The warm-up round writes it to a private cache.
    base_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PTAH_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    base_env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    desired = tmp / "desired.sql"
    desired.write_text("CREATE TABLE bench_startup (id integer PRIMARY KEY);\n")

    pg = pg_upstream()
    db = Relay(upstream=pg[1]).start() if pg else None
    if pg and db:
        db_url, db_label = via(pg[0], db.port), "PostgreSQL via relay"
    else:
        db_url, db_label = f"sqlite:///{tmp}/startup.db", "SQLite (no PostgreSQL set up)"
    runner_env = {**base_env, "PTAH_DB_URL": db_url, "PTAH_OPERATION_ID": "bench-startup"}
    api = Relay().start()
    kubeconfig = fake_kubeconfig(tmp, api.port)
    cli_env = {**base_env, "KUBECONFIG": str(kubeconfig)}
    runner = str(BIN / "ptah-runner")
    ptah = str(BIN / "ptah")

    cases: list[tuple[str, Callable[[], Run], str]] = [
        (
            "python -c pass (reference)",
            lambda: spawn([PY, "-c", "pass"], base_env, None, "", False),
            "",
        ),
        (
            "python -c 'import psycopg' (driver)",
            lambda: spawn([PY, "-c", "import psycopg"], base_env, None, "", False),
            "",
        ),
        (
            "ptah-runner identify",
            lambda: spawn([runner, "identify"], runner_env, db, "replied", False),
            "1st db round trip",
        ),
        (
            "ptah-runner plan",
            lambda: spawn(
                [runner, "plan", "--desired", str(desired)], runner_env, db, "replied", False
            ),
            "1st db round trip",
        ),
        ("ptah --help", lambda: spawn([ptah, "--help"], cli_env, None, "", False), ""),
        (
            "ptah status",
            lambda: spawn([ptah, "status", "-A"], cli_env, api, "sent", True),
            "1st API request",
        ),
        (
            "ptah operator run",
            lambda: spawn(
                [ptah, "operator", "run", "--metrics-port=0", "--health-port=0"],
                cli_env,
                api,
                "sent",
                True,
            ),
            "1st API request",
        ),
    ]
    if args.baseline:
        launcher = "import sys; from ptah.runner.main import main; sys.exit(main())"
        here = Path(__file__).resolve().parents[1] / "src"

        def from_tree(src: Path) -> Callable[[], Run]:
            env = {**runner_env, "PYTHONPATH": str(src)}
            return lambda: spawn([PY, "-c", launcher, "identify"], env, db, "replied", False)

        for name, src in (("baseline", args.baseline.resolve()), ("this tree", here)):
            cases.append((f"runner identify, {name}", from_tree(src), "1st db round trip"))
    results: dict[str, list[Run]] = {label: [] for label, _, _ in cases}
    for _label, fn, _ in cases:  # warm the page cache and the bytecode once
        fn()
    for _ in range(args.rounds):
        for label, fn, _ in cases:
            results[label].append(fn())
    ref = statistics.median(r.wall for r in results[cases[0][0]])
    print(f"start-up, {args.rounds} rounds, medians; database: {db_label}")
    for label, _, what in cases:
        print(summary(label, results[label], ref, what))
    trips = [r.first for r in results["ptah-runner identify"] if r.first is not None]
    if db is not None and trips:
        first = statistics.median(trips)
        print(
            f"runner first round trip {first:.3f}s: target <= {RUNNER_TARGET_S}s "
            f"({'met' if first <= RUNNER_TARGET_S else 'NOT met'} on this run; "
            f"the driver import alone is "
            f"{statistics.median(r.wall for r in results[cases[1][0]]) / ref:.1f}x ref)"
        )
    if args.baseline:
        before, after = (
            statistics.median(
                r.first if r.first is not None else r.wall
                for r in results[f"runner identify, {name}"]
            )
            for name in ("baseline", "this tree")
        )
        cpu_before, cpu_after = (
            statistics.median(
                r.first_cpu if r.first_cpu is not None else r.cpu
                for r in results[f"runner identify, {name}"]
            )
            for name in ("baseline", "this tree")
        )
        print(
            f"runner identify to 1st contact: baseline {before:.3f}s, this tree {after:.3f}s"
            f" (ratio {after / before:.2f}); CPU by then: baseline {cpu_before:.3f}s,"
            f" this tree {cpu_after:.3f}s (ratio {cpu_after / cpu_before:.2f})"
        )

    print("\nimports before the first contact (cumulative ms, python -X importtime):")
    entries = {
        "ptah-runner (to connect)": "import ptah.runner.main as m; m.build_parser()"
        + ("; import ptah.engines.postgres.target" if db else "; import sqlite3"),
        "ptah --help": "import ptah.cli.main as m; m.build_parser()",
        "ptah operator run (to 1st request)": "import ptah.cli.main as m; m.build_parser();"
        " import ptah.operator.main",
    }
    for label, code in entries.items():
        top, heavy = importtime(code, base_env)
        total = sum(us for us, _ in top) / 1000
        listed = ", ".join(f"{n} {us / 1000:.0f}" for us, n in top[: args.top])
        print(f"  {label:36s} {total:5.0f} ms: {listed}")
        print(f"  {'':36s} heavy packages: {', '.join(heavy) or 'none'}")
    parts, _ = importtime("import psycopg", base_env, DRIVER_STDLIB)
    whole, _ = importtime("import psycopg", base_env)
    driver = next((us for us, n in whole if n == "psycopg"), 0)
    print(
        f"  {'the driver (import psycopg)':36s} {driver / 1000:5.0f} ms, of which stdlib: "
        + ", ".join(f"{n} {us / 1000:.0f}" for us, n in parts)
        + " (nested: they overlap)"
    )
    print(
        f"heavy packages loaded when the runner opens its database: {heavy_at_connect(runner_env)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
