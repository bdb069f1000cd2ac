"""The cluster port over a real kube-apiserver, speaking its REST API with httpx.

Why not lightkube's Client: the port needs exact control over three things
(a JSON merge patch that carries ``metadata.resourceVersion`` as a
precondition, ``DeleteOptions`` with ``preconditions.uid``, and the mapping of
every failure to ``ptah.kube.errors``), and it deals in plain dicts, not
models. A thin REST client does exactly that. lightkube still parses the
kubeconfig (``KubeConfig``); the TLS context and credentials are built here so
the HTTP client is the project's own pinned ``httpx``.

Every read is a plain GET against the apiserver (no informer cache, no
``resourceVersion=0``), so it is served from etcd by quorum read.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import httpx
from lightkube.config.kubeconfig import KubeConfig, SingleConfig

from ptah.kube.clock import Clock, WallClock
from ptah.kube.errors import ApiError, Invalid, NotFound, Unavailable, from_status
from ptah.kube.kinds import Kind
from ptah.kube.port import Obj, Subresource

Propagation = Literal["Background", "Foreground", "Orphan"]
ObjList = list[Obj]  # inside the class ``list`` is the port method
MERGE_PATCH = "application/merge-patch+json"
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
_LIST_PAGE = 500


class KubeconfigError(Exception):
    """The kubeconfig asks for something this client does not do (exec plugins, auth providers)."""


# --- credentials -------------------------------------------------------------------


class _BearerToken(httpx.Auth):
    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token.strip()}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self._header
        yield request


class _TokenFile(httpx.Auth):
    """A projected service-account token: re-read when the server says 401 (the kubelet
    rotates it), as client-go does."""

    def __init__(self, path: str, token: str | None = None) -> None:
        self._path = path
        self._token = token.strip() if token else None

    def _read(self) -> str:
        self._token = Path(self._path).read_text().strip()
        return self._token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._token or self._read()}"
        response = yield request
        if response.status_code == 401:
            request.headers["Authorization"] = f"Bearer {self._read()}"
            yield request


@contextmanager
def _pem_file(data_b64: str) -> Iterator[str]:
    """A private temporary file holding base64-decoded PEM, removed on exit.

    ``load_cert_chain`` wants paths; the context keeps the key in memory after
    loading, so the file lives only for the call.
    """
    fd, path = tempfile.mkstemp(prefix="ptah-kube-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(base64.b64decode(data_b64))
        yield path
    finally:
        os.unlink(path)


def _ssl_context(config: SingleConfig) -> ssl.SSLContext | bool:
    cluster, user = config.cluster, config.user
    if not cluster.server.startswith("https"):
        return False
    if cluster.insecure:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif cluster.certificate_auth_data:
        pem = base64.b64decode(cluster.certificate_auth_data).decode()
        ctx = ssl.create_default_context(cadata=pem)
    elif cluster.certificate_auth:
        ctx = ssl.create_default_context(cafile=str(config.abs_file(cluster.certificate_auth)))
    else:
        ctx = ssl.create_default_context()
    if user is not None:
        if user.client_cert_data and user.client_key_data:
            with _pem_file(user.client_cert_data) as crt, _pem_file(user.client_key_data) as key:
                ctx.load_cert_chain(crt, key)
        elif user.client_cert and user.client_key:
            ctx.load_cert_chain(
                str(config.abs_file(user.client_cert)), str(config.abs_file(user.client_key))
            )
    return ctx


def _auth(config: SingleConfig) -> httpx.Auth | None:
    user = config.user
    if user is None:
        return None
    if user.token_file:
        return _TokenFile(str(config.abs_file(user.token_file)), user.token)
    if user.token:
        return _BearerToken(user.token)
    if user.username and user.password:
        return httpx.BasicAuth(user.username, user.password)
    if user.exec or user.auth_provider:
        raise KubeconfigError("exec and auth-provider credentials are not supported")
    return None  # client certificates only: they live in the TLS context


KEEPALIVE = 100  # connections to the apiserver, all kept alive


def http_client(config: SingleConfig, timeout: httpx.Timeout = DEFAULT_TIMEOUT) -> httpx.Client:
    """An httpx client for the apiserver ``config`` names, with its credentials."""
    return httpx.Client(
        base_url=config.cluster.server,
        verify=_ssl_context(config),
        auth=_auth(config),
        timeout=timeout,
        headers={"Accept": "application/json", "User-Agent": "ptah"},
        trust_env=False,
        # Every connection that is free is kept: the default keeps 20, so an operator
        # with its watches streaming and more requests in flight than that closed a
        # connection after each request and paid a TLS handshake (client and server) for
        # the next.
        limits=httpx.Limits(max_connections=KEEPALIVE, max_keepalive_connections=KEEPALIVE),
    )


# --- the port ----------------------------------------------------------------------


def _error(resp: httpx.Response) -> ApiError:
    """The port error for a failed response, from the Status body when there is one."""
    message, reason = resp.text.strip()[:500], ""
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status":
        message = str(body.get("message") or message)
        reason = str(body.get("reason") or "")
    err = from_status(resp.status_code, message or resp.reason_phrase, reason)
    if reason and type(err) is ApiError:
        err.reason = reason
    return err


def _missing_object(resp: httpx.Response, name: str) -> bool:
    """A 404 about *this object*, not about the resource type or the path.

    A GET on a kind whose CRD is absent is also a 404; that must not read as
    "the object does not exist".
    """
    try:
        body = resp.json()
    except ValueError:
        return False
    if not isinstance(body, dict):
        return False
    details = body.get("details")
    return (
        body.get("reason") == "NotFound"
        and isinstance(details, dict)
        and details.get("name") == name
    )


_PARTIAL_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
_PARTIAL_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
_WRITE_VERBS = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}


def request_verb(method: str, path: str, params: Any) -> tuple[str, str]:
    """The apiserver's verb and the resource (plural) of a request: a GET of a collection
    is a list (a watch when it asks to watch), of a named object or its subresource a
    get."""
    parts = [p for p in path.split("/") if p]
    rest = parts[3:] if parts[:1] == ["apis"] else parts[2:]  # past /apis/G/V or /api/V
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]  # a namespaced resource: past namespaces/NS
    resource = rest[0] if rest else ""
    if method != "GET":
        return _WRITE_VERBS.get(method, method.lower()), resource
    if len(rest) >= 2:
        return "get", resource
    watch = str(params.get("watch", "")).lower() in ("true", "1")
    return ("watch" if watch else "list"), resource


class RealCluster:
    """The ``Cluster`` port over a kube-apiserver (see the module docstring)."""

    def __init__(self, http: httpx.Client, *, clock: Clock | None = None) -> None:
        self._http = http
        self._clock: Clock = clock if clock is not None else WallClock()

    @classmethod
    def from_kubeconfig(
        cls, path: str | os.PathLike[str] | None = None, *, context: str | None = None
    ) -> RealCluster:
        """From a kubeconfig file (default: ``$KUBECONFIG``, else ``~/.kube/config``)."""
        if path is None:
            path = os.environ.get("KUBECONFIG") or "~/.kube/config"
        config = KubeConfig.from_file(path).get(context)
        if config is None:
            raise KubeconfigError(f"no context {context!r} in {path}")
        return cls(http_client(config))

    @classmethod
    def in_cluster(cls) -> RealCluster:
        """From the Pod's service account (token, CA, KUBERNETES_SERVICE_HOST/PORT)."""
        config = KubeConfig.from_service_account().get()
        if config is None:
            raise KubeconfigError("no in-cluster configuration")
        return cls(http_client(config))

    def close(self) -> None:
        self._http.close()

    def observe_requests(self, callback: Callable[[str, str], None]) -> None:
        """Call ``callback(verb, resource)`` for every request this client sends, watches
        and streams included (the operator counts them: requests per operation, per idle
        minute). ``verb`` is the apiserver's (get, list, watch, create, patch, update,
        delete), ``resource`` the plural (``leases``, ``ptahschemas``, ``pods``...)."""

        def hook(request: httpx.Request) -> None:
            callback(*request_verb(request.method, request.url.path, request.url.params))

        self._http.event_hooks["request"].append(hook)

    def __enter__(self) -> RealCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reads --

    def get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        resp = self._send("GET", self._path(kind, namespace, name), ok_404=True)
        if resp.status_code == 404:
            if _missing_object(resp, name):
                return None
            raise _error(resp)
        return self._typed(kind, resp.json())

    def get_metadata(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        """Only the object's metadata (PartialObjectMetadata): for a Secret, the operator
        learns its uid and resourceVersion without its data ever crossing the wire."""
        resp = self._send(
            "GET", self._path(kind, namespace, name), ok_404=True, accept=_PARTIAL_METADATA
        )
        if resp.status_code == 404:
            if _missing_object(resp, name):
                return None
            raise _error(resp)
        body = resp.json()
        meta = dict(body.get("metadata") or {})
        meta.pop("managedFields", None)
        return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": meta}

    def list(self, kind: Kind, namespace: str, labels: dict[str, str] | None = None) -> ObjList:
        return self._list(kind, namespace, labels, None)

    def list_metadata(
        self, kind: Kind, namespace: str, labels: dict[str, str] | None = None
    ) -> ObjList:
        """PartialObjectMetadataList: names, labels and versions, never the data."""
        items = self._list(kind, namespace, labels, _PARTIAL_METADATA_LIST)
        return [
            {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": i["metadata"]}
            for i in items
        ]

    def _list(
        self, kind: Kind, namespace: str, labels: dict[str, str] | None, accept: str | None
    ) -> ObjList:
        params: dict[str, str | int] = {"limit": _LIST_PAGE}
        if labels:
            params["labelSelector"] = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        out: ObjList = []
        while True:
            resp = self._send("GET", self._path(kind, namespace), params=params, accept=accept)
            body = resp.json()
            out.extend(self._typed(kind, item) for item in body.get("items") or [])
            cont = (body.get("metadata") or {}).get("continue")
            if not cont:
                return out
            params["continue"] = cont

    def read_log(self, namespace: str, pod: str, container: str) -> str:
        """The container's log. NotFound when the Pod is gone, and also when the server
        answers 400 (no such container, or it has not started yet): there is no log."""
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(pod, safe='')}/log"
        try:
            return self._send("GET", path, params={"container": container}).text
        except ApiError as err:
            if err.status == 400:
                raise NotFound(str(err)) from err
            raise

    # -- writes --

    def create(self, kind: Kind, obj: Obj) -> Obj:
        body = {"apiVersion": kind.api_version, "kind": kind.kind, **obj}
        meta = body.get("metadata") or {}
        if meta.get("resourceVersion"):
            # The server answers 500 (which reads as an uncertain Unavailable); it is a
            # caller bug, so say so plainly, the same way MemoryCluster does.
            raise Invalid("metadata.resourceVersion: must be empty on create")
        namespace = str(meta.get("namespace") or "")
        if kind.namespaced and not namespace:
            raise Invalid(f"{kind.kind} is namespaced: metadata.namespace is required")
        resp = self._send("POST", self._path(kind, namespace), body=body)
        return self._typed(kind, resp.json())

    def patch(
        self, kind: Kind, namespace: str, name: str, patch: Obj, subresource: Subresource = None
    ) -> Obj:
        path = self._path(kind, namespace, name)
        if subresource is not None:
            path += f"/{subresource}"
        resp = self._send("PATCH", path, body=patch, content_type=MERGE_PATCH)
        return self._typed(kind, resp.json())

    def delete(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        propagation: Propagation = "Background",
    ) -> None:
        """Delete; raises NotFound when the object is missing (callers may ignore it)."""
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": propagation,
        }
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        self._send("DELETE", self._path(kind, namespace, name), body=options)

    def now(self) -> datetime:
        return self._clock.now()

    # -- streaming (the operator's watches; not part of the Cluster port) --

    @contextmanager
    def stream(
        self,
        kind: Kind,
        namespace: str,
        params: dict[str, str | int],
        *,
        read_timeout: float | None = None,
        accept: str | None = None,
    ) -> Iterator[httpx.Response]:
        """A streaming GET on ``kind``'s collection (all namespaces when ``namespace`` is
        empty): a list or a watch, per ``params``. Failures map to ``ptah.kube.errors``
        as every other call does. ``accept`` asks for another representation (the
        operator watches Secrets as PartialObjectMetadata so it never receives their
        data)."""
        headers = {"Accept": accept} if accept else {}
        timeout = httpx.Timeout(DEFAULT_TIMEOUT.connect or 10.0, read=read_timeout)
        path = self._path(kind, namespace)
        try:
            with self._http.stream(
                "GET", path, params=params, headers=headers, timeout=timeout
            ) as resp:
                if resp.status_code >= 400:
                    resp.read()
                    raise _error(resp)
                yield resp
        except httpx.TransportError as e:
            raise Unavailable(f"GET {path} (stream): {e!r}", uncertain=True) from e

    # -- plumbing --

    @staticmethod
    def _path(kind: Kind, namespace: str, name: str | None = None) -> str:
        base = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
        if kind.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        elif kind.namespaced and name is not None:
            raise Invalid(f"{kind.kind} is namespaced: a namespace is required")
        path = f"{base}/{kind.plural}"
        return path if name is None else f"{path}/{quote(name, safe='')}"

    @staticmethod
    def _typed(kind: Kind, obj: Obj) -> Obj:
        """Make what the server returned look like what MemoryCluster returns: list items
        arrive without apiVersion/kind (put back), and ``managedFields`` (server-side apply
        bookkeeping Ptah never reads or writes) is dropped."""
        obj.setdefault("apiVersion", kind.api_version)
        obj.setdefault("kind", kind.kind)
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
        return obj

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str | int] | None = None,
        body: Obj | None = None,
        content_type: str = "application/json",
        ok_404: bool = False,
        accept: str | None = None,
    ) -> httpx.Response:
        headers: dict[str, str] = {"Accept": accept} if accept else {}
        content: bytes | None = None
        if body is not None:
            content = json.dumps(body).encode()  # TypeError on non-JSON, as MemoryCluster
            headers["Content-Type"] = content_type
        try:
            resp = self._http.request(method, path, params=params, content=content, headers=headers)
        except httpx.TransportError as e:
            # Connection reset, timeout, TLS failure: a write may or may not have landed.
            raise Unavailable(f"{method} {path}: {e!r}", uncertain=True) from e
        if resp.status_code >= 400 and not (ok_404 and resp.status_code == 404):
            raise _error(resp)
        return resp
