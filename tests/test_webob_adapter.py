"""apimw.webob: a real webob app (``webob.dec.wsgify``) behind the real middlewares."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import webob
import webob.dec
from oslo_middleware.request_id import RequestId

from apimw import webob as adapter
from apimw.errors import HTTPProblem
from apimw.etag import ETagGenerator, ETagMiddleware
from apimw.etag_db import StaleEtag
from apimw.idempotency import IdempotencyMiddleware
from apimw.microversion import MicroversionMiddleware, VersionGate
from tests.wsgi import run

KEY = "a-deployment-secret-of-32-bytes!"
LEGACY = "X-OpenStack-Ironic-API-Version"
GEN = ETagGenerator(key=KEY)


class NodesApp:
    """A small Nova/Placement-style webob app: wsgify views on a class, apimw helpers via ``req``."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, Any]] = {}
        self.created = 0
        self.save("n1", {"name": "n1", "description": "first"})

    def save(self, name: str, doc: dict[str, Any]) -> dict[str, Any]:
        doc = {**doc, "name": name}
        doc["etag"] = GEN.etag(doc, "node")
        self.nodes[name] = doc
        return doc

    def render(self, req: webob.Request, doc: dict[str, Any], status: int = 200) -> webob.Response:
        body = dict(doc)
        if adapter.etags_served(req):
            adapter.set_etag(req, doc["etag"])
        else:
            body.pop("etag")
        body["served"] = str(adapter.served_version(req))
        return webob.Response(json_body=body, status=status)

    @webob.dec.wsgify
    def __call__(self, req: webob.Request) -> Any:
        parts = req.path_info.strip("/").split("/")
        if parts == ["v1", "nodes"] and req.method == "POST":
            return self.create(req)
        if parts == ["v1", "things"]:
            return things(req)
        if len(parts) == 3 and req.method == "GET":
            return self.show(req, parts[2])
        if len(parts) == 3 and req.method == "PATCH":
            return self.patch(req, parts[2])
        if len(parts) == 4 and parts[3] == "history":
            return self.history(req, parts[2])
        return webob.Response(status=404, json_body={"errors": [{"code": "app.not-found"}]})

    def show(self, req: webob.Request, name: str) -> webob.Response:
        if "fields" in req.GET:  # no decorator: the outer middleware renders what this raises
            adapter.check_version(req, "1.7", what="The 'fields' parameter")
        return self.render(req, self.nodes[name])

    @adapter.handle_problems
    def patch(self, req: webob.Request, name: str) -> webob.Response:
        current = self.nodes[name]
        cond = adapter.if_match(req)
        if cond is not None:
            if not cond.matches(current["etag"]):
                raise StaleEtag()
            adapter.mark_enforced(req)
        return self.render(req, self.save(name, {**current, **req.json_body}))

    @adapter.version_gate("1.5", what="Node history")
    def history(self, req: webob.Request, name: str) -> webob.Response:
        return webob.Response(json_body={"history": [], "node": name})

    def create(self, req: webob.Request) -> webob.Response:
        self.created += 1
        replay = adapter.replay(req)
        doc = {"uuid": str(uuid.uuid4()), "status": replay.status, "protected": replay.protected,
               "replayed": replay.replayed}  # fmt: skip
        return webob.Response(json_body=doc, status=201)


@adapter.version_gate(VersionGate("1.3", what="/v1/things", status=404))
def things(req: webob.Request) -> webob.Response:
    return webob.Response(json_body={"things": []})


@pytest.fixture
def stack() -> Iterator[tuple[Any, NodesApp]]:
    """request_id -> microversion (ironic profile) -> idempotency -> etag -> the webob app."""
    app = NodesApp()
    etag = ETagMiddleware(app, hmac_key=KEY, min_version="1.4", enforces="*")
    idem = IdempotencyMiddleware(etag, scope="shared", store=f"memory://webob-{uuid.uuid4().hex}")
    mv = MicroversionMiddleware(idem, service_type="baremetal", min_version="1.1", max_version="1.9",
                                legacy_header=LEGACY, error_profile="ironic")  # fmt: skip
    yield RequestId(mv), app
    idem.close()


def request(path: str, version: str | None = "1.6", **kwargs: Any) -> webob.Request:
    headers = dict(kwargs.pop("headers", {}))
    if version is not None:
        headers[LEGACY] = version
    req = webob.Request.blank(path, headers=headers, **kwargs)
    return req


def both(app: Any, req: webob.Request) -> webob.Response:
    """The answer through webob's get_response, checked equal to the PEP 3333-validated run."""
    copy = req.copy()
    resp = req.get_response(app)
    validated = run(app, copy)
    assert (validated.status, _comparable(validated.body)) == (resp.status, _comparable(resp.body))
    return resp


def _comparable(body: bytes) -> Any:
    """The JSON body without what differs from request to request (oslo's request id)."""
    doc = json.loads(body) if body else None
    for entry in doc.get("errors", []) if isinstance(doc, dict) else []:
        entry.pop("request_id", None)
    return doc


def ironic_error(resp: webob.Response) -> tuple[int, str, str]:
    body = resp.json_body
    return resp.status_int, body["errors"][0]["code"], json.loads(body["error_message"])["faultstring"]


def test_served_version_and_etag_through_the_adapter(stack: Any) -> None:
    app, nodes = stack
    resp = both(app, request("/v1/nodes/n1", "1.6"))
    assert resp.status_int == 200
    assert resp.json_body["served"] == "1.6"
    assert resp.headers["ETag"] == resp.json_body["etag"] == nodes.nodes["n1"]["etag"]
    old = both(app, request("/v1/nodes/n1", "1.2"))  # below the etag microversion
    assert old.json_body["served"] == "1.2" and "etag" not in old.json_body and "ETag" not in old.headers


def test_a_stale_if_match_answers_412_in_the_deployments_profile(stack: Any) -> None:
    app, nodes = stack
    stale = 'W/"' + "0" * 128 + '"'
    req = request("/v1/nodes/n1", method="PATCH", headers={"If-Match": stale}, json_body={"description": "x"})
    resp = both(app, req)
    status, code, faultstring = ironic_error(resp)
    assert (status, code) == (412, "etag.precondition-failed") and "modified" in faultstring
    assert resp.json_body["errors"][0]["request_id"] == resp.headers["X-OpenStack-Request-Id"]
    assert nodes.nodes["n1"]["description"] == "first"


def test_a_matching_if_match_is_enforced_and_answers_the_new_etag(stack: Any) -> None:
    app, nodes = stack
    tag = nodes.nodes["n1"]["etag"]
    req = request("/v1/nodes/n1", method="PATCH", headers={"If-Match": tag}, json_body={"description": "x"})
    resp = req.get_response(app)
    # 200, not the fail-closed 500: mark_enforced(req) reached the middleware
    assert resp.status_int == 200, resp.body
    assert resp.headers["ETag"] == nodes.nodes["n1"]["etag"] != tag


@pytest.mark.parametrize(("version", "status"), [("1.4", 406), ("1.5", 200), ("latest", 200)])
def test_version_gate_on_a_wsgify_method(stack: Any, version: str, status: int) -> None:
    app, _ = stack
    resp = both(app, request("/v1/nodes/n1/history", version))
    assert resp.status_int == status
    if status == 406:
        code, faultstring = ironic_error(resp)[1:]
        assert code == "microversion.feature-unavailable"
        assert "Node history requires microversion 1.5" in faultstring
        assert resp.json_body["errors"][0]["required_version"] == "1.5"
        assert resp.headers["X-OpenStack-Request-Id"].startswith("req-")


@pytest.mark.parametrize(("version", "status"), [("1.2", 404), ("1.3", 200)])
def test_version_gate_sharing_a_gate_on_a_function_route(stack: Any, version: str, status: int) -> None:
    app, _ = stack
    resp = both(app, request("/v1/things", version))
    assert resp.status_int == status
    if status == 404:
        assert ironic_error(resp)[1] == "microversion.feature-unavailable"


def test_a_gate_raised_in_an_undecorated_view_is_rendered_by_the_outer_middleware(stack: Any) -> None:
    app, _ = stack
    resp = both(app, request("/v1/nodes/n1?fields=name", "1.6"))
    assert ironic_error(resp)[:2] == (406, "microversion.feature-unavailable")
    assert both(app, request("/v1/nodes/n1?fields=name", "1.7")).status_int == 200


def test_replay_information_for_the_app_and_for_an_outer_webob_middleware(stack: Any) -> None:
    app, nodes = stack
    seen: list[adapter.Replay] = []

    @webob.dec.wsgify
    def outer(req: webob.Request) -> webob.Response:  # a webob middleware outside the pipeline
        resp = req.get_response(app)
        seen.append(adapter.replay(req))
        return resp

    def post(token: str | None) -> webob.Response:
        headers = {"X-Client-Token": token} if token else {}
        req = request("/v1/nodes", method="POST", headers=headers, json_body={"name": "n2"})
        return req.get_response(outer)

    first, again = post("tok-1"), post("tok-1")
    assert first.status_int == again.status_int == 201
    assert first.json_body == again.json_body  # the stored answer
    assert first.json_body["status"] == "claimed" and first.json_body["protected"] is True
    assert first.json_body["replayed"] is False
    assert again.headers["Idempotent-Replayed"] == "true"
    assert [(r.status, r.replayed) for r in seen] == [("claimed", False), (None, True)]
    assert nodes.created == 1
    plain = post(None)
    assert (plain.json_body["status"], plain.json_body["protected"]) == (None, False)


# -- the adapter without any middleware around the app -------------------------------------------


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_without_middleware_a_gate_renders_the_api_sig_body(method: str) -> None:
    resp = both(NodesApp(), request("/v1/nodes/n1/history", None, method=method))
    assert resp.status_int == 406
    assert resp.content_type == "application/json"
    if method == "GET":
        entry = resp.json_body["errors"][0]
        assert (entry["code"], entry["served_version"]) == ("microversion.feature-unavailable", None)
    else:
        assert resp.body == b""


def test_handle_problems_renders_what_the_view_raises_without_middleware() -> None:
    @webob.dec.wsgify
    @adapter.handle_problems
    def view(req: webob.Request) -> webob.Response:
        raise StaleEtag()

    resp = both(view, request("/v1/nodes/n1", None, method="PATCH"))
    assert resp.status_int == 412 and resp.json_body["errors"][0]["code"] == "etag.precondition-failed"
    # an outer apimw middleware's profile applies (it records it in the environ)
    wrapped = MicroversionMiddleware(view, service_type="baremetal", min_version="1.1", max_version="1.2",
                                     error_profile="ironic")  # fmt: skip
    assert "error_message" in both(wrapped, request("/v1/nodes/n1", None, method="PATCH")).json_body


def test_helpers_outside_the_middlewares() -> None:
    req = webob.Request.blank("/")
    assert adapter.served_version(req) is None
    assert adapter.if_match(req) is None and adapter.if_none_match(req) is None
    assert adapter.etags_served(req) is True
    assert adapter.replay(req) == adapter.Replay(None, False)


def test_version_gate_needs_a_name_or_a_gate() -> None:
    with pytest.raises(TypeError, match="what="):
        adapter.version_gate("1.5")


def test_a_view_without_a_request_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="webob.Request"):
        adapter.version_gate("1.5", what="x")(lambda: None)()


def test_problem_response_is_the_middlewares_body() -> None:
    from apimw.errors import render_problem

    req = webob.Request.blank("/", environ={"apimw.error_profile": "ironic"})
    problem = HTTPProblem(409, "app.conflict", "busy")
    resp = adapter.problem_response(req, problem)
    status, headers, body = render_problem(problem, profile="ironic")
    assert (resp.status, resp.body) == (status, body)
    assert resp.headers["Content-Length"] == str(len(body))


def test_only_apimw_webob_imports_webob() -> None:
    code = (
        "import sys, pkgutil, importlib, apimw\n"
        "assert 'webob' not in sys.modules, 'import apimw imported webob'\n"
        "for info in pkgutil.walk_packages(apimw.__path__, 'apimw.'):\n"
        "    if info.name != 'apimw.webob':\n"
        "        importlib.import_module(info.name)\n"
        "print('webob' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
