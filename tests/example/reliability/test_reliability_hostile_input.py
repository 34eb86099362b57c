"""The reliability harness's hostile-input scenario, short version (bench/reliability/hostile_input.py),
and the bugs it found, as regression tests against a real gunicorn.

The full run (>= 10,000 requests) is ``python -m bench.reliability --only hostile_input``;
CI already runs the whole hostile suite (tests/example/handlers/test_hostile_input.py) and the
schemathesis fuzzer (tests/example/test_fuzz_schema.py), so the short version only keeps the
scenario working: a few hundred requests, every family.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from bench.reliability import hostile_input
from bench.reliability._harness import Context
from tests.example.production_support import Gunicorn
from tests.servers import PostgresServer

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(__name__)]  # module fixtures set up once


@pytest.fixture(scope="module")
def result(postgres_server: PostgresServer) -> Iterator[dict[str, Any]]:
    with Context(quick=True, postgres=postgres_server) as ctx:
        yield hostile_input.run(ctx)


def test_every_family_ran_and_nothing_leaked(result: dict[str, Any]) -> None:
    data = result["data"]
    families = {f["name"]: f for f in data["families"]}
    assert {name.split(" (")[0] for name in families} == {
        "create bodies", "patch bodies", "random requests", "headers", "edge cases", "HTTP protocol",
        "schemathesis"}  # fmt: skip
    assert all(f["requests"] > 0 for f in families.values()), families
    assert data["requests"] >= 250
    assert data["5xx"] == 0, result["problems"]
    assert data["tracebacks"] == 0, result["problems"]
    assert data["log_tracebacks"] == 0, result["problems"]
    assert data["non_json_4xx"] == 0, result["problems"]
    assert data["nonconformant"] == 0, result["problems"]
    assert data["unanswered"] == 0, result["problems"]
    assert result["ok"], result["problems"]
    # the input really was hostile: most of it refused with a 4xx
    refused = sum(n for f in families.values() for s, n in f["statuses"].items() if s.startswith("4"))
    assert refused > data["requests"] / 2


def test_the_leak_check_finds_a_traceback_and_exception_names() -> None:
    # the check that must report 0 above can report more than 0
    assert hostile_input.leaked(b'{"m": "Traceback (most recent call last):"}', b"")
    assert hostile_input.leaked(b'{"m": "File \\"/app/x.py\\", line 3"}', b"")
    assert hostile_input.leaked(b'{"m": "KeyError: 1"}', b"") == "KeyError"
    assert hostile_input.leaked(b'{"m": "sqlalchemy.exc.DataError"}', b"")
    # ...but not a word the client sent itself (echoed back in an error message)
    assert not hostile_input.leaked(b'{"m": "unknown field KeyError"}', b'{"KeyError": 1}')
    assert not hostile_input.leaked(b'{"m": "no node %4BeyError"}', b"GET /v1/nodes/%4BeyError")


# -- regression: a malformed chunked body reaching the application ---------------------------------


@pytest.fixture(scope="module")
def service() -> Iterator[Gunicorn]:
    with Context(quick=True) as ctx:
        yield ctx.gunicorn(ctx.database("sqlite"), ctx.store_url("redis"), workers=1, threads=2)


BROKEN_CHUNKS = {
    "bad-size": b"ZZ\r\n{}\r\n0\r\n\r\n",
    "no-terminator": b"2\r\n{}XX0\r\n\r\n",
}


@pytest.mark.parametrize("token", [False, True], ids=["plain", "client-token"])
@pytest.mark.parametrize("method", ["POST", "PATCH", "PUT"])
@pytest.mark.parametrize("chunks", list(BROKEN_CHUNKS))
def test_a_malformed_chunked_body_is_a_json_400_not_a_500(
    service: Gunicorn, chunks: str, method: str, token: bool
) -> None:
    # gunicorn raises its ParseException (not an OSError) from wsgi.input.read() on a bad chunk:
    # it was a 500 with a traceback in the log, or gunicorn's HTML 400 with X-Client-Token
    path = {"POST": "/v1/nodes", "PATCH": "/v1/nodes/nosuch",
            "PUT": "/v1/runbooks/nosuch/traits/CUSTOM_X"}[method]  # fmt: skip
    headers = (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-OpenStack-Ironic-API-Version: latest\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
        + (f"X-Client-Token: chunks-{chunks}-{method}\r\n" if token else "")
    )
    before = service.output().count("Traceback")
    status, content_type, body = hostile_input.raw_request(service.port, headers.encode() + b"\r\n"
                                                           + BROKEN_CHUNKS[chunks])
    assert status == 400, body[:500]
    assert content_type.startswith("application/json"), body[:500]
    error = json.loads(body)["errors"][0]
    assert error["code"] in ("request.body-incomplete", "idempotency.body-incomplete"), error
    assert service.output().count("Traceback") == before, service.output()[-3000:]
