"""RealCluster's request shapes and error mapping, against a fake transport (no cluster)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from ptah.kube import kinds
from ptah.kube.errors import AlreadyExists, ApiError, Conflict, Invalid, NotFound, Unavailable
from ptah.kube.real import RealCluster

Handler = Callable[[httpx.Request], httpx.Response]


def port(handler: Handler) -> RealCluster:
    return RealCluster(
        httpx.Client(base_url="https://k8s.test", transport=httpx.MockTransport(handler))
    )


def status(code: int, reason: str, name: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {"kind": "Status", "code": code, "reason": reason, "message": reason}
    if name is not None:
        body["details"] = {"name": name}
    return httpx.Response(code, json=body)


def test_paths_and_patch_content_type() -> None:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, json={"metadata": {"name": "s"}})

    p = port(handler)
    p.patch(kinds.SCHEMA, "ns", "s", {"metadata": {"resourceVersion": "7"}, "status": {}}, "status")
    p.get(kinds.POD, "ns", "p")
    req = seen[0]
    assert req.method == "PATCH"
    assert req.url.path == "/apis/ptah.io/v1alpha1/namespaces/ns/ptahschemas/s/status"
    assert req.headers["Content-Type"] == "application/merge-patch+json"
    assert json.loads(req.content)["metadata"]["resourceVersion"] == "7"
    assert seen[1].url.path == "/api/v1/namespaces/ns/pods/p"


def test_delete_sends_uid_precondition_and_propagation() -> None:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, json={"kind": "Status", "status": "Success"})

    port(handler).delete(kinds.JOB, "ns", "j", uid="u-1", propagation="Foreground")
    body = json.loads(seen[0].content)
    assert seen[0].method == "DELETE"
    assert body["preconditions"] == {"uid": "u-1"}
    assert body["propagationPolicy"] == "Foreground"


def test_get_missing_object_is_none_but_missing_type_raises() -> None:
    assert port(lambda r: status(404, "NotFound", name="s")).get(kinds.SCHEMA, "ns", "s") is None
    with pytest.raises(NotFound):
        port(lambda r: status(404, "NotFound")).get(kinds.SCHEMA, "ns", "s")
    with pytest.raises(NotFound):
        port(lambda r: httpx.Response(404, text="404 page not found")).get(kinds.SCHEMA, "ns", "s")


@pytest.mark.parametrize(
    ("code", "reason", "error"),
    [
        (409, "Conflict", Conflict),
        (409, "AlreadyExists", AlreadyExists),
        (422, "Invalid", Invalid),
        (404, "NotFound", NotFound),
        (503, "ServiceUnavailable", Unavailable),
        (500, "InternalError", Unavailable),
    ],
)
def test_status_errors_map_to_port_errors(code: int, reason: str, error: type[ApiError]) -> None:
    with pytest.raises(error) as info:
        port(lambda r: status(code, reason)).patch(kinds.SCHEMA, "ns", "s", {"spec": {}})
    assert info.value.uncertain == (code >= 500)


def test_transport_error_is_uncertain_unavailable() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=req)

    with pytest.raises(Unavailable) as info:
        port(handler).create(kinds.SCHEMA, {"metadata": {"name": "s", "namespace": "ns"}})
    assert info.value.uncertain


def test_list_pages_and_types_items() -> None:
    pages = [
        {"metadata": {"continue": "tok"}, "items": [{"metadata": {"name": "a"}}]},
        {"metadata": {}, "items": [{"metadata": {"name": "b", "managedFields": []}}]},
    ]
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(200, json=pages[len(seen) - 1])

    items = port(handler).list(kinds.JOB, "ns", {"app": "ptah", "op": "plan"})
    assert [i["metadata"]["name"] for i in items] == ["a", "b"]
    assert all(i["kind"] == "Job" and i["apiVersion"] == "batch/v1" for i in items)
    assert "managedFields" not in items[1]["metadata"]
    assert seen[0].url.params["labelSelector"] == "app=ptah,op=plan"
    assert seen[1].url.params["continue"] == "tok"


def test_read_log_bad_request_is_not_found() -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        assert req.url.path == "/api/v1/namespaces/ns/pods/p/log"
        assert req.url.params["container"] == "runner"
        return status(400, "BadRequest")

    with pytest.raises(NotFound):
        port(handler).read_log("ns", "p", "runner")
    assert port(lambda r: httpx.Response(200, text="frame\n")).read_log("ns", "p", "c") == "frame\n"
