"""HTTP health endpoints: ``/healthz`` (the process is alive and its loops turn)
and ``/readyz`` (every watch has listed once, so events are flowing; a standby
replica is ready too: readiness is not leadership)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Probe = Callable[[], tuple[bool, dict[str, object]]]


def serve(port: int, healthy: Probe, ready: Probe, addr: str = "0.0.0.0") -> ThreadingHTTPServer:
    """Start the server on a daemon thread and return it (``shutdown()`` to stop)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            probe = {"/healthz": healthy, "/readyz": ready}.get(self.path.split("?")[0])
            if probe is None:
                self.send_error(404)
                return
            ok, detail = probe()
            body = json.dumps({"ok": ok, **detail}).encode()
            self.send_response(200 if ok else 503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return  # probes are frequent; the operator's own log says what matters

    server = ThreadingHTTPServer((addr, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
    return server
