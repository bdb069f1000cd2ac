"""A small synchronous Kubernetes API client for the node agent (httpx, raw JSON).

The agent handles Pods, Nodes, Leases and a few reads as plain dicts; a typed client
would add nothing but conversions on its hot path.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

JSON = dict[str, Any]

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


class ApiError(RuntimeError):
    def __init__(self, status: int, body: str, method: str, path: str) -> None:
        super().__init__(f"{method} {path}: HTTP {status}: {body[:500]}")
        self.status = status
        self.body = body


@dataclass(frozen=True)
class Credentials:
    server: str
    ca_file: Path
    cert_file: Path
    key_file: Path


def ssl_context(ca_file: Path, cert_file: Path | None, key_file: Path | None) -> ssl.SSLContext:
    """Verify against ``ca_file``; present the client certificate when given."""
    ctx = ssl.create_default_context(cafile=str(ca_file))
    if cert_file is not None and key_file is not None:
        ctx.load_cert_chain(str(cert_file), str(key_file))
    return ctx


class ApiClient:
    def __init__(self, creds: Credentials, timeout: float = 30.0) -> None:
        self._creds = creds
        self._http = httpx.Client(
            base_url=creds.server,
            verify=ssl_context(creds.ca_file, creds.cert_file, creds.key_file),
            timeout=timeout,
        )

    def close(self) -> None:
        self._http.close()

    def _check(self, resp: httpx.Response, method: str, path: str) -> JSON:
        if resp.status_code >= 400:
            raise ApiError(resp.status_code, resp.text, method, path)
        if not resp.content:
            return {}
        data = resp.json()
        return data if isinstance(data, dict) else {"items": data}

    def get(self, path: str, params: dict[str, str] | None = None) -> JSON:
        return self._check(self._http.get(path, params=params), "GET", path)

    def get_or_none(self, path: str) -> JSON | None:
        try:
            return self.get(path)
        except ApiError as err:
            if err.status == 404:
                return None
            raise

    def post(self, path: str, body: JSON) -> JSON:
        return self._check(self._http.post(path, json=body), "POST", path)

    def put(self, path: str, body: JSON) -> JSON:
        return self._check(self._http.put(path, json=body), "PUT", path)

    def patch(self, path: str, body: JSON, content_type: str = STRATEGIC) -> JSON:
        resp = self._http.patch(
            path, content=json.dumps(body), headers={"Content-Type": content_type}
        )
        return self._check(resp, "PATCH", path)

    def delete(self, path: str, body: JSON | None = None) -> JSON:
        resp = self._http.request("DELETE", path, json=body)
        return self._check(resp, "DELETE", path)

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 300) -> Iterator[JSON]:
        """Watch events after ``resource_version``; ends when the server closes the watch."""
        params = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        timeout = httpx.Timeout(30.0, read=timeout_seconds + 30.0)
        with self._http.stream("GET", path, params=params, timeout=timeout) as resp:
            if resp.status_code >= 400:
                resp.read()
                raise ApiError(resp.status_code, resp.text, "WATCH", path)
            for line in resp.iter_lines():
                if line.strip():
                    event = json.loads(line)
                    if isinstance(event, dict):
                        yield event
