"""The request path's own pieces answer as the library pieces they replace (issue 13).

Each replacement of a library piece on the hot path is checked against that piece:
the request-id middleware against oslo.middleware's ``RequestId``, the UUID check
against ``uuid.UUID``, the JSON encoder against ``json``.
"""

from __future__ import annotations

import io
import json
import sys
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from baremetal_service.api.common import encode_json
from baremetal_service.app import request_id_middleware
from baremetal_service.db.api import is_uuid_like
from hypothesis import given
from hypothesis import strategies as st

Wsgi = Callable[[dict[str, Any], Any], Iterable[bytes]]


def _old_is_uuid_like(value: Any) -> bool:
    try:
        return str(uuid.UUID(value)) == value.lower()
    except (ValueError, AttributeError, TypeError):
        return False


_hexish = st.text(alphabet="0123456789abcdefABCDEF-{}urn:xX \n", max_size=45)


@given(st.one_of(_hexish, st.text(max_size=40), st.uuids().map(str), st.uuids().map(lambda u: str(u).upper()),
                 st.uuids().map(lambda u: u.hex), st.uuids().map(lambda u: f"{{{u}}}")))
def test_uuid_check_accepts_what_uuid_UUID_accepted(value: str) -> None:
    assert is_uuid_like(value) == _old_is_uuid_like(value)


def test_uuid_check_refuses_non_strings() -> None:
    assert not is_uuid_like(None)  # type: ignore[arg-type]
    assert not is_uuid_like(uuid.uuid4())  # type: ignore[arg-type]


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(_json_values)
def test_json_bodies_decode_to_the_document(doc: Any) -> None:
    assert json.loads(encode_json(doc)) == json.loads(json.dumps(doc))


def test_json_bodies_beyond_orjson_fall_back_to_the_standard_library() -> None:
    doc = {"big": 2**70, "neg": -(2**65), 1: "int key", "s": "lone \ud800 surrogate"}
    assert json.loads(encode_json(doc)) == json.loads(json.dumps(doc))


# -- request id: ours against oslo.middleware's ------------------------------------------------


def _call(middleware: Any, headers: dict[str, str], app_headers: list[tuple[str, str]] | None = None,
          fail: bool = False) -> tuple[dict[str, Any], str, list[tuple[str, str]]]:
    seen: dict[str, Any] = {}

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.update(environ)
        if fail:
            try:
                raise RuntimeError("boom")
            except RuntimeError:
                start_response("500 Internal Server Error", [("Content-Type", "text/plain")], sys.exc_info())
            return [b"boom"]
        start_response("200 OK", [("Content-Type", "application/json"), *(app_headers or [])])
        return [b"{}"]

    environ = {
        "REQUEST_METHOD": "GET", "PATH_INFO": "/v1", "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(b""),
        "wsgi.errors": sys.stderr, "wsgi.version": (1, 0), "wsgi.multithread": False,
        "wsgi.multiprocess": False, "wsgi.run_once": False,
        **{"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()},
    }  # fmt: skip
    out: dict[str, Any] = {}

    def start_response(status: str, hdrs: list[tuple[str, str]], exc_info: Any = None) -> Any:
        out["status"], out["headers"], out["exc_info"] = status, hdrs, exc_info
        return lambda _data: None

    b"".join(middleware(app)(environ, start_response))
    return seen, out["status"], [(k.lower(), v) for k, v in out["headers"]]


GLOBAL = "req-" + str(uuid.uuid4())


@pytest.mark.parametrize(
    "headers, app_headers",
    [
        ({}, None),
        ({"X-OpenStack-Request-Id": GLOBAL}, None),
        ({"X-OpenStack-Request-Id": "req-not-a-uuid"}, None),
        ({"X-OpenStack-Request-Id": GLOBAL.upper()}, None),
        ({"X-OpenStack-Request-Id": GLOBAL + "x"}, None),
        ({}, [("X-OpenStack-Request-Id", "req-from-the-app")]),
    ],
    ids=["plain", "global-id", "bad-global-id", "upper-global-id", "long-global-id", "app-set-header"],
)
def test_builtin_request_id_answers_as_oslo_middlewares(headers: dict[str, str],
                                                       app_headers: list[tuple[str, str]] | None) -> None:
    answers = {}
    for name in ("builtin", "oslo"):
        seen, status, hdrs = _call(request_id_middleware(name), headers, app_headers)
        ids = [v for k, v in hdrs if k == "x-openstack-request-id"]
        assert len(ids) == 1, hdrs
        if app_headers is None:
            assert ids[0] == seen["openstack.request_id"]
        assert seen["openstack.request_id"].startswith("req-")
        assert is_uuid_like(seen["openstack.request_id"][4:])
        answers[name] = (status, seen.get("openstack.global_request_id"), ids[0] if app_headers else None,
                         sorted(k for k, _ in hdrs))
    assert answers["builtin"] == answers["oslo"]


def test_builtin_request_id_passes_exc_info_and_gives_fresh_ids() -> None:
    middleware = request_id_middleware("builtin")
    first, status, hdrs = _call(middleware, {}, fail=True)
    second, _status, _hdrs = _call(middleware, {})
    assert status.startswith("500")
    assert ("x-openstack-request-id", first["openstack.request_id"]) in hdrs
    assert first["openstack.request_id"] != second["openstack.request_id"]


def test_an_unknown_request_id_middleware_is_refused() -> None:
    with pytest.raises(ValueError, match="builtin.*oslo"):
        request_id_middleware("webob")


@pytest.mark.parametrize("request_id", ["builtin", "oslo"])
def test_the_service_quotes_its_request_id_in_header_and_error_body(tmp_path: Any, request_id: str) -> None:
    from baremetal_service.wsgi import make_application
    from werkzeug.test import Client

    app = make_application({"BAREMETAL_DATABASE": f"sqlite:///{tmp_path / 's.db'}",
                            "BAREMETAL_CONDUCTOR_WORKERS": "0", "BAREMETAL_REQUEST_ID": request_id})
    try:
        client = Client(app)
        missing = client.get(f"/v1/nodes/{uuid.uuid4()}", headers={"X-OpenStack-Ironic-API-Version": "1.116"})
        assert missing.status_code == 404
        rid = missing.headers["X-OpenStack-Request-Id"]
        assert rid.startswith("req-") and is_uuid_like(rid[4:])
        assert json.loads(missing.get_data())["errors"][0]["request_id"] == rid
        ok = client.get("/v1/nodes", headers={"X-OpenStack-Request-Id": GLOBAL})
        assert ok.status_code == 200 and ok.headers["X-OpenStack-Request-Id"] not in (rid, GLOBAL)
    finally:
        app.close()


def _sqlite_json_processor() -> Any:
    from baremetal_service.db.models import FastJSON
    from sqlalchemy.dialects import sqlite

    return FastJSON().result_processor(sqlite.dialect(), None)


_SQLITE_JSON = _sqlite_json_processor()


@given(_json_values)
def test_stored_json_reads_back_as_the_standard_library_reads_it(doc: Any) -> None:
    from baremetal_service.db.models import fast_json_loads

    text = json.dumps(doc)
    assert fast_json_loads(text) == json.loads(text)
    assert fast_json_loads(text.encode()) == json.loads(text)
    assert _SQLITE_JSON(text) == json.loads(text)  # the SQLite column's result processor


def test_empty_json_reads_back_as_new_objects() -> None:
    from baremetal_service.db.models import fast_json_loads

    for read in (fast_json_loads, _SQLITE_JSON):
        for text in ("{}", "[]"):
            first, second = read(text), read(text)
            assert first == json.loads(text) and type(first) is type(json.loads(text))
            assert first is not second  # each row gets its own (documents are changed in place)


def test_stored_json_beyond_orjson_reads_back() -> None:
    from baremetal_service.db.models import fast_json_loads

    text = json.dumps({"big": 2**70, "neg": -(2**65), "deep": [[[1]]]})
    assert fast_json_loads(text) == json.loads(text)
