"""The node agent's kubelet port: ``/containerLogs/<ns>/<pod>/<container>`` over TLS.

The apiserver reaches it for ``pods/log`` (and so ``kubectl logs``) at the Node's
InternalIP 127.0.0.1 and ``status.daemonEndpoints.kubeletEndpoint.Port``, verifying the
serving certificate with ``--kubelet-certificate-authority`` and presenting its
``--kubelet-client-certificate``, which this server requires (same local CA).
Supported query parameters: ``follow``, ``tailLines``, ``limitBytes``, ``previous``;
``timestamps`` and ``sinceSeconds`` are accepted and ignored (the log is the raw output).
"""

from __future__ import annotations

import contextlib
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass(frozen=True)
class LogSource:
    path: Path
    running: Callable[[], bool]


Lookup = Callable[[str, str, str, bool], LogSource | None]


def _tail(data: bytes, lines: int) -> bytes:
    if lines <= 0:
        return b""
    parts = data.splitlines(keepends=True)
    return b"".join(parts[-lines:])


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.split("/") if p]
        if parts == ["healthz"]:
            self._send(200, b"ok")
            return
        if len(parts) != 4 or parts[0] != "containerLogs":
            self._send(404, b"not supported by the ptah node agent\n")
            return
        _, ns, pod, container = parts
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        previous = query.get("previous", "false").lower() in ("1", "true")
        source = self.server.lookup(ns, pod, container, previous)
        if source is None:
            self._send(404, f"no container {container} in pod {ns}/{pod}\n".encode())
            return
        follow = query.get("follow", "false").lower() in ("1", "true")
        limit = int(query["limitBytes"]) if "limitBytes" in query else None
        # a container that never started has an empty log, as with a kubelet
        data = source.path.read_bytes() if source.path.exists() else b""
        if "tailLines" in query:
            data = _tail(data, int(query["tailLines"]))
        if limit is not None:
            data = data[:limit]
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        if not follow:
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_header("Connection", "close")
        self.end_headers()
        self._follow(source, data, limit)

    def _follow(self, source: LogSource, first: bytes, limit: int | None) -> None:
        sent = len(first)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.wfile.write(first)
            self.wfile.flush()
            if not source.path.exists():
                return
            with open(source.path, "rb") as fh:
                fh.seek(0, 2)
                offset = fh.tell()
                while limit is None or sent < limit:
                    chunk = fh.read(65536)
                    if chunk:
                        if limit is not None:
                            chunk = chunk[: limit - sent]
                        self.wfile.write(chunk)
                        self.wfile.flush()
                        sent += len(chunk)
                        offset += len(chunk)
                        continue
                    if not source.running():
                        rest = fh.read()
                        if rest:
                            self.wfile.write(rest)
                        break
                    time.sleep(0.2)

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    lookup: Lookup


def serve(port: int, cert: Path, key: Path, client_ca: Path, lookup: Lookup) -> ThreadingHTTPServer:
    """Start the kubelet port on 127.0.0.1 in a daemon thread."""
    server = _Server(("127.0.0.1", port), _Handler)
    server.lookup = lookup
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(client_ca))
    ctx.load_cert_chain(str(cert), str(key))
    ctx.verify_mode = ssl.CERT_REQUIRED
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, name="kubelet-port", daemon=True)
    thread.start()
    return server
