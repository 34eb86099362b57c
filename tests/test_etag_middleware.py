"""ETagMiddleware behind the real MicroversionMiddleware, driven in memory (PEP 3333 validated)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from webob import Request

from apimw.errors import ConfigError, HTTPProblem
from apimw.etag import (
    ENVIRON_IF_MATCH,
    ENVIRON_IF_NONE_MATCH,
    ETagGenerator,
    ETagMiddleware,
    IfMatch,
    StaleEtag,
    etags_enabled,
    generator_from_environ,
    mark_enforced,
    set_response_etag,
)
from apimw.microversion import MicroversionMiddleware
from tests.asgi_support import flavours, layered, module_flavour
from tests.wsgi import run

# every test runs against the WSGI middlewares and their ASGI twins (apimw.asgi)
pytest_generate_tests = flavours()
FLAVOUR = "wsgi"

_flavour = module_flavour()

LEGACY = "X-OpenStack-Ironic-API-Version"
KEY = "test-deployment-secret-0123456789"
WIRE = re.compile(r'W/"[0-9a-f]{128}"')
GEN = ETagGenerator(key=KEY)


class NodeApp:
    """A tiny resource API: GET/PATCH/PUT/DELETE /v1/nodes/<name>, auth by header.

    ``X-Auth-Token`` missing -> 401; ``X-Roles: reader`` on a write -> 403; unknown node -> 404.
    The write enforces If-Match itself (as a data layer would) unless ``enforce`` is False.
    """

    def __init__(self, *, enforce: bool = True, response_etag: str = "environ") -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.enforce = enforce
        self.response_etag = response_etag  # "environ" | "body" | "header"
        self.calls = 0
        self.writes = 0
        self.put("n1", {"name": "n1", "extra": {}})

    def put(self, name: str, doc: dict[str, Any]) -> dict[str, Any]:
        doc = {**doc, "name": name}
        doc["etag"] = GEN.etag(doc, "node")
        self.nodes[name] = doc
        return doc

    def current_etag(self, request: dict[str, Any]) -> str | None:
        """The cheap lookup (of the WSGI environ or the ASGI scope): None when missing or not
        visible to this caller."""
        if "PATH_INFO" in request:
            path, token, roles = (request["PATH_INFO"], request.get("HTTP_X_AUTH_TOKEN"),
                                  request.get("HTTP_X_ROLES"))  # fmt: skip
        else:
            headers = dict(request["headers"])
            path, token, roles = request["path"], headers.get(b"x-auth-token"), headers.get(b"x-roles")
            roles = roles.decode() if roles is not None else None
        if token is None or roles == "reader":
            return None
        node = self.nodes.get(path.rsplit("/", 1)[-1])
        return None if node is None else node["etag"]

    def _json(self, start_response: Callable[..., Any], status: str, doc: Any,
              environ: dict[str, Any]) -> list[bytes]:  # fmt: skip
        if isinstance(doc, dict) and "etag" in doc:
            if not etags_enabled(environ):
                doc = {k: v for k, v in doc.items() if k != "etag"}
            elif self.response_etag == "environ":
                set_response_etag(environ, doc["etag"])
        body = json.dumps(doc).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        if self.response_etag == "header" and isinstance(doc, dict) and "etag" in doc:
            headers.append(("ETag", doc["etag"]))
        start_response(status, headers)
        return [] if environ["REQUEST_METHOD"] == "HEAD" else [body]

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        self.calls += 1
        method = environ["REQUEST_METHOD"]
        name = environ["PATH_INFO"].rsplit("/", 1)[-1]
        if "HTTP_X_AUTH_TOKEN" not in environ:
            raise HTTPProblem(401, "auth.missing", "authenticate first")
        if method != "GET" and method != "HEAD" and environ.get("HTTP_X_ROLES") == "reader":
            raise HTTPProblem(403, "auth.forbidden", "readers cannot write")
        node = self.nodes.get(name)
        if node is None and method != "PUT":
            raise HTTPProblem(404, "node.not-found", f"no node {name}")
        if method in ("GET", "HEAD"):
            return self._json(start_response, "200 OK", node, environ)
        cond: IfMatch | None = environ[ENVIRON_IF_MATCH]
        if cond is not None and self.enforce:
            cond.mark_enforced()
            if not cond.matches(None if node is None else node["etag"]):
                raise StaleEtag()
        self.writes += 1
        if method == "DELETE":
            del self.nodes[name]
            start_response("204 No Content", [])
            return []
        patch = json.loads(environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0)) or b"{}")
        new = self.put(name, {**(node or {}), **patch} if method == "PATCH" else patch)
        return self._json(start_response, "200 OK" if node else "201 Created", new, environ)


def stack(app: Any, **etag_options: Any) -> Any:
    etag_options.setdefault("min_version", "1.40")
    etag_options.setdefault("hmac_key", KEY)
    etag_options.setdefault("enforces", "*")  # these apps enforce If-Match (or test the fail-closed check)
    microversion = {"service_type": "baremetal", "min_version": "1.1", "max_version": "1.50",
                    "legacy_header": LEGACY}  # fmt: skip
    return layered(FLAVOUR, app, (MicroversionMiddleware, microversion), (ETagMiddleware, etag_options))


def req(path: str = "/v1/nodes/n1", method: str = "GET", version: str = "1.45", body: Any = None,
        auth: bool = True, **headers: str) -> Request:  # fmt: skip
    hdrs = {LEGACY: version, **{k.replace("_", "-"): v for k, v in headers.items()}}
    if auth:
        hdrs["X-Auth-Token"] = "t"
    r = Request.blank(path, method=method, headers=hdrs)
    if body is not None:
        r.body = json.dumps(body).encode()
        r.content_type = "application/json"
    return r


def code(resp: Any) -> str:
    return str(resp.json["errors"][0]["code"])


# -- ETag on responses --------------------------------------------------------------------


@pytest.mark.parametrize("source", ["environ", "body", "header"])
def test_get_sends_etag_header_equal_to_the_body_field(source: str) -> None:
    node_app = NodeApp(response_etag=source)
    resp = run(stack(node_app), req())
    assert resp.status_int == 200
    assert WIRE.fullmatch(resp.headers["ETag"])
    assert resp.headers["ETag"] == resp.json["etag"] == node_app.nodes["n1"]["etag"]


@pytest.mark.parametrize(
    ("body", "etag"),
    [
        pytest.param(b'{"etag": "W/\\"ab\\"", "n": 1}', 'W/"ab"', id="plain"),
        pytest.param(b'{"\\u0065tag": "W/\\"ab\\""}', 'W/"ab"', id="escaped-key"),
        pytest.param('{"etag": "W/\\"ab\\""}'.encode("utf-16"), 'W/"ab"', id="utf-16"),
        pytest.param('{"etag": "W/\\"ab\\""}'.encode("utf-16-le"), 'W/"ab"', id="utf-16-le-no-bom"),
        pytest.param(b' {"etag": "W/\\"ab\\""}', 'W/"ab"', id="leading-space"),
        pytest.param(b'{"name": "etag", "x": "W/\\"ab\\""}', None, id="a-value-not-a-key"),
        pytest.param(b'{"nodes": []}', None, id="no-etag"),
        pytest.param(b'[{"etag": "W/\\"ab\\""}]', None, id="a-list"),
        pytest.param(b"", None, id="empty"),
        pytest.param(b"{", None, id="one-byte"),
    ],
)
def test_the_etag_is_taken_from_the_json_body_however_it_is_spelled(body: bytes, etag: str | None) -> None:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]

    resp = run(stack(app), req("/v1/nodes"))
    assert resp.status_int == 200 and resp.body == body
    assert resp.headers.get("ETag") == etag


def test_head_gets_the_etag_header_without_a_body() -> None:
    resp = run(stack(NodeApp()), req(method="HEAD"))
    assert resp.status_int == 200
    assert WIRE.fullmatch(resp.headers["ETag"])


def test_no_etag_below_the_etag_version() -> None:
    resp = run(stack(NodeApp(response_etag="body")), req(version="1.39"))
    assert resp.status_int == 200
    assert "ETag" not in resp.headers
    assert "etag" not in resp.json


def test_etag_identical_across_microversions() -> None:
    app = stack(NodeApp())
    tags = {run(app, req(version=v)).headers["ETag"] for v in ("1.40", "1.45", "1.50")}
    assert len(tags) == 1


def test_patch_response_etag_equals_the_next_get() -> None:
    node_app = NodeApp()
    app = stack(node_app)
    first = run(app, req()).headers["ETag"]
    resp = run(app, req(method="PATCH", body={"extra": {"a": 1}}, If_Match=first))
    assert resp.status_int == 200
    assert resp.headers["ETag"] != first
    assert resp.headers["ETag"] == resp.json["etag"] == run(app, req()).headers["ETag"]


def test_put_etag_header_can_be_turned_off() -> None:
    app = stack(NodeApp(), etag_on_put=False)
    resp = run(app, req(path="/v1/nodes/n2", method="PUT", body={"extra": {}}))
    assert resp.status_int == 201
    assert "ETag" not in resp.headers
    assert WIRE.fullmatch(resp.json["etag"])


def test_list_bodies_do_not_leak_an_item_etag_into_the_header() -> None:
    def lister(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        body = json.dumps({"nodes": [{"name": "n1", "etag": GEN.etag({"name": "n1"})}]}).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]

    resp = run(stack(lister), req(path="/v1/nodes"))
    assert resp.status_int == 200
    assert "ETag" not in resp.headers


# -- If-Match on writes ------------------------------------------------------------------


def test_if_match_below_the_etag_version_is_406_and_nothing_is_written() -> None:
    node_app = NodeApp()
    before = dict(node_app.nodes["n1"])
    resp = run(stack(node_app), req(method="PATCH", version="1.39", body={"extra": {"x": 1}},
                                     If_Match=before["etag"]))  # fmt: skip
    assert resp.status_int == 406
    entry = resp.json["errors"][0]
    assert entry["code"] == "microversion.feature-unavailable"
    assert entry["required_version"] == "1.40"
    assert node_app.calls == 0 and node_app.nodes["n1"] == before


@pytest.mark.parametrize(("header", "value"), [("If_Match", ""), ("If_None_Match", "*")])
def test_any_precondition_below_the_etag_version_is_406(header: str, value: str) -> None:
    node_app = NodeApp()
    resp = run(stack(node_app), req(method="DELETE", version="1.1", **{header: value}))
    assert resp.status_int == 406
    assert resp.json["errors"][0]["detail"].startswith(f"The {header.replace('_', '-')} header")
    assert node_app.calls == 0 and "n1" in node_app.nodes


def test_if_match_on_post_is_refused_unless_post_is_an_etag_method() -> None:
    calls: list[Any] = []

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        calls.append(environ.get(ENVIRON_IF_MATCH))
        if calls[-1] is not None:
            mark_enforced(environ)
        start_response("202 Accepted", [("Content-Type", "text/plain")])
        return []

    resp = run(stack(app), req(path="/v1/nodes/n1/vendor", method="POST", body={}, If_Match='W/"x"'))
    assert resp.status_int == 400
    assert code(resp) == "etag.if-match-unsupported"
    too_old = run(stack(app), req(path="/v1/nodes/n1/vendor", method="POST", body={}, version="1.2",
                                  If_Match='W/"x"'))  # fmt: skip
    assert too_old.status_int == 406
    assert calls == []
    with_post = stack(app, methods=["PATCH", "POST"])
    assert run(with_post, req(path="/v1/nodes/n1/vendor", method="POST", body={},
                              If_Match='W/"x"')).status_int == 202  # fmt: skip
    assert calls[0].tags == {"x"}
    assert run(stack(app), req(path="/v1/nodes", method="POST", body={})).status_int == 202


def test_if_match_at_the_etag_version_is_evaluated() -> None:
    node_app = NodeApp()
    tag = node_app.nodes["n1"]["etag"]
    resp = run(stack(node_app), req(method="PATCH", version="1.40", body={"name": "n1"}, If_Match=tag))
    assert resp.status_int == 200


@pytest.mark.parametrize("lookup", [True, False], ids=["precheck", "app-enforces"])
def test_stale_if_match_is_412_and_nothing_is_written(lookup: bool) -> None:
    node_app = NodeApp()
    app = stack(node_app, current_etag=node_app.current_etag if lookup else None)
    stale = node_app.nodes["n1"]["etag"]
    node_app.put("n1", {"extra": {"someone": "else"}})
    resp = run(app, req(method="PATCH", body={"extra": {"me": 1}}, If_Match=stale))
    assert resp.status_int == 412
    assert code(resp) == "etag.precondition-failed"
    assert resp.json["errors"][0]["status"] == 412
    assert node_app.writes == 0
    assert node_app.calls == (0 if lookup else 1)  # the pre-check spares the app


@pytest.mark.parametrize(
    "header",
    [
        pytest.param("{tag}", id="exact"),
        pytest.param('"other", {tag}', id="second-in-list"),
        pytest.param("{strong}", id="strong-form-weak-compare"),
        pytest.param("*", id="star-existing"),
    ],
)
def test_matching_if_match_writes(header: str) -> None:
    node_app = NodeApp()
    tag = node_app.nodes["n1"]["etag"]
    value = header.format(tag=tag, strong=tag[2:])
    resp = run(stack(node_app, current_etag=node_app.current_etag),
               req(method="PATCH", body={"extra": {"ok": True}}, If_Match=value))  # fmt: skip
    assert resp.status_int == 200
    assert node_app.nodes["n1"]["extra"] == {"ok": True}


def test_two_if_match_lines_as_a_server_joins_them() -> None:
    node_app = NodeApp()
    tag = node_app.nodes["n1"]["etag"]
    r = req(method="PATCH", body={"extra": {"two": 2}})
    r.environ["HTTP_IF_MATCH"] = f'W/"nope", {tag}'  # what waitress/gunicorn give for two lines
    assert run(stack(node_app), r).status_int == 200


def test_star_on_a_missing_resource_is_404_not_412() -> None:
    node_app = NodeApp()
    resp = run(stack(node_app, current_etag=node_app.current_etag),
               req(path="/v1/nodes/ghost", method="PATCH", body={}, If_Match="*"))  # fmt: skip
    assert resp.status_int == 404


def test_star_on_put_create_is_412() -> None:
    node_app = NodeApp()
    resp = run(stack(node_app), req(path="/v1/nodes/new", method="PUT", body={}, If_Match="*"))
    assert resp.status_int == 412
    assert "new" not in node_app.nodes


@pytest.mark.parametrize("value", ["garbage", '*, "x"', 'w/"x"', "W/abc"])
def test_malformed_if_match_is_400_and_nothing_is_written(value: str) -> None:
    node_app = NodeApp()
    resp = run(stack(node_app), req(method="PATCH", body={"extra": {"x": 1}}, If_Match=value))
    assert resp.status_int == 400
    assert code(resp) == "etag.if-match-malformed"
    assert node_app.calls == 0


def test_spec_style_unquoted_tag_when_tolerated() -> None:
    node_app = NodeApp()
    tag = node_app.nodes["n1"]["etag"]
    unquoted = "W/" + tag[3:-1]
    resp = run(stack(node_app, accept_unquoted=True),
               req(method="PATCH", body={"extra": {"legacy": 1}}, If_Match=unquoted))  # fmt: skip
    assert resp.status_int == 200


def test_empty_if_match_is_412_not_absent() -> None:
    node_app = NodeApp()
    resp = run(stack(node_app, current_etag=node_app.current_etag),
               req(method="PATCH", body={"extra": {"x": 1}}, If_Match=""))  # fmt: skip
    assert resp.status_int == 412
    assert node_app.writes == 0


def test_strict_rfc9110_mode_never_matches_weak_tags() -> None:
    node_app = NodeApp()
    tag = node_app.nodes["n1"]["etag"]
    resp = run(stack(node_app, strict_rfc9110=True, current_etag=node_app.current_etag),
               req(method="PATCH", body={}, If_Match=tag))  # fmt: skip
    assert resp.status_int == 412


# -- 401/403/404 win over 412 (RFC 9110 §13.2.1) ---------------------------------------------


@pytest.mark.parametrize("lookup", [True, False], ids=["precheck", "app-enforces"])
@pytest.mark.parametrize(
    ("path", "auth", "roles", "status"),
    [
        pytest.param("/v1/nodes/n1", False, None, 401, id="401"),
        pytest.param("/v1/nodes/n1", True, "reader", 403, id="403"),
        pytest.param("/v1/nodes/ghost", True, None, 404, id="404"),
    ],
)
def test_auth_and_existence_errors_win_over_412(
    lookup: bool, path: str, auth: bool, roles: str | None, status: int
) -> None:
    node_app = NodeApp()
    app = stack(node_app, current_etag=node_app.current_etag if lookup else None)
    headers = {"If_Match": 'W/"stale"'}
    if roles:
        headers["X_Roles"] = roles
    resp = run(app, req(path=path, method="PATCH", body={}, auth=auth, **headers))
    assert resp.status_int == status
    assert node_app.writes == 0


# -- 428 policy ------------------------------------------------------------------------------


def test_require_if_match_policy_is_428_no_store() -> None:
    node_app = NodeApp()
    app = stack(node_app, require_if_match=["PATCH /v1/nodes"])
    resp = run(app, req(method="PATCH", body={"extra": {"x": 1}}))
    assert resp.status_int == 428
    assert code(resp) == "etag.if-match-required"
    assert resp.headers["Cache-Control"] == "no-store"
    assert node_app.calls == 0
    # not covered by the policy: proceeds without If-Match (the spec makes it optional)
    assert run(app, req(path="/v1/nodes/n1", method="DELETE")).status_int == 204
    # below the etag version If-Match cannot be sent, so it cannot be required
    node_app.put("n1", {})
    assert run(app, req(method="PATCH", version="1.39", body={})).status_int == 200


def test_require_if_match_star_and_prefix_boundaries() -> None:
    node_app = NodeApp()
    app = stack(node_app, require_if_match=["* /v1/nodes"])
    assert run(app, req(method="DELETE")).status_int == 428
    other = stack(NodeApp(), require_if_match=["* /v1/no"])
    assert run(other, req(method="DELETE")).status_int == 204  # /v1/no is not a prefix of /v1/nodes


def test_no_if_match_proceeds_by_default() -> None:
    node_app = NodeApp()
    resp = run(stack(node_app), req(method="PATCH", body={"extra": {"free": 1}}))
    assert resp.status_int == 200
    assert node_app.nodes["n1"]["extra"] == {"free": 1}


# -- fail closed -----------------------------------------------------------------------------


def test_unacknowledged_if_match_never_returns_2xx() -> None:
    node_app = NodeApp(enforce=False)
    tag = node_app.nodes["n1"]["etag"]
    resp = run(stack(node_app), req(method="PATCH", body={"extra": {"x": 1}}, If_Match=tag))
    assert resp.status_int == 500
    assert code(resp) == "etag.precondition-not-enforced"
    # the same app without If-Match is fine
    assert run(stack(node_app), req(method="PATCH", body={"extra": {"x": 2}})).status_int == 200


def test_acknowledging_through_the_environ_helper() -> None:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        mark_enforced(environ)
        start_response("204 No Content", [])
        return []

    assert run(stack(app), req(method="DELETE", If_Match='W/"x"')).status_int == 204


def test_unacknowledged_error_responses_pass_through() -> None:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        start_response("409 Conflict", [("Content-Type", "text/plain")])
        return [b"conflict"]

    resp = run(stack(app), req(method="DELETE", If_Match='W/"x"'))
    assert resp.status_int == 409 and resp.body == b"conflict"


# -- If-None-Match ---------------------------------------------------------------------------


@pytest.mark.parametrize("lookup", [True, False], ids=["lookup", "response-etag"])
def test_if_none_match_gets_304_except_under_the_ironic_profile(lookup: bool) -> None:
    node_app = NodeApp()
    tag = node_app.nodes["n1"]["etag"]
    current = node_app.current_etag if lookup else None
    for on in (stack(node_app, current_etag=current), stack(node_app, compat="ironic", not_modified=True,
                                                            current_etag=current)):  # fmt: skip
        resp = run(on, req(If_None_Match=tag))
        assert resp.status_int == 304
        assert resp.headers["ETag"] == tag
        assert resp.body == b""
        assert run(on, req(If_None_Match='W/"old"')).status_int == 200
    for off in (stack(node_app, compat="ironic"), stack(node_app, not_modified=False)):
        assert run(off, req(If_None_Match=tag)).status_int == 200


def test_if_none_match_on_writes_is_400_under_the_ironic_profile_else_handed_to_the_app() -> None:
    node_app = NodeApp()
    for refusing in (stack(node_app, compat="ironic"), stack(node_app, if_none_match_on_writes=False)):
        resp = run(refusing, req(method="PATCH", body={}, If_None_Match="*"))
        assert resp.status_int == 400
        assert code(resp) == "etag.if-none-match-unsupported"
    assert node_app.calls == 0
    seen: list[Any] = []

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        seen.append(environ[ENVIRON_IF_NONE_MATCH])
        if "acknowledge" in environ.get("QUERY_STRING", ""):
            mark_enforced(environ)  # the create was conditional on "no current representation"
        start_response("201 Created", [("Content-Type", "text/plain")])
        return []

    on = stack(app)
    assert (
        run(on, req("/v1/nodes/n1?acknowledge", method="PUT", body={}, If_None_Match="*")).status_int == 201
    )
    assert seen[0].any
    # handed to the app, it is enforced like If-Match: a 2xx without the acknowledgement fails closed
    unacknowledged = run(on, req(method="PUT", body={}, If_None_Match="*"))
    assert unacknowledged.status_int == 500 and code(unacknowledged) == "etag.precondition-not-enforced"


# -- PEP 3333 --------------------------------------------------------------------------------


class Tracked:
    """An app iterable that records close() calls."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.closed = 0

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.chunks)

    def close(self) -> None:
        self.closed += 1


@pytest.mark.parametrize(
    ("method", "headers", "ack", "status"),
    [
        pytest.param("GET", {}, False, 200, id="get"),
        pytest.param("PATCH", {"If_Match": 'W/"x"'}, True, 200, id="patch-acked"),
        pytest.param("PATCH", {"If_Match": 'W/"x"'}, False, 500, id="patch-fail-closed"),
        pytest.param("GET", {"If_None_Match": 'W/"x"'}, False, 304, id="get-304"),
    ],
)
def test_close_called_exactly_once(method: str, headers: dict[str, str], ack: bool, status: int) -> None:
    made: list[Tracked] = []

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Tracked:
        if ack:
            mark_enforced(environ)
        set_response_etag(environ, 'W/"x"')
        start_response("200 OK", [("Content-Type", "application/json")])
        made.append(Tracked([b"{", b"}"]))
        return made[0]

    resp = run(stack(app, not_modified=True), req(method=method, body={} if method != "GET" else None,
                                                  **headers))  # fmt: skip
    assert resp.status_int == status
    assert made[0].closed == 1


class LazyTracked(Tracked):
    """An app iterable that calls start_response from its first next() (PEP 3333 allows it)."""

    def __init__(self, start: Callable[[], object], chunks: list[bytes], *, fail: bool = False) -> None:
        super().__init__(chunks)
        self.start = start
        self.fail = fail

    def __iter__(self) -> Iterator[bytes]:
        self.start()
        yield from self.chunks
        if self.fail:
            raise OSError("the backend went away mid-body")


@pytest.mark.parametrize(
    ("ctype", "chunks", "etag"),
    [
        pytest.param("application/json", [b'{"etag": ', b'"W/\\"ab\\""}'], 'W/"ab"', id="json-held"),
        pytest.param("application/json", [b'{"nodes": ', b"[]}"], None, id="json-without-etag"),
        pytest.param("text/plain", [b'{"etag": ', b'"W/\\"ab\\""}'], None, id="not-json-streamed"),
    ],
)
def test_get_with_start_response_called_from_the_iterator(
    ctype: str, chunks: list[bytes], etag: str | None
) -> None:
    made: list[LazyTracked] = []

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> LazyTracked:
        made.append(LazyTracked(lambda: start_response("200 OK", [("Content-Type", ctype)]), chunks))
        return made[0]

    resp = run(stack(app), req("/v1/nodes"))
    assert resp.status_int == 200 and resp.body == b"".join(chunks)
    assert resp.headers.get("ETag") == etag
    assert made[0].closed == 1


def test_get_whose_body_fails_while_held_for_its_etag_closes_the_app_once() -> None:
    made: list[LazyTracked] = []

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> LazyTracked:
        start = lambda: start_response("200 OK", [("Content-Type", "application/json")])  # noqa: E731
        made.append(LazyTracked(start, [b'{"etag": '], fail=True))
        return made[0]

    with pytest.raises(OSError, match="mid-body"):
        run(stack(app), req("/v1/nodes"))
    assert made[0].closed == 1


@pytest.mark.wsgi_only  # PEP 3333: the WSGI middleware raises to its server
def test_get_from_an_app_that_never_calls_start_response_is_an_error() -> None:
    made: list[Tracked] = []

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Tracked:
        made.append(Tracked([b"{}"]))
        return made[0]

    with pytest.raises(RuntimeError, match="without calling start_response"):
        run(stack(app), req("/v1/nodes"), validate=False)
    assert made[0].closed == 1


def test_write_callable_and_lazy_start_response() -> None:
    def writer(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        write = start_response("200 OK", [("Content-Type", "application/json")])
        write(b'{"etag": ')
        return [json.dumps(GEN.etag({"a": 1})).encode(), b"}"]

    def lazy(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
        mark_enforced(environ)
        start_response("200 OK", [("Content-Type", "application/json")])
        yield b'{"etag": '
        yield json.dumps(GEN.etag({"a": 1})).encode() + b"}"

    for app, headers in ((writer, {}), (lazy, {"If_Match": "*"})):
        resp = run(stack(app), req(method="PATCH", body={}, **headers))
        assert resp.status_int == 200
        assert resp.json["etag"] == resp.headers["ETag"] == GEN.etag({"a": 1})


def test_the_wrapped_app_can_be_an_instance_and_can_be_replaced() -> None:
    first, second = NodeApp(), NodeApp(response_etag="body")
    second.put("n1", {"name": "n1", "extra": {"second": True}})
    mw = ETagMiddleware(first, hmac_key=KEY)
    assert run(mw, req()).headers["ETag"] == first.nodes["n1"]["etag"] and mw.app is first
    mw.app = second
    assert run(mw, req()).headers["ETag"] == second.nodes["n1"]["etag"] and mw.app is second
    assert (first.calls, second.calls) == (1, 1)


def test_ironic_error_profile() -> None:
    node_app = NodeApp()
    resp = run(stack(node_app, error_profile="ironic"), req(method="PATCH", body={}, If_Match="bad"))
    assert resp.status_int == 400
    assert json.loads(resp.json["error_message"])["faultstring"].startswith("The If-Match header")
    assert code(resp) == "etag.if-match-malformed"


def test_generator_is_offered_to_the_app() -> None:
    seen: list[ETagGenerator] = []

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        seen.append(generator_from_environ(environ))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return []

    run(stack(app), req())
    assert seen[0].etag({"a": 1}) == GEN.etag({"a": 1})


# -- configuration errors fail at construction ------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"min_version": "one"}, "min_version|since", id="bad-version"),
        pytest.param({"methods": ["GET"]}, "methods", id="bad-method"),
        pytest.param({"require_if_match": ["GET /x"]}, "require_if_match", id="policy-method"),
        pytest.param({"require_if_match": ["PATCH v1"]}, "prefix", id="policy-prefix"),
        pytest.param({"hmac_key": "short"}, "16 bytes", id="short-key"),
        pytest.param({"algorithm": "md5"}, "algorithm", id="bad-algorithm"),
        pytest.param({"error_profile": "xml"}, "profile", id="bad-profile"),
        pytest.param({"current_etag": "no.such.module:f"}, "cannot import", id="bad-lookup"),
        pytest.param({"ignored_fields": ["node-etag"]}, "type:field", id="bad-ignored"),
    ],
)
def test_bad_configuration_fails_at_construction(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        layered(FLAVOUR, NodeApp(), (ETagMiddleware, kwargs))
