"""The three ways to configure ETagMiddleware: paste.deploy ini, oslo.config, Flask; plus real HTTP."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import flask
import pytest
from paste.deploy import loadapp
from webob import Request

from apimw.errors import ConfigError
from apimw.etag import (
    ENVIRON_IF_MATCH,
    ETagGenerator,
    ETagMiddleware,
    IfMatch,
    StaleEtag,
    list_opts,
    mark_enforced,
    set_response_etag,
    wrap_flask,
)
from tests.wsgi import run

LEGACY = "X-OpenStack-Ironic-API-Version"
KEY = "integration-secret-0123456789abcdef"
GEN = ETagGenerator(key=KEY)
STORE: dict[str, dict[str, Any]] = {}


def _save(doc: dict[str, Any]) -> dict[str, Any]:
    doc = {**doc}
    doc["etag"] = GEN.etag(doc, "node")
    STORE[doc["name"]] = doc
    return doc


def lookup(environ: dict[str, Any]) -> str | None:
    """Referenced from the ini as ``current_etag = tests.test_etag_integration:lookup``."""
    node = STORE.get(environ["PATH_INFO"].rsplit("/", 1)[-1])
    return None if node is None else str(node["etag"])


def node_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    name = environ["PATH_INFO"].rsplit("/", 1)[-1]
    node = STORE[name]
    if environ["REQUEST_METHOD"] == "PATCH":
        cond: IfMatch | None = environ[ENVIRON_IF_MATCH]
        if cond is not None:
            mark_enforced(environ)
            if not cond.matches(node["etag"]):
                raise StaleEtag()
        node = _save({**node, **json.loads(environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"])))})
    set_response_etag(environ, node["etag"])
    body = json.dumps(node).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def app_factory(global_conf: dict[str, str], **local_conf: str) -> Any:
    return node_app


def write_ini(tmp_path: Path, filter_lines: str) -> str:
    ini = tmp_path / "api-paste.ini"
    ini.write_text(
        "[pipeline:main]\n"
        "pipeline = microversion etag app\n\n"
        "[filter:microversion]\n"
        "use = egg:apimw#microversion\n"
        "service_type = baremetal\nmin_version = 1.1\nmax_version = 1.50\n"
        f"legacy_header = {LEGACY}\n\n"
        "[filter:etag]\n"
        "use = egg:apimw#etag\n"
        f"{filter_lines}\n\n"
        "[app:app]\n"
        "paste.app_factory = tests.test_etag_integration:app_factory\n"
    )
    return f"config:{ini}"


ETAG_FILTER = f"""min_version = 1.40
hmac_key = {KEY}
current_etag = tests.test_etag_integration:lookup
require_if_match = PATCH /v1/nodes
enforces = PATCH /v1/nodes
not_modified = true
error_profile = ironic"""


@pytest.fixture(autouse=True)
def _node() -> Iterator[None]:
    STORE.clear()
    _save({"name": "n1", "extra": {}})
    yield
    STORE.clear()


def patch(tag: str | None, version: str = "1.45", extra: dict[str, Any] | None = None) -> Request:
    headers = {LEGACY: version}
    if tag is not None:
        headers["If-Match"] = tag
    r = Request.blank("/v1/nodes/n1", method="PATCH", headers=headers)
    r.body = json.dumps({"extra": extra or {"x": 1}}).encode()
    r.content_type = "application/json"
    return r


def test_paste_pipeline_from_ini(tmp_path: Path) -> None:
    app = loadapp(write_ini(tmp_path, ETAG_FILTER))
    tag = STORE["n1"]["etag"]
    got = run(app, Request.blank("/v1/nodes/n1", headers={LEGACY: "1.45"}))
    assert got.headers["ETag"] == tag
    assert run(app, Request.blank("/v1/nodes/n1", headers={LEGACY: "1.39"})).headers.get("ETag") is None
    # 304 (not_modified from the ini), 428 (policy), 406 (min_version), 412 (lookup), 200
    conditional_get = Request.blank("/v1/nodes/n1", headers={LEGACY: "1.45", "If-None-Match": tag})
    assert run(app, conditional_get).status_int == 304
    resp = run(app, patch(None))
    assert resp.status_int == 428 and "error_message" in resp.json  # ironic profile from the ini
    assert run(app, patch(tag, version="1.39")).status_int == 406
    assert run(app, patch('W/"stale"')).status_int == 412
    ok = run(app, patch(tag))
    assert ok.status_int == 200 and ok.headers["ETag"] == STORE["n1"]["etag"] != tag


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        pytest.param("min_version = 1.x", "min_version|since", id="bad-version"),
        pytest.param("not_modified = maybe", "boolean", id="bad-bool"),
        pytest.param("hmac_key = short", "16 bytes", id="short-key"),
        pytest.param("min_verison = 1.40", "unknown option 'min_verison'", id="typo"),
        pytest.param("require_if_match = GET /v1", "require_if_match", id="bad-policy"),
        pytest.param("current_etag = tests.nope:f", "cannot import", id="bad-lookup"),
    ],
)
def test_bad_ini_fails_at_load(tmp_path: Path, lines: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        loadapp(write_ini(tmp_path, lines))


def test_oslo_config_file_and_ini_precedence(tmp_path: Path) -> None:
    conf = tmp_path / "service.conf"
    conf.write_text(
        f"[apimw_etag]\nmin_version = 1.40\nhmac_key = {KEY}\nrequire_if_match = PATCH\nenforces = PATCH\n"
    )
    app = loadapp(write_ini(tmp_path, f"oslo_config_file = {conf}\nmin_version = 1.46"))
    tag = STORE["n1"]["etag"]
    assert run(app, patch(None, version="1.46")).status_int == 428  # require_if_match from oslo.config
    assert run(app, patch(tag, version="1.45")).status_int == 406  # the ini's min_version wins
    assert run(app, patch(tag, version="1.46")).status_int == 200


def test_oslo_opts_mark_the_key_secret_and_the_generator_sees_them() -> None:
    ((group, opts),) = list_opts()
    assert group == "apimw_etag"
    by_name = {opt.name: opt for opt in opts}
    assert by_name["hmac_key"].secret is True
    assert "current_etag" not in by_name  # code or paste only
    out = subprocess.run(
        [sys.executable, "-m", "oslo_config.generator", "--namespace", "apimw"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert "[apimw_etag]" in out.stdout
    assert "#require_if_match" in out.stdout


def make_flask() -> flask.Flask:
    app = flask.Flask("svc")

    @app.get("/v1/nodes/<name>")
    def get_node(name: str) -> Any:
        set_response_etag(flask.request.environ, STORE[name]["etag"])
        return STORE[name]

    @app.patch("/v1/nodes/<name>")
    def patch_node(name: str) -> Any:
        cond = flask.request.environ[ENVIRON_IF_MATCH]
        node = STORE[name]
        if cond is not None:
            mark_enforced(flask.request.environ)
            if not cond.matches(node["etag"]):
                raise StaleEtag()  # rendered by the apimw Flask error handler
        node = _save({**node, **(flask.request.get_json() or {})})
        set_response_etag(flask.request.environ, node["etag"])
        return node

    return app


def test_flask_one_call_wrapper() -> None:
    app = make_flask()
    app.config["APIMW_ETAG"] = {"hmac_key": KEY, "require_if_match": "PATCH", "enforces": "PATCH"}
    wrap_flask(app, strict_rfc9110=False)
    client = app.test_client()
    got = client.get("/v1/nodes/n1")
    tag = got.headers["ETag"]
    assert tag == got.json["etag"]
    assert client.patch("/v1/nodes/n1", json={"extra": {"a": 1}}).status_code == 428
    stale = client.patch("/v1/nodes/n1", json={"extra": {"a": 1}}, headers={"If-Match": 'W/"old"'})
    assert stale.status_code == 412
    assert stale.json["errors"][0]["code"] == "etag.precondition-failed"
    ok = client.patch("/v1/nodes/n1", json={"extra": {"a": 1}}, headers={"If-Match": tag})
    assert ok.status_code == 200 and ok.headers["ETag"] == ok.json["etag"] != tag
    assert client.patch("/v1/nodes/n1", json={}, headers={"If-Match": "junk"}).status_code == 400


def test_flask_wrapper_rejects_bad_config() -> None:
    app = make_flask()
    app.config["APIMW_ETAG"] = {"not_modified": "perhaps"}
    with pytest.raises(ConfigError, match="boolean"):
        wrap_flask(app)


def test_two_if_match_header_lines_over_real_http() -> None:
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    etag = ETagMiddleware(node_app, hmac_key=KEY, enforces="*")
    server = make_server("127.0.0.1", 0, etag, handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        tag = STORE["n1"]["etag"]
        conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
        body = json.dumps({"extra": {"http": True}})
        conn.putrequest("PATCH", "/v1/nodes/n1")
        conn.putheader("If-Match", 'W/"not-this-one"')
        conn.putheader("If-Match", tag)  # a second field line
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body.encode())
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.getheader("ETag") == STORE["n1"]["etag"] != tag
        conn.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
