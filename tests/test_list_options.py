"""A list option given a plain string in code means what the same string means in a paste ini.

Every option of kind ``list`` of the three middlewares, built in code on both doors
(``apimw.<module>.<X>Middleware`` and ``apimw.asgi.<X>Middleware``, and so FastAPI's
``app.add_middleware``), takes ``"a, b"`` as the list ``["a", "b"]`` (comma or newline
separated, as :func:`apimw.config.as_list` reads an ini value), never as its characters.
"""

from __future__ import annotations

import json
import re
import types
import uuid
from typing import Any

import pytest
from webob import Request

from apimw import _etag_options, _idempotency_options, _microversion_options
from apimw._config import Option
from apimw.etag import ETagMiddleware, mark_enforced, set_response_etag
from apimw.idempotency import IdempotencyMiddleware
from apimw.microversion import MicroversionMiddleware
from tests.asgi_support import TWINS, as_asgi, flavours, layered
from tests.idempotency_support import call, environ_for
from tests.wsgi import run

pytest_generate_tests = flavours()

TABLES: dict[type, tuple[Option, ...]] = {
    ETagMiddleware: _etag_options.OPTIONS,
    IdempotencyMiddleware: _idempotency_options.OPTIONS,
    MicroversionMiddleware: _microversion_options.OPTIONS,
}
#: the options each middleware is built with besides the one under test
BASE: dict[type, dict[str, Any]] = {
    ETagMiddleware: {},
    IdempotencyMiddleware: {"store": "memory://", "scope": "shared"},
    MicroversionMiddleware: {"service_type": "baremetal", "min_version": "1.1", "max_version": "1.9",
                             "discovery": True},
}  # fmt: skip
#: a string each list option is given (a comma and a newline among them), with what it needs beside it
SAMPLES: dict[tuple[type, str], tuple[str, dict[str, Any]]] = {
    (ETagMiddleware, "methods"): ("PATCH,\nPOST", {}),
    (ETagMiddleware, "require_if_match"): ("PATCH /v1/, DELETE", {"enforces": "*"}),
    (ETagMiddleware, "enforces"): ("PATCH /v1/nodes,\nDELETE", {}),
    (ETagMiddleware, "ignore_suffixes"): ("-gzip, -br", {}),
    (ETagMiddleware, "ignored_fields"): (
        "node:updated_at,\nport:created_at",
        {"hmac_key": "list-options-secret-0123"},
    ),
    (IdempotencyMiddleware, "methods"): ("POST,\nPUT", {}),
    (IdempotencyMiddleware, "fingerprint_headers"): ("X-Foo, X-Bar-*", {}),
    (IdempotencyMiddleware, "release_statuses"): ("408,\n503", {}),
    (IdempotencyMiddleware, "drop_headers"): ("X-Secret, X-Other", {}),
    (IdempotencyMiddleware, "request_id_headers"): ("X-Req,\nX-Request-Id", {}),
    (MicroversionMiddleware, "service_aliases"): ("bare-metal, ironic", {}),
    (MicroversionMiddleware, "discovery_resources"): ("nodes,\nports:1.2", {}),
}
LIST_OPTIONS = [
    pytest.param(cls, opt, id=f"{cls.__name__}-{opt.name}")
    for cls, table in TABLES.items()
    for opt in table
    if opt.kind == "list"
]


def state(obj: Any, depth: int = 0) -> Any:
    """What *obj* holds, as plain comparable values (its attributes, recursively)."""
    if depth > 8:
        return type(obj).__qualname__
    if obj is None or isinstance(obj, str | bytes | int | float):
        return obj
    if isinstance(obj, re.Pattern):
        return ("pattern", obj.pattern)
    if isinstance(obj, list | tuple):
        return [state(item, depth + 1) for item in obj]
    if isinstance(obj, set | frozenset):
        return sorted(repr(state(item, depth + 1)) for item in obj)
    if isinstance(obj, dict):
        return {repr(state(key, depth + 1)): state(value, depth + 1) for key, value in obj.items()}
    bound = getattr(obj, "__self__", None)
    if isinstance(obj, types.MethodType | types.BuiltinMethodType) and bound is not None:
        return (obj.__name__, state(bound, depth + 1))
    if isinstance(obj, types.FunctionType | types.BuiltinFunctionType):
        return obj.__qualname__
    names = list(getattr(obj, "__dict__", {}))
    names += [n for cls in type(obj).__mro__ for n in getattr(cls, "__slots__", ()) if hasattr(obj, n)]
    return (type(obj).__qualname__, {name: state(getattr(obj, name), depth + 1) for name in names})


def build(flavour: str, cls: type, **options: Any) -> Any:
    """The middleware *cls* of the *flavour*'s door, built in code over a plain app."""

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b""]

    if flavour == "wsgi":
        return cls(app, **BASE[cls], **options)
    return TWINS[cls](as_asgi(app), **BASE[cls], **options)


def rules_of(middleware: Any) -> Any:
    """The validated options the door keeps: the etag and idempotency rules, the microversion core."""
    return getattr(middleware, "rules", None) or middleware.core


def test_every_list_option_has_a_sample() -> None:
    assert {(param.values[0], param.values[1].name) for param in LIST_OPTIONS} == set(SAMPLES)


@pytest.mark.parametrize(("cls", "option"), LIST_OPTIONS)
def test_a_string_is_the_list_an_ini_makes_of_it(flavour: str, cls: type, option: Option) -> None:
    text, beside = SAMPLES[(cls, option.name)]
    as_list = option.convert(text)
    assert isinstance(as_list, list | dict) and len(as_list) == 2, as_list
    from_string = rules_of(build(flavour, cls, **beside, **{option.name: text}))
    from_list = rules_of(build(flavour, cls, **beside, **{option.name: as_list}))
    assert state(from_string) == state(from_list)
    # and the option counts: the middleware differs from one built without it
    assert state(from_list) != state(rules_of(build(flavour, cls, **beside)))


# -- what a client sees -----------------------------------------------------------------------


class CreateNode:
    """A create endpoint that counts its runs."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        environ["wsgi.input"].read()
        self.runs += 1
        body = json.dumps({"uuid": str(uuid.uuid4())}).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        start_response("201 Created", headers)
        return [body]


def idempotent(flavour: str, app: Any, **options: Any) -> Any:
    """The idempotency middleware of the *flavour*'s door over *app*, on a store of its own."""
    store = f"memory://{uuid.uuid4()}"
    return layered(flavour, app, (IdempotencyMiddleware, {"store": store, "scope": "shared", **options}))


def test_methods_post_as_a_string_replays_the_second_post(flavour: str) -> None:
    app = CreateNode()
    stack = idempotent(flavour, app, methods="POST")
    token = f"tok-{uuid.uuid4()}"
    first = call(stack, environ_for(token=token))
    second = call(stack, environ_for(token=token))
    assert (first.status, second.status) == (201, 201)
    assert second.body == first.body
    assert second.header("Idempotent-Replayed") == "true"
    assert app.runs == 1


ETAG = 'W/"e1"'


def node(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """One node whose etag is ``W/"e1"``; its writes are conditional (acknowledged)."""
    if environ["REQUEST_METHOD"] != "GET":
        mark_enforced(environ)
    set_response_etag(environ, ETAG)
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "2")])
    return [b"{}"]


@pytest.mark.parametrize(("if_match", "status"), [('W/"e1-gzip"', 200), ('W/"e1"', 200), ('W/"e1p"', 412)])
def test_ignore_suffixes_as_a_string_strips_that_suffix(flavour: str, if_match: str, status: int) -> None:
    stack = layered(flavour, node, (ETagMiddleware, {"ignore_suffixes": "-gzip"}))
    answer = run(stack, Request.blank("/v1/nodes/n1", headers={"If-Match": if_match}))
    assert answer.status_int == status


def test_require_if_match_as_a_string_is_one_policy_entry(flavour: str) -> None:
    policy = {"enforces": "PATCH /v1/", "require_if_match": "PATCH /v1/"}
    stack = layered(flavour, node, (ETagMiddleware, policy))
    unconditional = run(stack, Request.blank("/v1/nodes/n1", method="PATCH", body=b"{}"))
    assert unconditional.status_int == 428
    elsewhere = run(stack, Request.blank("/v2/nodes/n1", method="PATCH", body=b"{}"))
    assert elsewhere.status_int == 200


def test_fingerprint_headers_as_a_string_tells_requests_apart(flavour: str) -> None:
    app = CreateNode()
    stack = idempotent(flavour, app, fingerprint_headers="X-Foo")
    token = f"tok-{uuid.uuid4()}"
    assert call(stack, environ_for(token=token, headers={"X-Foo": "a"})).status == 201
    assert call(stack, environ_for(token=token, headers={"X-Foo": "b"})).status == 409
    assert app.runs == 1


def test_drop_headers_as_a_string_is_not_replayed(flavour: str) -> None:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        environ["wsgi.input"].read()
        start_response("201 Created", [("Content-Type", "application/json"), ("Content-Length", "2"),
                                       ("X-Secret", "s3cret")])  # fmt: skip
        return [b"{}"]

    stack = idempotent(flavour, app, drop_headers="X-Secret")
    token = f"tok-{uuid.uuid4()}"
    assert call(stack, environ_for(token=token)).header("X-Secret") == "s3cret"
    replay = call(stack, environ_for(token=token))
    assert replay.header("Idempotent-Replayed") == "true"
    assert replay.header("X-Secret") is None
