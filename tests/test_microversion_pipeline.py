"""Finding a microversion middleware below an inner apimw middleware, when the pipeline is built.

An apimw middleware that reads the served version (etag's ``min_version``) placed outside the
microversion middleware never sees one; :func:`apimw.microversion.wraps_microversion` lets it
refuse that order at load time, through the middlewares between (oslo.middleware's keep their
app as ``application``) and on both doors: a paste.deploy pipeline, Flask's ``wrap_flask`` and
an ASGI stack with the etag middleware outside fail to build, with a ConfigError naming the order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import flask
import pytest
from oslo_middleware.request_id import RequestId
from paste.deploy import loadapp
from webob import Request

import apimw.asgi
import apimw.etag
import apimw.idempotency
import apimw.microversion
from apimw.errors import ConfigError
from apimw.microversion import MicroversionMiddleware, wraps_microversion
from tests.wsgi import run

OPTIONS: dict[str, Any] = {"service_type": "baremetal", "min_version": "1.1", "max_version": "1.2"}


def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [])
    return [b""]


async def asgi_app(scope: Any, receive: Any, send: Any) -> None:
    raise AssertionError("never called")


def test_a_microversion_middleware_right_below_is_found() -> None:
    assert wraps_microversion(MicroversionMiddleware(app, **OPTIONS))
    assert wraps_microversion(apimw.asgi.MicroversionMiddleware(asgi_app, **OPTIONS))


def test_one_below_an_oslo_middleware_is_found() -> None:
    # paste: "pipeline = etag request_id microversion app" builds etag over request_id over this
    assert wraps_microversion(RequestId(MicroversionMiddleware(app, **OPTIONS)))


def test_a_pipeline_without_one_or_with_one_outside_has_none_below() -> None:
    assert not wraps_microversion(app)
    assert not wraps_microversion(RequestId(app))
    assert not wraps_microversion(asgi_app)


def test_a_cycle_ends() -> None:
    class Loop:
        def __init__(self) -> None:
            self.app = self

    assert not wraps_microversion(Loop())


# -- the etag middleware outside the microversion middleware: refused when the pipeline is built --

ETAG_OUTSIDE = "etag request_id microversion app"


def app_factory(global_conf: Any, **local_conf: str) -> Any:
    def listing(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "13")])
        return [b'{"nodes": []}']

    return listing


def paste_ini(tmp_path: Path, pipeline: str) -> Path:
    ini = tmp_path / "api-paste.ini"
    ini.write_text(
        f"[pipeline:main]\npipeline = {pipeline}\n\n"
        "[filter:request_id]\nuse = egg:oslo.middleware#request_id\n\n"
        "[filter:microversion]\nuse = egg:apimw#microversion\nservice_type = baremetal\n"
        "min_version = 1.1\nmax_version = 1.2\n\n"
        "[filter:etag]\nuse = egg:apimw#etag\nmin_version = 1.2\n\n"
        "[app:app]\npaste.app_factory = tests.test_microversion_pipeline:app_factory\n"
    )
    return ini


def test_a_paste_pipeline_with_etag_outside_microversion_fails_to_load(tmp_path: Path) -> None:
    ini = paste_ini(tmp_path, ETAG_OUTSIDE)
    with pytest.raises(ConfigError) as raised:
        loadapp(f"config:{ini}")
    message = str(raised.value)
    assert message.startswith(f"[filter:etag] in {ini}: the etag middleware is outside the microversion")
    assert "microversion -> auth -> idempotency -> etag -> app" in message


def test_the_documented_paste_order_loads_and_answers(tmp_path: Path) -> None:
    loaded = loadapp(f"config:{paste_ini(tmp_path, 'request_id microversion etag app')}")
    answer = run(loaded, Request.blank("/v1/nodes", headers={"OpenStack-API-Version": "baremetal 1.2"}))
    assert answer.status_int == 200
    assert answer.headers["OpenStack-API-Version"] == "baremetal 1.2"


def test_wrap_flask_with_etag_outside_microversion_is_refused() -> None:
    flask_app = flask.Flask(__name__)
    flask_app.config["APIMW_MICROVERSION"] = OPTIONS
    apimw.microversion.wrap_flask(flask_app)
    with pytest.raises(ConfigError, match="the etag middleware is outside the microversion middleware"):
        apimw.etag.wrap_flask(flask_app)  # second: outside the first


def test_flask_in_the_documented_order_builds() -> None:
    flask_app = flask.Flask(__name__)
    flask_app.config["APIMW_MICROVERSION"] = OPTIONS
    apimw.etag.wrap_flask(flask_app)  # first: the innermost
    apimw.microversion.wrap_flask(flask_app)
    assert isinstance(flask_app.wsgi_app, MicroversionMiddleware)


def test_the_asgi_etag_middleware_outside_microversion_is_refused() -> None:
    class Between:  # an ASGI middleware between the two, keeping its app as Starlette's do
        def __init__(self, app: Any) -> None:
            self.app = app

    with pytest.raises(ConfigError, match="the etag middleware is outside the microversion middleware"):
        apimw.asgi.ETagMiddleware(Between(apimw.asgi.MicroversionMiddleware(asgi_app, **OPTIONS)))
    inside = apimw.asgi.MicroversionMiddleware(apimw.asgi.ETagMiddleware(asgi_app), **OPTIONS)
    assert wraps_microversion(inside)


def test_the_asgi_door_refuses_it_under_starlette() -> None:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware

    # Starlette's list runs from the first to the last: etag first is etag outside
    built = Starlette(middleware=[Middleware(apimw.asgi.ETagMiddleware),
                                  Middleware(apimw.asgi.MicroversionMiddleware, **OPTIONS)])  # fmt: skip
    with pytest.raises(ConfigError, match="the etag middleware is outside the microversion middleware"):
        built.build_middleware_stack()


# -- the idempotency middleware outside the microversion middleware: refused alike -------------


def test_a_paste_pipeline_with_idempotency_outside_microversion_fails_to_load(tmp_path: Path) -> None:
    ini = paste_ini(tmp_path, "idempotency request_id microversion app")
    ini.write_text(ini.read_text() + "\n[filter:idempotency]\nuse = egg:apimw#idempotency\nscope = shared\n")
    with pytest.raises(ConfigError) as raised:
        loadapp(f"config:{ini}")
    assert str(raised.value).startswith(
        f"[filter:idempotency] in {ini}: the idempotency middleware is outside the microversion"
    )


def test_the_documented_paste_order_with_idempotency_loads_and_replays(tmp_path: Path) -> None:
    ini = paste_ini(tmp_path, "request_id microversion idempotency etag app")
    ini.write_text(ini.read_text() + "\n[filter:idempotency]\nuse = egg:apimw#idempotency\nscope = shared\n")
    loaded = loadapp(f"config:{ini}")
    headers = {"OpenStack-API-Version": "baremetal 1.2", "X-Client-Token": "a-token-of-the-pipeline",
               "Content-Type": "application/json"}  # fmt: skip
    first, again = (run(loaded, Request.blank("/v1/nodes", method="POST", headers=headers, body=b"{}"))
                    for _ in range(2))  # fmt: skip
    assert (first.status_int, again.status_int) == (200, 200)
    assert "Idempotent-Replayed" not in first.headers
    assert again.headers["Idempotent-Replayed"] == "true"


@pytest.mark.parametrize("door", ["wsgi", "asgi"])
def test_the_idempotency_middleware_outside_microversion_is_refused(door: str) -> None:
    if door == "wsgi":
        inner: Any = MicroversionMiddleware(app_factory({}), **OPTIONS)
        idempotency: Any = apimw.idempotency.IdempotencyMiddleware
    else:
        inner = apimw.asgi.MicroversionMiddleware(asgi_app, **OPTIONS)
        idempotency = apimw.asgi.IdempotencyMiddleware
    with pytest.raises(ConfigError, match="the idempotency middleware is outside the microversion"):
        idempotency(inner, scope="shared")
    outer = MicroversionMiddleware if door == "wsgi" else apimw.asgi.MicroversionMiddleware
    assert wraps_microversion(outer(idempotency(inner.app, scope="shared"), **OPTIONS))


# -- the etag middleware outside the idempotency middleware: refused alike -----------------------
#
# A replayed write never reaches the app, so no data layer enforces its If-Match again: the etag
# middleware outside would fail every replayed conditional write closed (500).


def test_a_paste_pipeline_with_etag_outside_idempotency_fails_to_load(tmp_path: Path) -> None:
    ini = paste_ini(tmp_path, "request_id microversion etag idempotency app")
    ini.write_text(ini.read_text() + "\n[filter:idempotency]\nuse = egg:apimw#idempotency\nscope = shared\n")
    with pytest.raises(ConfigError) as raised:
        loadapp(f"config:{ini}")
    message = str(raised.value)
    assert message.startswith(f"[filter:etag] in {ini}: the etag middleware is outside the idempotency")
    assert "microversion -> auth -> idempotency -> etag -> app" in message


def test_wrap_flask_with_etag_outside_idempotency_is_refused() -> None:
    flask_app = flask.Flask(__name__)
    flask_app.config["APIMW_IDEMPOTENCY"] = {"scope": "shared"}
    apimw.idempotency.wrap_flask(flask_app)
    with pytest.raises(ConfigError, match="the etag middleware is outside the idempotency middleware"):
        apimw.etag.wrap_flask(flask_app)


@pytest.mark.parametrize("door", ["wsgi", "asgi"])
def test_the_etag_middleware_outside_idempotency_is_refused(door: str) -> None:
    class Between:  # a middleware between the two, keeping its app as Starlette's and oslo's do
        def __init__(self, app: Any) -> None:
            self.application = app

    if door == "wsgi":
        idempotency: Any = apimw.idempotency.IdempotencyMiddleware
        etag: Any = apimw.etag.ETagMiddleware
        inner: Any = app
    else:
        idempotency, etag, inner = apimw.asgi.IdempotencyMiddleware, apimw.asgi.ETagMiddleware, asgi_app
    with pytest.raises(ConfigError, match="the etag middleware is outside the idempotency middleware"):
        etag(Between(idempotency(inner, scope="shared")), enforces="PATCH")
    idempotency(etag(inner, enforces="PATCH"), scope="shared")  # the documented order builds


def test_the_asgi_door_refuses_etag_outside_idempotency_under_starlette() -> None:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware

    built = Starlette(middleware=[Middleware(apimw.asgi.MicroversionMiddleware, **OPTIONS),
                                  Middleware(apimw.asgi.ETagMiddleware, enforces="PATCH"),
                                  Middleware(apimw.asgi.IdempotencyMiddleware, scope="shared")])  # fmt: skip
    with pytest.raises(ConfigError, match="the etag middleware is outside the idempotency middleware"):
        built.build_middleware_stack()
