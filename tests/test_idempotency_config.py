"""Configuration of the idempotency middleware as an operator meets it.

* the ``store`` option may carry a password: secret for oslo.config, never echoed;
* a store that cannot be reached at startup gives one warning (and the service keeps running);
* a token without an authenticated project: the 400 says how to fix the pipeline;
* a bad option in a paste filter names the section the user wrote.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from paste.deploy import loadapp

from apimw import ConfigError
from apimw.idempotency import IdempotencyMiddleware, list_opts
from tests.idempotency_support import CreateApp, post
from tests.servers import HOST, Server, free_port

SECRET = "hunter2-s3cr3t"  # noqa: S105 - a test password


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response("201 Created", [("Content-Type", "application/json")])
    return [b"{}"]


def app_factory(global_conf: dict[str, str], **local_conf: str) -> Any:
    """paste.app_factory for the ini files below."""
    return app


def traced_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    environ["wsgi.input"].read()
    start_response("201 Created", [("X-Trace-Id", "first"), ("X-Span-Id", "first"), ("Request-Id", "first")])
    return [b"{}"]


def traced_app_factory(global_conf: dict[str, str], **local_conf: str) -> Any:
    return traced_app


# -- the store URL is a secret --------------------------------------------------------------


def test_store_option_is_secret_for_oslo_config() -> None:
    opts = dict((opt.name, opt) for _, group in list_opts() for opt in group)
    assert opts["store"].secret is True


def test_oslo_config_log_opt_values_masks_the_store_password(caplog: pytest.LogCaptureFixture) -> None:
    from oslo_config import cfg

    conf = cfg.ConfigOpts()
    for group, opts in list_opts():
        conf.register_opts(opts, group=group)
    conf([], project="apimw-test")
    conf.set_override("store", f"redis://:{SECRET}@127.0.0.1:6379/0", group="apimw_idempotency")
    with caplog.at_level(logging.DEBUG, logger="apimw-test"):
        conf.log_opt_values(logging.getLogger("apimw-test"), logging.DEBUG)
    assert "apimw_idempotency.store" in caplog.text
    assert SECRET not in caplog.text


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{SECRET}@127.0.0.1:6379/0?db=x",
        f"redis://user:{SECRET}@127.0.0.1:6379/0?socket_timeout=soon",
        f"redis://:{SECRET}/x@127.0.0.1:notaport/0",
        f"redis+sentinel://:{SECRET}@127.0.0.1:26379",
        f"redis+cluster://:{SECRET}@127.0.0.1:7000?bogus=1",
        f"redis+cluster://:{SECRET}@127.0.0.1:port",
        f"memcached://user:{SECRET}@127.0.0.1:11211",
        f"memcached://127.0.0.1:11211?timeout=-1&password={SECRET}",
        f"mongodb://:{SECRET}@127.0.0.1",
        f"memory://x?max_items=many&password={SECRET}",
        f"redis//:{SECRET}@127.0.0.1",
    ],
)
def test_a_bad_store_url_never_echoes_its_password(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        IdempotencyMiddleware(app, store=url)
    assert SECRET not in str(info.value)
    assert "***" in str(info.value) or "store" in str(info.value)


def test_a_bad_store_url_in_paste_never_echoes_its_password(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        loadapp(write_ini(tmp_path, "idempotency", "idempotency", f"store = redis://:{SECRET}@{HOST}:1/0?db=x"))
    assert SECRET not in str(info.value)
    assert "[filter:idempotency]" in str(info.value)


def test_names_repr_and_logs_never_show_the_password(
    redis_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    port = redis_server.port  # type: ignore[attr-defined]
    # the server has no password, so it refuses the AUTH: the startup warning and the 503's log line
    # quote the server's error, and a dead port below gives the connection error
    url = f"redis://:{SECRET}@{HOST}:{port}/0"
    with caplog.at_level(logging.DEBUG):
        mw = IdempotencyMiddleware(CreateApp(), store=url, key_prefix=f"t{uuid.uuid4().hex[:8]}:")
        try:
            shown = [repr(mw), str(mw), repr(mw.store), str(mw.store), mw.store.name]
            assert all(SECRET not in text for text in shown), shown
            assert f"{HOST}:{port}" in mw.store.name
            post(mw, "tok-1")
        finally:
            mw.close()
        dead = IdempotencyMiddleware(CreateApp(), store=f"redis://:{SECRET}@{HOST}:{free_port()}/0")
        try:
            assert post(dead, "tok-2").status == 503
        finally:
            dead.close()
    assert caplog.records  # the dead store was logged (startup and per request)
    assert SECRET not in caplog.text


# -- a store that cannot be reached at startup --------------------------------------------


@pytest.mark.serial  # measured against the clock
@pytest.mark.parametrize("scheme", ["redis", "memcached", "redis-with-password"])
def test_an_unreachable_store_gives_one_warning_at_startup(
    scheme: str, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()  # nothing listens there
    url = {
        "redis": f"redis://{HOST}:{port}/0",
        "memcached": f"memcached://{HOST}:{port}",
        "redis-with-password": f"redis://:{SECRET}@{HOST}:{port}/0",
    }[scheme]
    created = CreateApp()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="apimw.idempotency"):
        mw = IdempotencyMiddleware(created, store=url, store_timeout=0.5)
    try:
        assert time.monotonic() - started < 3  # a quick, bounded probe
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        message = warnings[0].getMessage()
        assert f"{HOST}:{port}" in message and "cannot be reached" in message
        assert "503" in message
        assert SECRET not in caplog.text
        # it keeps running: fail-closed per request, requests without a token pass
        answer = post(mw, "tok-1")
        assert (answer.status, answer.code) == (503, "idempotency.store-unavailable")
        assert post(mw, None).status == 201
        assert created.calls == 1
    finally:
        mw.close()


@pytest.mark.parametrize("kind", ["redis", "memcached"])
def test_a_reachable_store_gives_no_warning(kind: str, request: pytest.FixtureRequest,
                                            caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    server: Server = request.getfixturevalue(f"{kind}_server")
    with caplog.at_level(logging.WARNING, logger="apimw.idempotency"):
        mw = IdempotencyMiddleware(CreateApp(), store=server.url)  # type: ignore[attr-defined]
    mw.close()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_memcached_item_size_below_max_response_bytes_is_warned(
    memcached_server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="apimw.idempotency"):
        mw = IdempotencyMiddleware(CreateApp(), store=memcached_server.url,  # type: ignore[attr-defined]
                                   max_response_bytes=2 * 1024 * 1024)  # fmt: skip
    mw.close()
    assert "not-stored" in caplog.text and "max_response_bytes" in caplog.text


# -- no auth in front ------------------------------------------------------------------------


def test_a_token_without_a_project_names_the_fix() -> None:
    mw = IdempotencyMiddleware(CreateApp())
    answer = post(mw, "tok-1", project=None)
    assert (answer.status, answer.code) == (400, "idempotency.scope-missing")  # the stable code
    detail = answer.json["errors"][0]["detail"]
    assert "after the auth middleware" in detail  # the pipeline order
    assert "scope = shared" in detail
    # and the fix it names works
    shared = IdempotencyMiddleware(CreateApp(), scope="shared")
    assert post(shared, "tok-1", project=None).status == 201


# -- paste: the section the user wrote --------------------------------------------------------


def write_ini(tmp_path: Path, section: str, egg: str, lines: str) -> str:
    ini = tmp_path / "api-paste.ini"
    ini.write_text(
        "[pipeline:main]\n"
        f"pipeline = {section} app\n\n"
        f"[filter:{section}]\n"
        f"use = egg:apimw#{egg}\n"
        f"{lines}\n\n"
        "[app:app]\n"
        "paste.app_factory = tests.test_idempotency_config:app_factory\n"
    )
    return f"config:{ini}"


@pytest.mark.parametrize(
    ("section", "egg", "lines", "message"),
    [
        ("microversion", "microversion", "service_type = baremetal\nmin_version = 1.1\nmax_version = 1.2\n"
         "max_verison = 1.3", "unknown option 'max_verison'"),
        ("microversion", "microversion", "service_type = baremetal\nmin_version = 1.3\nmax_version = 1.2",
         "below"),
        ("etag", "etag", "algorithm = md5", "algorithm"),
        ("idempotency", "idempotency", "lease = soon", "lease"),
        ("my_replay", "idempotency", "scope = nobody", "scope"),
        ("idem", "idempotency", "stor = memory://", "unknown option 'stor'"),
        ("idem", "idempotency", "request_id_headers = X-Trace-Id, X Span", "request_id_headers"),
    ],
)
def test_a_bad_paste_option_names_the_section_the_user_wrote(
    tmp_path: Path, section: str, egg: str, lines: str, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        loadapp(write_ini(tmp_path, section, egg, lines))
    text = str(info.value)
    assert f"[filter:{section}]" in text, text
    assert f"apimw_{egg}" not in text  # the oslo.config group is not a paste section
    assert message in text


def test_request_id_headers_from_paste_and_oslo_config(tmp_path: Path) -> None:
    """The string forms: a comma-separated paste value, an oslo.config list option."""
    conf_file = tmp_path / "apimw.conf"
    conf_file.write_text("[apimw_idempotency]\nrequest_id_headers = X-Span-Id,X-Trace-Id\nscope = shared\n")
    ini = tmp_path / "api-paste.ini"
    ini.write_text(
        "[pipeline:paste]\npipeline = idem app\n\n"
        "[pipeline:oslo]\npipeline = idem_oslo app\n\n"
        "[filter:idem]\nuse = egg:apimw#idempotency\nscope = shared\n"
        "request_id_headers = X-Trace-Id, Request-Id\n\n"
        f"[filter:idem_oslo]\nuse = egg:apimw#idempotency\noslo_config_file = {conf_file}\n"
        "oslo_config_project = apimw-test\n\n"
        "[app:app]\npaste.app_factory = tests.test_idempotency_config:traced_app_factory\n"
    )
    for name, fresh, kept in (("paste", ("X-Trace-Id", "Request-Id"), "X-Span-Id"),
                              ("oslo", ("X-Span-Id", "X-Trace-Id"), "Request-Id")):  # fmt: skip
        pipeline = loadapp(f"config:{ini}", name=name)
        token = f"tok-{uuid.uuid4()}"
        post(pipeline, token)
        replay = post(pipeline, token)
        assert replay.header("Idempotent-Replayed") == "true"
        ids = {replay.header(h) for h in fresh}
        assert len(ids) == 1 and ids != {"first"}, (name, replay.headers)
        assert replay.header(kept) == "first", name


NOT_CALLABLE = "a string, not a function"
NAMES_NO_SCOPE = "scope must be project, user, shared or 'module:function'"


@pytest.mark.parametrize(
    ("scope", "message"),
    [
        ("no.such.module:scope", "idempotency: scope: cannot import 'no.such.module:scope'"),
        ("tests.test_idempotency_config:NOWHERE", "cannot import 'tests.test_idempotency_config:NOWHERE'"),
        ("tests.test_idempotency_config:NOT_CALLABLE", NAMES_NO_SCOPE),
        ("tenant", NAMES_NO_SCOPE),
    ],
)
def test_a_scope_naming_no_function_fails_when_built(scope: str, message: str) -> None:
    def app(environ: Any, start_response: Any) -> list[bytes]:
        raise AssertionError("never called")

    with pytest.raises(ConfigError, match=re.escape(message)):
        IdempotencyMiddleware(app, scope=scope)
