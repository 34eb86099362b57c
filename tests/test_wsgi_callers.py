"""Every error an apimw middleware renders reaches the client as that error, whoever calls it.

Each middleware's error answers (400/404/406/409/412/413/428/500/503) are sent through
every kind of WSGI caller a deployment has: webob's ``Request.get_response`` (what every
webob-based middleware outside ours does: keystonemiddleware, oslo.middleware), werkzeug's
test ``Client``, wsgiref's PEP 3333 validator run by wsgiref's own handler, and two real
servers on loopback (werkzeug's and waitress) -- alone, and wrapped by oslo.middleware's
``RequestId`` (a real webob wrapper).  webob and werkzeug's test client re-raise whenever
``start_response`` gets ``exc_info``, so a middleware that passes it while rendering an
error it handled turns the answer into an exception (a 500 under a real server).
"""

from __future__ import annotations

import http.client
import io
import json
import logging
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from wsgiref.handlers import SimpleHandler
from wsgiref.validate import validator

import pytest
from oslo_middleware.request_id import RequestId
from webob import Request
from werkzeug.test import Client

from apimw.errors import HTTPProblem
from apimw.etag import ETagGenerator, ETagMiddleware, mark_enforced, set_response_etag
from apimw.etag_db import ResourceGone, StaleEtag
from apimw.idempotency import IdempotencyMiddleware
from apimw.microversion import MicroversionMiddleware, VersionGate, require_version
from tests.idempotency_support import call, environ_for
from tests.servers import HOST, free_port
from tests.wsgi import LoopbackWaitress

KEY = "a-deployment-secret-of-32-bytes!"
GEN = ETagGenerator(key=KEY)
TAG = 'W/"' + "a" * 128 + '"'
OTHER_TAG = 'W/"' + "b" * 128 + '"'
WAIT = 10.0  # every wait in this module is bounded


@dataclass(frozen=True)
class Req:
    method: str
    path: str = "/v1/nodes/n1"
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    @property
    def code(self) -> str:
        return str(json.loads(self.body)["errors"][0]["code"])

    @property
    def doc(self) -> Any:
        return json.loads(self.body)


def _environ(req: Req) -> dict[str, Any]:
    request = Request.blank(req.path, method=req.method, headers=req.headers)
    if req.body:
        request.body = req.body
        request.content_type = "application/json"
    return request.environ  # type: ignore[no-any-return]


# -- the callers --------------------------------------------------------------------------------


def via_webob(app: Any, req: Req) -> Reply:
    env = _environ(req)
    resp = Request(env).get_response(app)
    return Reply(resp.status_code, list(resp.headerlist), resp.body)


def via_werkzeug_client(app: Any, req: Req) -> Reply:
    ctype = "application/json" if req.body else None
    resp = Client(app).open(req.path, method=req.method, headers=list(req.headers.items()),
                            data=req.body or None, content_type=ctype)  # fmt: skip
    try:
        return Reply(resp.status_code, list(resp.headers.items()), resp.get_data())
    finally:
        resp.close()


class _Handler(SimpleHandler):
    os_environ: dict[str, str] = {}  # noqa: RUF012 - only the request's own environ

    def log_exception(self, exc_info: Any) -> None:  # keep the traceback for the failure message
        self.errors = exc_info  # type: ignore[attr-defined]


def via_wsgiref_validator(app: Any, req: Req) -> Reply:
    """wsgiref's PEP 3333 validator around the app, run by wsgiref's own server handler."""
    env = {k: v for k, v in _environ(req).items() if not k.startswith("webob.")}
    out = io.BytesIO()
    handler = _Handler(env["wsgi.input"], out, io.StringIO(), env, multithread=False, multiprocess=False)
    handler.run(validator(app))
    head, _, body = out.getvalue().partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = [tuple(line.split(": ", 1)) for line in lines[1:]]
    return Reply(int(lines[0].split()[1]), headers, body)  # type: ignore[arg-type]


class _Switch:
    """The app a test server serves: set per test (the servers live for the module)."""

    def __init__(self) -> None:
        self.app: Any = None

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        return self.app(environ, start_response)


def _http(port: int, req: Req) -> Reply:
    conn = http.client.HTTPConnection(HOST, port, timeout=WAIT)
    try:
        ctype = {"Content-Type": "application/json"} if req.body else {}
        conn.request(req.method, req.path, body=req.body or None, headers={**req.headers, **ctype})
        resp = conn.getresponse()
        return Reply(resp.status, resp.getheaders(), resp.read())
    finally:
        conn.close()


@pytest.fixture(scope="module")
def werkzeug_server() -> Iterator[Callable[[Any, Req], Reply]]:
    from werkzeug.serving import make_server

    logger = logging.getLogger("werkzeug")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    switch = _Switch()
    server = make_server(HOST, 0, switch, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="werkzeug-callers", daemon=True)
    thread.start()

    def send(app: Any, req: Req) -> Reply:
        switch.app = app
        return _http(server.server_port, req)

    yield send
    server.shutdown()
    server.server_close()
    thread.join(timeout=WAIT)
    logger.setLevel(level)


@pytest.fixture(scope="module")
def waitress_server() -> Iterator[Callable[[Any, Req], Reply]]:
    logger = logging.getLogger("waitress")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    switch = _Switch()
    server = LoopbackWaitress(switch, name="waitress-callers", threads=2)

    def send(app: Any, req: Req) -> Reply:
        switch.app = app
        return _http(server.port, req)

    yield send
    server.stop()
    logger.setLevel(level)


IN_MEMORY = {
    "webob": via_webob,
    "werkzeug-client": via_werkzeug_client,
    "wsgiref-validator": via_wsgiref_validator,
}
SERVERS = {"werkzeug-server": "werkzeug_server", "waitress": "waitress_server"}
#: Callers that implement PEP 3333's "replace the stored headers" (exc_info before anything is sent).
REPLACING = ["wsgiref-validator", *SERVERS]


def _caller(request: pytest.FixtureRequest, name: str) -> Callable[[Any, Req], Reply]:
    if name in IN_MEMORY:
        return IN_MEMORY[name]
    return request.getfixturevalue(SERVERS[name])  # type: ignore[no-any-return]


@pytest.fixture(params=[*IN_MEMORY, *SERVERS])
def caller(request: pytest.FixtureRequest) -> Callable[[Any, Req], Reply]:
    return _caller(request, request.param)


@pytest.fixture(params=REPLACING)
def replacing_caller(request: pytest.FixtureRequest) -> Callable[[Any, Req], Reply]:
    return _caller(request, request.param)


@pytest.fixture(params=["alone", "request-id"])
def wrap(request: pytest.FixtureRequest) -> Callable[[Any], Any]:
    if request.param == "alone":
        return lambda app: app
    return RequestId


def check(reply: Reply, status: int, code: str, wrapped: bool, *, rendered: bool = True) -> None:
    """*rendered*: the body is apimw's, rendered for this request (not the app's, not a replay)."""
    assert (reply.status, reply.code) == (status, code), reply.body[:300]
    assert reply.header("Content-Type") == "application/json"
    if wrapped:  # the webob wrapper got a response (not an exception) and added its header
        request_id = reply.header("X-OpenStack-Request-Id")
        assert request_id is not None and request_id.startswith("req-")
        if rendered:
            assert reply.doc["errors"][0]["request_id"] == request_id


# -- the apps -----------------------------------------------------------------------------------


def raising(problem: Callable[[], Exception]) -> Any:
    """An app whose handler raises *problem* (as update_if_match raises StaleEtag)."""

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        raise problem()

    return app


def ok_app(environ: dict[str, Any], start_response: Any) -> Any:
    """Answers 200 with a JSON node; acknowledges If-Match only on PUT (not on PATCH)."""
    if environ["REQUEST_METHOD"] == "PUT":
        mark_enforced(environ)
    set_response_etag(environ, TAG)
    body = json.dumps({"name": "n1", "etag": TAG}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def etag_of_body(environ: dict[str, Any], start_response: Any) -> Any:
    """Computes the etag of the request's document (a lone surrogate makes that impossible)."""
    doc = json.loads(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)))
    tag = GEN.etag(doc, "node")
    mark_enforced(environ)
    body = json.dumps({**doc, "etag": tag}).encode("utf-8", "surrogatepass")
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def started_then_raises(problem: Callable[[], Exception]) -> Any:
    """A plain WSGI app that calls start_response and then raises (replacing needs exc_info)."""

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        start_response("200 OK", [("Content-Type", "text/plain")])
        raise problem()

    return app


def own_error_page(environ: dict[str, Any], start_response: Any) -> Any:
    """An app that catches its own error and renders a 500, passing exc_info as PEP 3333 allows."""
    try:
        raise KeyError("boom")
    except KeyError:
        body = json.dumps({"errors": [{"code": "app.crashed"}]}).encode()
        start_response("500 Internal Server Error",
                       [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
                       sys.exc_info())  # fmt: skip
    return [body]


def gated(environ: dict[str, Any], start_response: Any) -> Any:
    require_version(environ, "1.5", what="The 'description' field")
    return ok_app(environ, start_response)


# -- ETagMiddleware ----------------------------------------------------------------------------

ETAG_CASES = [
    pytest.param(lambda: ETagMiddleware(raising(StaleEtag), hmac_key=KEY, enforces="*"),
                 Req("PATCH", headers={"If-Match": TAG}), 412, "etag.precondition-failed",
                 id="412-stale-etag-raised-by-the-app"),
    pytest.param(lambda: ETagMiddleware(raising(ResourceGone), hmac_key=KEY, enforces="*"),
                 Req("DELETE", headers={"If-Match": TAG}), 404, "etag.not-found",
                 id="404-raised-under-if-match"),
    pytest.param(lambda: ETagMiddleware(raising(ResourceGone), hmac_key=KEY),
                 Req("DELETE"), 404, "etag.not-found", id="404-raised-without-if-match"),
    pytest.param(lambda: ETagMiddleware(raising(ResourceGone), hmac_key=KEY),
                 Req("GET"), 404, "etag.not-found", id="404-raised-on-get"),
    pytest.param(lambda: microversion(ETagMiddleware(raising(ResourceGone), hmac_key=KEY, min_version="1.5")),
                 Req("GET"), 404, "etag.not-found", id="404-raised-below-the-etag-version"),
    pytest.param(lambda: ETagMiddleware(raising(ResourceGone), hmac_key=KEY, not_modified=True),
                 Req("GET", headers={"If-None-Match": TAG}), 404, "etag.not-found",
                 id="404-raised-on-conditional-get"),
    pytest.param(lambda: ETagMiddleware(ok_app, hmac_key=KEY),
                 Req("PATCH", headers={"If-Match": "garbage"}), 400, "etag.if-match-malformed",
                 id="400-malformed-if-match"),
    pytest.param(lambda: ETagMiddleware(ok_app, hmac_key=KEY, not_modified=True),
                 Req("GET", headers={"If-None-Match": "garbage"}), 400, "etag.if-none-match-malformed",
                 id="400-malformed-if-none-match"),
    pytest.param(lambda: ETagMiddleware(ok_app, hmac_key=KEY),
                 Req("PATCH", headers={"If-None-Match": TAG}), 400, "etag.if-none-match-unsupported",
                 id="400-if-none-match-on-a-write"),
    pytest.param(lambda: ETagMiddleware(ok_app, hmac_key=KEY),
                 Req("POST", path="/v1/nodes", headers={"If-Match": TAG}), 400, "etag.if-match-unsupported",
                 id="400-if-match-on-post"),
    pytest.param(lambda: ETagMiddleware(ok_app, hmac_key=KEY),
                 Req("PATCH", headers={"If-Match": TAG}), 400, "etag.if-match-unsupported",
                 id="400-if-match-where-the-app-does-not-enforce-it"),
    pytest.param(lambda: ETagMiddleware(ok_app, hmac_key=KEY, require_if_match=["PATCH"], enforces="*"),
                 Req("PATCH"), 428, "etag.if-match-required", id="428-if-match-required"),
    pytest.param(lambda: ETagMiddleware(ok_app, hmac_key=KEY, enforces="*",
                                        current_etag=lambda env: OTHER_TAG),
                 Req("PATCH", headers={"If-Match": TAG}), 412, "etag.precondition-failed",
                 id="412-from-the-pre-check"),
    pytest.param(lambda: microversion(ETagMiddleware(ok_app, hmac_key=KEY, min_version="1.5")),
                 Req("PATCH", headers={"If-Match": TAG}), 406, "microversion.feature-unavailable",
                 id="406-if-match-below-the-etag-version"),
    pytest.param(lambda: ETagMiddleware(ok_app, hmac_key=KEY, enforces="*"),
                 Req("PATCH", headers={"If-Match": TAG}), 500, "etag.precondition-not-enforced",
                 id="500-not-enforced"),
    pytest.param(lambda: ETagMiddleware(etag_of_body, hmac_key=KEY, enforces="*"),
                 Req("PATCH", headers={"If-Match": TAG}, body=b'{"description": "\\ud800"}'),
                 400, "etag.canonicalization-failed", id="400-lone-surrogate-in-the-document"),
    pytest.param(lambda: ETagMiddleware(etag_of_body, hmac_key=KEY),
                 Req("POST", path="/v1/nodes", body=b'{"description": "\\udfff"}'),
                 400, "etag.canonicalization-failed", id="400-lone-surrogate-on-create"),
]  # fmt: skip


@pytest.mark.parametrize(("make", "req", "status", "code"), ETAG_CASES)
def test_etag_errors_reach_every_caller(caller: Any, wrap: Any, make: Any, req: Req, status: int,
                                        code: str) -> None:  # fmt: skip
    reply = caller(wrap(make()), req)
    check(reply, status, code, wrap is RequestId)


def test_a_stale_etag_behind_the_microversion_middleware_keeps_the_version_headers(
    caller: Any, wrap: Any
) -> None:
    app = MicroversionMiddleware(ETagMiddleware(raising(StaleEtag), hmac_key=KEY, enforces="*"),
                                 service_type="baremetal", min_version="1.1", max_version="1.9",
                                 error_profile="ironic")  # fmt: skip
    req = Req("PATCH", headers={"If-Match": TAG, "OpenStack-API-Version": "baremetal 1.4"})
    reply = caller(wrap(app), req)
    check(reply, 412, "etag.precondition-failed", wrap is RequestId)
    assert "faultstring" in json.loads(reply.doc["error_message"])  # the outer middleware's profile
    assert reply.header("OpenStack-API-Version") == "baremetal 1.4"


@pytest.mark.parametrize("method", ["PATCH", "GET"])
def test_an_app_that_renders_its_own_error_with_exc_info_is_not_turned_into_an_exception(
    caller: Any, wrap: Any, method: str
) -> None:
    # Nothing was sent yet, so the middleware has nothing to replace: the app's handled error
    # goes out as its answer (not re-raised by webob / werkzeug's client).
    app = ETagMiddleware(own_error_page, hmac_key=KEY, enforces="*")
    reply = caller(wrap(app), Req(method, headers={"If-Match": TAG} if method == "PATCH" else {}))
    check(reply, 500, "app.crashed", wrap is RequestId, rendered=False)


@pytest.mark.parametrize("method", ["PATCH", "GET", "DELETE"])
def test_a_problem_raised_after_start_response_replaces_the_answer(
    replacing_caller: Any, method: str
) -> None:
    # PEP 3333: a second start_response needs exc_info (without it, the server's AssertionError
    # is a 500); webob and werkzeug's client re-raise on any exc_info, by their own design.
    app = ETagMiddleware(started_then_raises(ResourceGone), hmac_key=KEY, enforces="*")
    reply = replacing_caller(app, Req(method, headers={"If-Match": TAG} if method == "PATCH" else {}))
    check(reply, 404, "etag.not-found", False)


# -- MicroversionMiddleware ---------------------------------------------------------------------


def microversion(app: Any, **options: Any) -> MicroversionMiddleware:
    settings: dict[str, Any] = {"service_type": "baremetal", "min_version": "1.1", "max_version": "1.9",
                                "legacy_header": "X-OpenStack-Ironic-API-Version", **options}  # fmt: skip
    return MicroversionMiddleware(app, **settings)


MICROVERSION_CASES = [
    pytest.param(lambda: microversion(ok_app), Req("GET", headers={"OpenStack-API-Version": "baremetal 1.x"}),
                 400, "microversion.malformed", id="400-malformed"),
    pytest.param(lambda: microversion(ok_app, error_profile="ironic"),
                 Req("GET", headers={"X-OpenStack-Ironic-API-Version": "one"}),
                 406, "microversion.malformed", id="406-malformed-ironic-profile"),
    pytest.param(lambda: microversion(ok_app),
                 Req("GET", headers={"OpenStack-API-Version": "baremetal 1.99"}),
                 406, "microversion.unsupported", id="406-unsupported"),
    pytest.param(lambda: microversion(gated), Req("GET", headers={"OpenStack-API-Version": "baremetal 1.2"}),
                 406, "microversion.feature-unavailable", id="406-gate-raised-by-the-app"),
    pytest.param(lambda: microversion(VersionGate("1.5", what="/v1/things", status=404).wrap(ok_app)),
                 Req("GET", headers={"OpenStack-API-Version": "baremetal 1.2"}),
                 404, "microversion.feature-unavailable", id="404-gate-wrapping-a-route"),
    pytest.param(lambda: microversion(raising(StaleEtag)),
                 Req("PATCH", headers={"OpenStack-API-Version": "baremetal 1.2"}),
                 412, "etag.precondition-failed", id="412-problem-raised-by-the-app"),
]  # fmt: skip


@pytest.mark.parametrize(("make", "req", "status", "code"), MICROVERSION_CASES)
def test_microversion_errors_reach_every_caller(caller: Any, wrap: Any, make: Any, req: Req, status: int,
                                                code: str) -> None:  # fmt: skip
    reply = caller(wrap(make()), req)
    check(reply, status, code, wrap is RequestId)
    assert reply.header("X-OpenStack-Ironic-API-Minimum-Version") == "1.1"


def test_microversion_app_rendering_its_own_error_with_exc_info(caller: Any, wrap: Any) -> None:
    reply = caller(wrap(microversion(own_error_page)), Req("GET"))
    check(reply, 500, "app.crashed", wrap is RequestId, rendered=False)
    assert reply.header("X-OpenStack-Ironic-API-Version") == "1.1"


def test_microversion_problem_raised_after_start_response(replacing_caller: Any) -> None:
    reply = replacing_caller(microversion(started_then_raises(ResourceGone)), Req("GET"))
    check(reply, 404, "etag.not-found", False)
    assert reply.header("X-OpenStack-Ironic-API-Version") == "1.1"


# -- IdempotencyMiddleware ----------------------------------------------------------------------

_OPEN: list[IdempotencyMiddleware] = []


@pytest.fixture(autouse=True)
def _close_stores() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def idempotency(app: Any, **options: Any) -> IdempotencyMiddleware:
    mw = IdempotencyMiddleware(app, store=f"memory://callers-{uuid.uuid4().hex}", **options)
    _OPEN.append(mw)
    return mw


def create_app(environ: dict[str, Any], start_response: Any) -> Any:
    environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    body = b'{"uuid": "n1"}'
    start_response("201 Created", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def big_app(environ: dict[str, Any], start_response: Any) -> Any:
    environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    body = json.dumps({"uuid": "n1", "pad": "x" * 4000}).encode()
    start_response("201 Created", [("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                                   ("Location", "http://127.0.0.1/v1/nodes/n1")])  # fmt: skip
    return [body]


def post(token: str | None = "tok-1",  # noqa: S107 - a test token
          body: bytes = b'{"name": "n1"}', project: str | None = "p1") -> Req:
    headers = {}
    if token is not None:
        headers["X-Client-Token"] = token
    if project is not None:
        headers["X-Project-Id"] = project
    return Req("POST", "/v1/nodes", headers, body)


def _seed(mw: IdempotencyMiddleware, req: Req) -> int:
    """Run *req* once through a plain PEP 3333 driver (the request a retry repeats)."""
    env = environ_for(req.path, method=req.method, body=req.body, token=req.headers.get("X-Client-Token"),
                      project=req.headers.get("X-Project-Id"))  # fmt: skip
    return call(mw, env).status


IDEMPOTENCY_CASES = [
    pytest.param(lambda: idempotency(create_app, require_token=True), None, post(token=None),
                 400, "idempotency.token-required", id="400-token-required"),
    pytest.param(lambda: idempotency(create_app),
                 None, Req("POST", "/v1/nodes", {"X-Client-Token": "a", "Idempotency-Key": '"b"',
                                                 "X-Project-Id": "p1"}, b"{}"),
                 400, "idempotency.token-ambiguous", id="400-token-ambiguous"),
    pytest.param(lambda: idempotency(create_app), None, post(project=None),
                 400, "idempotency.scope-missing", id="400-scope-missing"),
    pytest.param(lambda: idempotency(create_app, max_request_bytes=8),
                 None, post(body=b'{"name": "too long"}'),
                 413, "idempotency.body-too-large", id="413-body-too-large"),
    pytest.param(lambda: idempotency(create_app),
                 post(body=b'{"name": "first"}'), post(body=b'{"name": "other"}'),
                 409, "idempotency.fingerprint-mismatch", id="409-fingerprint-mismatch"),
    pytest.param(lambda: idempotency(big_app, max_response_bytes=1024), post(), post(),
                 409, "idempotency.replay-unavailable", id="409-replay-unavailable"),
    pytest.param(lambda: idempotency(raising(lambda: HTTPProblem(400, "app.invalid", "bad node"))),
                 None, post(), 400, "app.invalid", id="400-raised-by-the-app"),
    pytest.param(lambda: idempotency(raising(lambda: HTTPProblem(400, "app.invalid", "bad node"))),
                 post(), post(), 400, "app.invalid", id="400-raised-by-the-app-replayed"),
]  # fmt: skip


@pytest.mark.parametrize(("make", "first", "req", "status", "code"), IDEMPOTENCY_CASES)
def test_idempotency_errors_reach_every_caller(caller: Any, wrap: Any, make: Any, first: Req | None, req: Req,
                                               status: int, code: str) -> None:  # fmt: skip
    mw = make()
    if first is not None:
        _seed(mw, first)
    replay = first is not None and code == "app.invalid"  # a replay repeats the first answer's body
    check(caller(wrap(mw), req), status, code, wrap is RequestId, rendered=not replay)


def test_idempotency_in_flight_409_reaches_every_caller(caller: Any, wrap: Any) -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(environ: dict[str, Any], start_response: Any) -> Any:
        entered.set()
        release.wait(WAIT)
        return create_app(environ, start_response)

    mw = idempotency(slow)
    first = threading.Thread(target=_seed, args=(mw, post()), daemon=True)
    first.start()
    try:
        assert entered.wait(WAIT)
        reply = caller(wrap(mw), post())
    finally:
        release.set()
        first.join(WAIT)
    check(reply, 409, "idempotency.in-flight", wrap is RequestId)
    assert reply.header("Retry-After") == "1"


def test_idempotency_store_unavailable_503_reaches_every_caller(caller: Any, wrap: Any) -> None:
    mw = IdempotencyMiddleware(create_app, store=f"redis://{HOST}:{free_port()}/0", store_timeout=0.2)
    _OPEN.append(mw)
    check(caller(wrap(mw), post()), 503, "idempotency.store-unavailable", wrap is RequestId)


def test_fail_open_app_rendering_its_own_error_with_exc_info(caller: Any, wrap: Any) -> None:
    # store down, fail_open: the app runs unprotected behind the middleware's header-adding proxy
    mw = IdempotencyMiddleware(own_error_page, store=f"redis://{HOST}:{free_port()}/0", store_timeout=0.2,
                               on_store_error="fail_open")  # fmt: skip
    _OPEN.append(mw)
    reply = caller(wrap(mw), post())
    check(reply, 500, "app.crashed", wrap is RequestId, rendered=False)
    assert reply.header("Idempotency-Status") == "unprotected"


def test_idempotency_app_rendering_its_own_error_with_exc_info(caller: Any, wrap: Any) -> None:
    reply = caller(wrap(idempotency(own_error_page)), post())
    check(reply, 500, "app.crashed", wrap is RequestId, rendered=False)


# -- the whole stack --------------------------------------------------------------------------


def test_the_documented_pipeline_answers_412_under_request_id(caller: Any) -> None:
    """request_id -> microversion -> idempotency -> etag -> app, the stale PATCH of docs/etag.md."""
    etag = ETagMiddleware(raising(StaleEtag), hmac_key=KEY, enforces="*")
    stack = RequestId(microversion(idempotency(etag, methods=["POST", "PATCH"]), error_profile="ironic"))
    req = Req("PATCH", headers={"If-Match": TAG, "X-Client-Token": "t-1", "X-Project-Id": "p1"}, body=b"[]")
    check(caller(stack, req), 412, "etag.precondition-failed", True)
