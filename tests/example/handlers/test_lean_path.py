"""The request path's own pieces answer as the library pieces they replace.

Each replacement of a library piece on the hot path is checked against that piece: the
UUID check against ``uuid.UUID``, the JSON encoder against ``json``.  Request ids are
oslo.middleware's ``RequestId`` itself (the webob-free copy was not 1.3x faster on the
whole request path: docs/example/performance.md).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask
from hypothesis import given
from hypothesis import strategies as st

from apimw.errors import HTTPProblem
from baremetal_service.db.api import is_uuid_like
from baremetal_service.handlers.common import MAX_JSON_NUMBER, MIN_JSON_NUMBER, encode_json, json_body

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
    st.none()
    | st.booleans()
    | st.integers(MIN_JSON_NUMBER, MAX_JSON_NUMBER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(_json_values)
def test_json_bodies_decode_to_the_document(doc: Any) -> None:
    assert json.loads(encode_json(doc)) == json.loads(json.dumps(doc))


#: Any JSON value a client can send: integers and floats of any size, lone surrogates.
_any_char = st.characters(codec=None, blacklist_categories=())
_client_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([MIN_JSON_NUMBER - 1, MIN_JSON_NUMBER, MAX_JSON_NUMBER, MAX_JSON_NUMBER + 1, 1e20])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(_any_char),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(_any_char, max_size=8), inner, max_size=4),
    max_leaves=20,
)
_app = Flask(__name__)


@given(_client_values)
def test_every_body_the_service_accepts_can_be_answered(doc: Any) -> None:
    """What ``json_body`` lets in, ``encode_json`` writes back: never a 500 at the answer."""
    body = json.dumps(doc).encode()  # (lone surrogates escaped as \\udXXX, as a client sends them)
    with _app.test_request_context(method="POST", data=body, content_type="application/json"):
        try:
            accepted = json_body()
        except HTTPProblem as refused:
            assert refused.status == 400
            return
        assert json.loads(encode_json(accepted)) == json.loads(body)


# -- request id (oslo.middleware's RequestId) --------------------------------------------------


GLOBAL = "req-" + str(uuid.uuid4())


def test_the_service_quotes_its_request_id_in_header_and_error_body(tmp_path: Any) -> None:
    from werkzeug.test import Client

    from baremetal_service.deploy import make_application

    app = make_application({"BAREMETAL_DATABASE": f"sqlite:///{tmp_path / 's.db'}",
                            "BAREMETAL_CONDUCTOR_WORKERS": "0"})
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
    from sqlalchemy.dialects import sqlite

    from baremetal_service.db.models import FastJSON

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
