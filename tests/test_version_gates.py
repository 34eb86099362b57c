"""Version gates of routes and methods: 404 for a route a version does not have yet, 405 for a
method a version does not allow on a route it has, declared once per route (both doors)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from webob import Request, Response

from apimw import ConfigError, HTTPProblem, Version
from apimw.microversion import ENVIRON_VERSION, MicroversionMiddleware, VersionGate
from tests.asgi_support import flavours, layered, module_flavour
from tests.wsgi import run

pytest_generate_tests = flavours()
FLAVOUR = "wsgi"

_flavour = module_flavour()

LEGACY = "X-OpenStack-Ironic-API-Version"

#: What a service declares: allocations exist from 1.52 (reads below it: 404), and the
#: version does not allow writing them below 1.52 either (405, Ironic's words).
ALLOCATIONS = VersionGate.route("1.52", what="Allocations")
WRITE_ALLOCATIONS = VersionGate.method(
    "1.52", what="allocations", detail="The API version does not allow {what}"
)
#: a method that left: PUT on /v1/things is allowed up to 1.30, then only GET and DELETE
OLD_PUT = VersionGate.method(None, "1.30", what="Replacing a thing", allow=("get", "delete"))
#: a sub-resource that exists from 1.89, whatever the method
VMEDIA = VersionGate.route("1.89", what="Virtual media")


def service(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    path, method = environ["PATH_INFO"], environ["REQUEST_METHOD"]
    if path == "/v1/allocations":
        (ALLOCATIONS if method == "GET" else WRITE_ALLOCATIONS).check(environ)
    elif path == "/v1/things" and method == "PUT":
        OLD_PUT.check(environ)
    start_response("200 OK", [("Content-Type", "application/json")])
    return [b"{}"]


def stack(app: Any = service) -> Any:
    options = dict(
        service_type="baremetal", min_version="1.1", max_version="1.115",
        legacy_header=LEGACY, error_profile="api-sig",
    )  # fmt: skip
    return layered(FLAVOUR, app, (MicroversionMiddleware, options))


def call(app: Any, method: str, path: str, version: str) -> Response:
    return run(app, Request.blank(path, method=method, headers={LEGACY: version}))


def entry(resp: Response) -> dict[str, Any]:
    return json.loads(resp.body)["errors"][0]  # type: ignore[no-any-return]


def test_a_route_below_its_version_is_not_found_and_a_write_on_it_not_allowed() -> None:
    app = stack()
    read = call(app, "GET", "/v1/allocations", "1.51")
    assert read.status_int == 404
    assert entry(read)["code"] == "microversion.feature-unavailable"
    assert entry(read)["required_version"] == "1.52"
    write = call(app, "POST", "/v1/allocations", "1.42")
    assert write.status_int == 405
    assert entry(write)["detail"] == "The API version does not allow allocations"
    assert entry(write)["served_version"] == "1.42"
    assert "Allow" not in write.headers  # none declared
    for method in ("GET", "POST", "DELETE"):
        assert call(app, method, "/v1/allocations", "1.52").status_int == 200


def test_a_method_that_left_is_not_allowed_after_its_last_version_and_names_what_is() -> None:
    app = stack()
    assert call(app, "PUT", "/v1/things", "1.30").status_int == 200
    refused = call(app, "PUT", "/v1/things", "1.31")
    assert refused.status_int == 405
    assert refused.headers["Allow"] == "GET, DELETE"
    assert entry(refused)["until_version"] == "1.30"
    assert call(app, "GET", "/v1/things", "1.31").status_int == 200


def test_a_wrapped_route_answers_not_found_to_every_method_below_its_version() -> None:
    app = stack(VMEDIA.wrap(service))
    for method in ("GET", "PUT", "POST", "DELETE"):
        assert call(app, method, "/v1/nodes/n/vmedia", "1.88").status_int == 404
        assert call(app, method, "/v1/nodes/n/vmedia", "1.89").status_int == 200


def test_gates_keep_their_kind_and_bounds() -> None:
    assert (ALLOCATIONS.status, WRITE_ALLOCATIONS.status, VMEDIA.status) == (404, 405, 404)
    assert ALLOCATIONS.lo == Version(1, 52) and OLD_PUT.hi == Version(1, 30)
    with pytest.raises(HTTPProblem) as info:
        WRITE_ALLOCATIONS.check({ENVIRON_VERSION: Version(1, 51)})
    assert info.value.status == 405
    with pytest.raises(ConfigError):
        VersionGate.method("1.10", "1.2", what="x")
    with pytest.raises(ConfigError):
        VersionGate.route("1.2", what="x", detail="{what} needs {version}")


def test_allow_given_as_a_string_names_methods_as_a_paste_ini_would() -> None:
    gate = VersionGate.method(None, "1.30", what="Replacing a thing", allow="get, delete")
    assert gate.allow == OLD_PUT.allow == ("GET", "DELETE")
    assert VersionGate.method(None, "1.30", what="Replacing a thing", allow="GET").allow == ("GET",)
