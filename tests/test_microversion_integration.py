"""The three ways to configure MicroversionMiddleware: paste.deploy ini, oslo.config, Flask."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import flask
import pytest
from paste.deploy import loadapp
from webob import Request

from apimw import ConfigError, require_version, served_version
from apimw.microversion import MicroversionMiddleware, wrap_flask
from tests.wsgi import run

LEGACY = "X-OpenStack-Ironic-API-Version"


def plain_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [str(served_version(environ)).encode()]


def app_factory(global_conf: dict[str, str], **local_conf: str) -> Any:
    """paste.app_factory used by the ini files below."""
    return plain_app


def write_ini(tmp_path: Path, filter_lines: str) -> str:
    ini = tmp_path / "api-paste.ini"
    ini.write_text(
        "[pipeline:main]\n"
        "pipeline = microversion app\n\n"
        "[filter:microversion]\n"
        "use = egg:apimw#microversion\n"
        f"{filter_lines}\n\n"
        "[app:app]\n"
        "paste.app_factory = tests.test_microversion_integration:app_factory\n"
    )
    return f"config:{ini}"


IRONIC_FILTER = """service_type = baremetal
min_version = 1.1
max_version = 1.115
legacy_header = X-OpenStack-Ironic-API-Version
error_profile = ironic
pin_max_version = 1.99
discovery = true
discovery_resources = nodes, ports"""


def test_paste_pipeline_from_ini(tmp_path: Path) -> None:
    app = loadapp(write_ini(tmp_path, IRONIC_FILTER))
    resp = run(app, Request.blank("/v1/nodes", headers={LEGACY: "latest"}))
    assert resp.body == b"1.99"  # pin_max_version converted from its ini string
    assert resp.headers["X-OpenStack-Ironic-API-Maximum-Version"] == "1.99"
    resp = run(app, Request.blank("/v1/nodes", headers={LEGACY: "spam"}))
    assert resp.status_int == 406  # ironic profile from the ini
    doc = run(app, Request.blank("/v1", headers={"Host": "h:1"})).json
    assert set(doc) >= {"nodes", "ports", "version"}


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        pytest.param("service_type = baremetal\nmin_version = 1.1\nmax_version = one", "max_version",
                     id="bad-version"),
        pytest.param("service_type = baremetal\nmin_version = 1.1\nmax_version = 1.2\ndiscovery = maybe",
                     "boolean", id="bad-bool"),
        pytest.param("service_type = baremetal\nmin_version = 1.1", "max_version", id="missing-required"),
        pytest.param("service_type = baremetal\nmin_version = 1.1\nmax_version = 1.2\nmax_verison = 1.3",
                     "unknown option 'max_verison'", id="typo"),
        pytest.param("service_type = baremetal\nmin_version = 1.3\nmax_version = 1.2", "below",
                     id="min-above-max"),
    ],
)  # fmt: skip
def test_bad_ini_fails_at_load_with_a_clear_message(tmp_path: Path, lines: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        loadapp(write_ini(tmp_path, lines))


def test_oslo_config_file_values_and_ini_precedence(tmp_path: Path) -> None:
    conf = tmp_path / "service.conf"
    conf.write_text(
        "[apimw_microversion]\n"
        "service_type = baremetal\nmin_version = 1.1\nmax_version = 1.50\n"
        "legacy_header = X-OpenStack-Ironic-API-Version\nerror_profile = ironic\n"
    )
    # the ini names the oslo.config file, and overrides max_version: the ini wins
    app = loadapp(write_ini(tmp_path, f"oslo_config_file = {conf}\nmax_version = 1.40"))
    resp = run(app, Request.blank("/", headers={LEGACY: "latest"}))
    assert resp.body == b"1.40"
    assert run(app, Request.blank("/", headers={LEGACY: "x"})).status_int == 406  # from oslo


def test_oslo_config_generator_emits_a_sample() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "oslo_config.generator", "--namespace", "apimw"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert "[apimw_microversion]" in out.stdout
    assert "#pin_max_version" in out.stdout
    assert "#legacy_header" in out.stdout


def make_flask() -> flask.Flask:
    app = flask.Flask("svc")

    @app.get("/v1/nodes/<name>")
    def node(name: str) -> Any:
        if flask.request.args.get("fields"):
            require_version(flask.request.environ, "1.8", what="Parameter 'fields'")
        return {"name": name, "served": str(served_version(flask.request.environ))}

    return app


def test_flask_one_call_wrapper_with_app_config() -> None:
    app = make_flask()
    app.config["APIMW_MICROVERSION"] = {
        "service_type": "baremetal", "min_version": "1.1", "max_version": "1.115",
        "legacy_header": LEGACY, "error_profile": "ironic",
    }  # fmt: skip
    wrap_flask(app)
    client = app.test_client()
    resp = client.get("/v1/nodes/n1", headers={LEGACY: "1.20"})
    assert resp.json == {"name": "n1", "served": "1.20"}
    assert resp.headers["OpenStack-API-Version"] == "baremetal 1.20"
    assert "X-OpenStack-Ironic-API-Version" in resp.headers["Vary"]
    # a gate raised inside a view becomes the same error body, not Flask's 500
    resp = client.get("/v1/nodes/n1?fields=name", headers={LEGACY: "1.7"})
    assert resp.status_code == 406
    entry = json.loads(resp.data)["errors"][0]
    assert entry["code"] == "microversion.feature-unavailable"
    assert entry["required_version"] == "1.8"
    assert json.loads(json.loads(resp.data)["error_message"])["faultcode"] == "Client"
    assert client.get("/v1/nodes/n1", headers={LEGACY: "2.0"}).status_code == 406


def test_flask_wrapper_keyword_overrides_config() -> None:
    app = make_flask()
    app.config["APIMW_MICROVERSION"] = {"service_type": "baremetal", "min_version": "1.1",
                                        "max_version": "1.10"}  # fmt: skip
    wrap_flask(app, max_version="1.5")
    assert app.test_client().get("/v1/nodes/x", headers={LEGACY: "latest"}).json["served"] == "1.1"
    resp = app.test_client().get("/v1/nodes/x", headers={"OpenStack-API-Version": "baremetal latest"})
    assert resp.json["served"] == "1.5"


def test_flask_wrapper_rejects_bad_config() -> None:
    app = make_flask()
    app.config["APIMW_MICROVERSION"] = {"service_type": "baremetal", "min_version": "1.1"}
    with pytest.raises(ConfigError, match="max_version"):
        wrap_flask(app)


def test_code_wrapping_matches_paste(tmp_path: Path) -> None:
    in_code = MicroversionMiddleware(
        plain_app, service_type="baremetal", min_version="1.1", max_version="1.115",
        legacy_header=LEGACY, error_profile="ironic", pin_max_version="1.99", discovery=True,
        discovery_resources=["nodes", "ports"],
    )  # fmt: skip
    from_ini = loadapp(write_ini(tmp_path, IRONIC_FILTER))
    for headers in ({}, {LEGACY: "latest"}, {LEGACY: "1.100"}, {LEGACY: "bad"}):
        for path in ("/", "/v1", "/v1/nodes"):
            a = run(in_code, Request.blank(path, headers=headers))
            b = run(from_ini, Request.blank(path, headers=headers))
            assert (a.status, a.headerlist, a.body) == (b.status, b.headerlist, b.body)
