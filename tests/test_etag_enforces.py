"""Which writes the app enforces If-Match on (``enforces``): decided before the app runs.

An If-Match write on a route the app does not declare is refused before the app is
called, so the write never happens and the client never gets a 500 for a write that
did happen.  The fail-closed 500 stays for a route that is declared and then not marked.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from apimw.errors import ConfigError
from apimw.etag import ETagMiddleware, filter_factory, mark_enforced
from apimw.microversion import MicroversionMiddleware
from tests.test_etag_middleware import GEN, LEGACY, NodeApp, code, req
from tests.wsgi import run


class IronicLike:
    """Real Ironic 39: ignores If-Match entirely, applies every write, emits no ETag."""

    def __init__(self) -> None:
        self.writes = 0

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ["REQUEST_METHOD"] in ("GET", "HEAD"):
            start_response("200 OK", [("Content-Type", "application/json")])
            return [b'{"name": "n1"}']
        self.writes += 1
        if environ["REQUEST_METHOD"] == "DELETE":
            start_response("204 No Content", [])
            return []
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b'{"name": "n1"}']


def stack(app: Any, *, profile: str = "ironic", **etag_options: Any) -> Any:
    etag_options.setdefault("min_version", "1.40")
    inner = ETagMiddleware(app, **etag_options)
    return MicroversionMiddleware(inner, service_type="baremetal", min_version="1.1", max_version="1.50",
                                  legacy_header=LEGACY, error_profile=profile)  # fmt: skip


TAG = GEN.etag({"name": "n1"}, "node")


@pytest.mark.parametrize("method", ["PATCH", "PUT", "DELETE"])
@pytest.mark.parametrize("tag", [TAG, f'"stale", {TAG}', '""'], ids=["one", "list", "empty"])
def test_if_match_write_to_an_app_that_declares_nothing_never_reaches_it(method: str, tag: str) -> None:
    ironic = IronicLike()
    resp = run(stack(ironic), req(method=method, body={} if method != "DELETE" else None, If_Match=tag))
    assert resp.status_int == 400
    assert code(resp) == "etag.if-match-unsupported"
    fault = json.loads(resp.json["error_message"])  # the configured (ironic) profile
    assert fault["faultcode"] == "Client" and "If-Match" in fault["faultstring"]
    assert ironic.writes == 0


def test_the_refusal_tells_the_client_nothing_changed_and_how_to_write() -> None:
    resp = run(stack(IronicLike(), profile="api-sig"), req(method="PATCH", body={}, If_Match=TAG))
    detail = resp.json["errors"][0]["detail"]
    assert "nothing was changed" in detail and "without If-Match" in detail


def test_writes_without_if_match_still_reach_an_app_that_declares_nothing() -> None:
    ironic = IronicLike()
    assert run(stack(ironic), req(method="PATCH", body={})).status_int == 200
    assert run(stack(ironic), req(method="DELETE")).status_int == 204
    assert ironic.writes == 2


@pytest.mark.parametrize(("method", "status"), [("PATCH", 200), ("DELETE", 204)])
def test_star_on_an_existing_resource_needs_no_enforcement(method: str, status: int) -> None:
    """``If-Match: *`` holds when the resource exists; a PATCH/DELETE of a missing one is the app's 404."""
    node_app = NodeApp(enforce=False)
    resp = run(stack(node_app), req(method=method, body={} if method == "PATCH" else None, If_Match="*"))
    assert resp.status_int == status
    assert node_app.writes == 1
    missing = run(stack(node_app), req(path="/v1/nodes/nope", method=method, If_Match="*"))
    assert missing.status_int == 404 and node_app.writes == 1


def test_star_on_put_is_refused_when_not_enforced() -> None:
    """PUT may create: ``*`` then needs the app's own check, which it does not declare."""
    node_app = NodeApp(enforce=False)
    resp = run(stack(node_app), req(path="/v1/nodes/new", method="PUT", body={}, If_Match="*"))
    assert resp.status_int == 400 and code(resp) == "etag.if-match-unsupported"
    assert node_app.writes == 0 and "new" not in node_app.nodes


def test_a_declared_route_goes_to_the_app_and_others_are_refused() -> None:
    node_app = NodeApp()
    app = stack(node_app, enforces=["PATCH /v1/nodes"])
    tag = node_app.nodes["n1"]["etag"]
    assert run(app, req(method="PATCH", body={"extra": {"x": 1}}, If_Match=tag)).status_int == 200
    assert node_app.writes == 1
    stale = run(app, req(method="PATCH", body={"extra": {"x": 2}}, If_Match=tag))
    assert stale.status_int == 412 and node_app.writes == 1
    other = run(app, req(method="DELETE", If_Match=node_app.nodes["n1"]["etag"]))
    assert other.status_int == 400 and code(other) == "etag.if-match-unsupported"
    assert node_app.writes == 1 and "n1" in node_app.nodes
    ports = run(app, req(path="/v1/ports/n1", method="PATCH", body={}, If_Match=tag))
    assert ports.status_int == 400 and node_app.writes == 1


def test_declared_and_not_marked_is_still_fail_closed() -> None:
    node_app = NodeApp(enforce=False)
    resp = run(stack(node_app, enforces="*"), req(method="PATCH", body={"extra": {"x": 1}},
                                                  If_Match=node_app.nodes["n1"]["etag"]))  # fmt: skip
    assert resp.status_int == 500 and code(resp) == "etag.precondition-not-enforced"


def enforced_nodes(request: dict[str, Any]) -> bool:
    """An ``enforces`` callable of the WSGI environ or the ASGI scope: only node writes are
    conditional in the data layer."""
    path = request["PATH_INFO"] if "PATH_INFO" in request else request["path"]
    return str(path).startswith("/v1/nodes/")


def test_enforces_as_a_callable_of_the_environ() -> None:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        mark_enforced(environ)
        start_response("204 No Content", [])
        return []

    for enforces in (enforced_nodes, "tests.test_etag_enforces:enforced_nodes"):
        wrapped = stack(app, enforces=enforces)
        assert run(wrapped, req(method="DELETE", If_Match='W/"x"')).status_int == 204
        refused = run(wrapped, req(path="/v1/ports/p1", method="DELETE", If_Match='W/"x"'))
        assert refused.status_int == 400


@pytest.mark.parametrize(
    ("setting", "enforced"),
    [
        pytest.param("*", True, id="star"),
        pytest.param("PATCH /v1/nodes, DELETE", True, id="rules"),
        pytest.param("PATCH /v1/ports", False, id="other-route"),
        pytest.param("tests.test_etag_enforces:enforced_nodes", True, id="callable"),
        pytest.param("", False, id="empty"),
    ],
)
def test_enforces_from_a_paste_string(setting: str, enforced: bool, tmp_path: Path) -> None:
    node_app = NodeApp()
    inner = filter_factory({}, min_version="1.40", enforces=setting)(node_app)
    app = MicroversionMiddleware(inner, service_type="baremetal", min_version="1.1", max_version="1.50",
                                 legacy_header=LEGACY)  # fmt: skip
    resp = run(app, req(method="PATCH", body={}, If_Match=node_app.nodes["n1"]["etag"]))
    assert resp.status_int == (200 if enforced else 400)
    assert node_app.writes == (1 if enforced else 0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"enforces": ["GET /x"]}, "enforces: 'GET'", id="method"),
        pytest.param({"enforces": ["PATCH v1"]}, "enforces: path prefix", id="prefix"),
        pytest.param({"enforces": "no.such.module:f"}, "cannot import", id="callable"),
        pytest.param({"require_if_match": ["PATCH /v1/nodes"]}, "not in enforces", id="required-unenforced"),
        pytest.param(
            {"require_if_match": ["*"], "enforces": ["PATCH"]}, "not in enforces", id="star-required"
        ),
    ],
)
def test_bad_enforces_fails_at_construction(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ETagMiddleware(NodeApp(), **kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"require_if_match": ["PATCH /v1/nodes"], "enforces": ["PATCH /v1"]}, id="prefix"),
        pytest.param({"require_if_match": ["DELETE"], "enforces": ["*"]}, id="star"),
        pytest.param({"require_if_match": ["*"], "enforces": enforced_nodes}, id="callable"),
    ],
)
def test_required_routes_that_are_enforced_are_accepted(kwargs: dict[str, Any]) -> None:
    ETagMiddleware(NodeApp(), **kwargs)


# -- mistakes caught at build time or on the first request -------------------


def test_the_etag_middleware_outside_the_microversion_one_fails_at_build_time() -> None:
    class Between:  # a middleware between the two, keeping its app as `app`
        def __init__(self, app: Any) -> None:
            self.app = app

    inner = MicroversionMiddleware(NodeApp(), service_type="baremetal", min_version="1.1", max_version="1.50")
    for chain in (inner, Between(inner)):
        with pytest.raises(ConfigError, match="inside the microversion middleware") as caught:
            ETagMiddleware(chain, min_version="1.40")
        assert "\n" not in str(caught.value)
    # the same through paste: the error names the order
    with pytest.raises(ConfigError, match="order"):
        filter_factory({}, min_version="1.40")(inner)


def test_min_version_without_a_microversion_middleware_is_a_loud_error_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    node_app = NodeApp()
    app = ETagMiddleware(node_app, min_version="1.40", enforces="*", error_profile="ironic")
    with caplog.at_level("ERROR", logger="apimw.etag"):
        answers = [run(app, req(method=m, body={} if m == "PATCH" else None))
                   for m in ("GET", "PATCH", "GET")]  # fmt: skip
    assert [a.status_int for a in answers] == [500, 500, 500]
    assert {code(a) for a in answers} == {"apimw.misconfigured"}
    assert "microversion" in json.loads(answers[0].json["error_message"])["faultstring"]
    assert node_app.calls == 0  # nothing is served (or written) at an unknown version
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "\n" not in errors[0].getMessage()
    assert "MicroversionMiddleware" in errors[0].getMessage()


def test_without_min_version_no_microversion_middleware_is_needed() -> None:
    node_app = NodeApp()
    app = ETagMiddleware(node_app, enforces="*")
    assert run(app, req()).headers["ETag"] == node_app.nodes["n1"]["etag"]


def test_stale_etag_is_public_in_apimw_etag_and_needs_no_sqlalchemy() -> None:
    import subprocess
    import sys

    code_ = (
        "import sys; sys.modules['sqlalchemy'] = None\n"
        "from apimw.etag import ETagMiddleware, StaleEtag\n"
        "def app(environ, start_response):\n"
        "    raise StaleEtag()\n"
        "answer = []\n"
        "env = {'REQUEST_METHOD': 'PATCH', 'PATH_INFO': '/n', 'HTTP_IF_MATCH': '\"x\"'}\n"
        "etag = ETagMiddleware(app, enforces='*', error_profile='ironic')\n"
        "body = etag(env, lambda s, h: answer.append(s))\n"
        "import json; doc = json.loads(b''.join(body))\n"
        "print(answer[0], doc['errors'][0]['code'], 'faultstring' in doc['error_message'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code_], capture_output=True, text=True, check=True,
                         timeout=60)  # fmt: skip
    assert out.stdout.split() == ["412", "Precondition", "Failed", "etag.precondition-failed", "True"]


def test_etag_db_reexports_the_same_stale_etag() -> None:
    import apimw.etag
    import apimw.etag_db

    assert apimw.etag_db.StaleEtag is apimw.etag.StaleEtag
    assert "StaleEtag" in apimw.etag.__all__ and "StaleEtag" in apimw.etag_db.__all__


# -- the sans-IO policy a future ASGI middleware shares ------------------------------------------

METHODS = frozenset({"PUT", "PATCH", "DELETE"})


@pytest.mark.parametrize(
    ("entries", "method", "path", "matches"),
    [
        pytest.param(["*"], "DELETE", "/anything", True, id="star"),
        pytest.param(["PATCH /v1/nodes"], "PATCH", "/v1/nodes", True, id="the-prefix-itself"),
        pytest.param(["PATCH /v1/nodes/"], "PATCH", "/v1/nodes/n1", True, id="trailing-slash"),
        pytest.param(["PATCH /v1/nodes"], "PATCH", "/v1/nodes2", False, id="prefix-ends-at-a-slash"),
        pytest.param(["PATCH /v1/nodes"], "PUT", "/v1/nodes/n1", False, id="other-method"),
        pytest.param([], "PATCH", "/v1/nodes/n1", False, id="empty"),
    ],
)
def test_route_matches(entries: list[str], method: str, path: str, matches: bool) -> None:
    from apimw._etag_policy import parse_policy, route_matches

    assert route_matches(parse_policy(entries, METHODS, option="enforces"), method, path) is matches


@pytest.mark.parametrize(
    ("required", "enforced", "missing"),
    [
        pytest.param(["PATCH /v1/nodes"], ["PATCH /v1"], [], id="covered-by-a-shorter-prefix"),
        pytest.param(["PATCH"], ["PATCH /v1"], ["PATCH"], id="everywhere-needs-everywhere"),
        pytest.param(["*"], ["PATCH", "PUT", "DELETE"], [], id="star-by-each-method"),
        pytest.param(["*"], ["PATCH", "PUT"], ["*"], id="star-missing-one"),
        pytest.param(["DELETE /v1/ports"], ["* /"], [], id="slash-is-everywhere"),
    ],
)
def test_uncovered_required_routes(required: list[str], enforced: list[str], missing: list[str]) -> None:
    from apimw._etag_policy import parse_policy, uncovered

    rules = [parse_policy(x, METHODS, option="o") for x in (required, enforced)]
    assert uncovered(rules[0], rules[1], METHODS) == missing
