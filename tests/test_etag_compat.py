"""The etag middleware's compatibility profile, ``compat``: ``rfc9110`` (the default) or ``ironic``.

One option sets the wire behaviour Ironic's clients expect (unquoted ``W/<hex>`` in If-Match,
an ``ETag`` after a PUT, no 304, If-None-Match on a write refused); the five switches it sets
stay as overrides of one behaviour each.  The same through every way of configuring the
middleware: keyword (both doors), paste ini, oslo.config and Flask settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import flask
import pytest
from oslo_config import cfg
from paste.deploy import loadapp
from webob import Request

from apimw import etag
from apimw.errors import ConfigError
from apimw.etag import ETagGenerator, ETagMiddleware, mark_enforced, set_response_etag
from tests.asgi_support import flavours, layered
from tests.wsgi import run

pytest_generate_tests = flavours()

TAG = ETagGenerator(key="compat-deployment-secret-0123").etag({"name": "n1"}, "node")
UNQUOTED = "W/" + TAG[3:-1]


def node_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """One node whose etag is TAG; its writes are conditional (acknowledged) and succeed."""
    if environ["REQUEST_METHOD"] != "GET":
        mark_enforced(environ)
    set_response_etag(environ, TAG)
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "2")])
    return [b"{}"]


def app_factory(global_conf: Any, **local_conf: str) -> Any:
    return node_app


class Wire:
    """What a client sees of the profile: the answers to four requests."""

    def __init__(self, app: Any) -> None:
        put = run(app, Request.blank("/v1/nodes/n1", method="PUT", body=b"{}"))
        self.etag_on_put = "ETag" in put.headers
        got = run(app, Request.blank("/v1/nodes/n1", headers={"If-None-Match": TAG}))
        self.not_modified = got.status_int == 304
        unquoted = run(app, Request.blank("/v1/nodes/n1", method="PATCH", body=b"{}",
                                          headers={"If-Match": UNQUOTED}))  # fmt: skip
        self.accept_unquoted = unquoted.status_int == 200
        create_only = run(app, Request.blank("/v1/nodes/n2", method="PUT", body=b"{}",
                                             headers={"If-None-Match": "*"}))  # fmt: skip
        self.if_none_match_on_writes = create_only.status_int != 400

    def __eq__(self, other: object) -> bool:
        return vars(self) == other

    def __repr__(self) -> str:
        return repr(vars(self))


RFC9110 = {"etag_on_put": False, "not_modified": True, "accept_unquoted": False,
           "if_none_match_on_writes": True}  # fmt: skip
IRONIC = {"etag_on_put": True, "not_modified": False, "accept_unquoted": True,
          "if_none_match_on_writes": False}  # fmt: skip


def keyword(flavour: str, **options: Any) -> Any:
    return layered(flavour, node_app, (ETagMiddleware, {"enforces": "*", **options}))


def test_the_default_profile_is_rfc9110(flavour: str) -> None:
    assert Wire(keyword(flavour)) == RFC9110
    assert Wire(keyword(flavour, compat="rfc9110")) == RFC9110


def test_the_ironic_profile_sets_the_ironic_switches(flavour: str) -> None:
    assert Wire(keyword(flavour, compat="ironic")) == IRONIC
    assert Wire(keyword(flavour, compat=" Ironic ")) == IRONIC


def test_a_switch_given_alone_overrides_its_profile(flavour: str) -> None:
    assert Wire(keyword(flavour, compat="ironic", not_modified=True)) == {**IRONIC, "not_modified": True}
    assert Wire(keyword(flavour, etag_on_put=True)) == {**RFC9110, "etag_on_put": True}
    quoted_only = keyword(flavour, compat="ironic", accept_unquoted=False)
    assert Wire(quoted_only) == {**IRONIC, "accept_unquoted": False}


def test_an_unknown_profile_is_refused(flavour: str) -> None:
    with pytest.raises(ConfigError, match="compat must be one of rfc9110, ironic"):
        keyword(flavour, compat="nova")


def test_the_profile_in_a_paste_ini(tmp_path: Path) -> None:
    ini = tmp_path / "api-paste.ini"

    def load(section: str) -> Any:
        ini.write_text(
            "[pipeline:main]\npipeline = etag app\n\n"
            f"[filter:etag]\nuse = egg:apimw#etag\nenforces = *\n{section}\n\n"
            "[app:app]\npaste.app_factory = tests.test_etag_compat:app_factory\n"
        )
        return loadapp(f"config:{ini}")

    assert Wire(load("compat = ironic")) == IRONIC
    assert Wire(load("compat = ironic\nnot_modified = true")) == {**IRONIC, "not_modified": True}
    assert Wire(load("")) == RFC9110
    with pytest.raises(ConfigError, match=r"\[filter:etag\].*compat"):
        load("compat = nova")


def test_the_profile_in_oslo_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf_file = tmp_path / "host.conf"
    conf_file.write_text("[apimw_etag]\nenforces = *\ncompat = ironic\n")
    conf = cfg.ConfigOpts()
    monkeypatch.setattr(cfg, "CONF", conf)
    conf(["--config-file", str(conf_file)], project="host", default_config_files=[], default_config_dirs=[])
    assert Wire(etag.oslo_hook(node_app)) == IRONIC
    assert "compat" in {opt.name for opt in etag.list_opts()[0][1]}


def test_the_profile_in_flask_settings() -> None:
    app = flask.Flask(__name__)

    @app.route("/v1/nodes/<name>", methods=["GET", "PUT", "PATCH"])
    def node(name: str) -> Any:
        environ = flask.request.environ
        if flask.request.method != "GET":
            mark_enforced(environ)
        set_response_etag(environ, TAG)
        return {}

    app.config["APIMW_ETAG"] = {"enforces": "*", "compat": "ironic"}
    etag.wrap_flask(app)
    assert Wire(app.wsgi_app) == IRONIC
