"""The idempotency middleware, one suite run against every store: memory, real memcached, real Redis."""

from __future__ import annotations

import io
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from oslo_middleware.request_id import RequestId

from apimw._idempotency_records import encode_pending
from apimw.errors import ENVIRON_REQUEST_ID, HTTPProblem
from apimw.idempotency import ENVIRON_REPLAYED, IdempotencyMiddleware
from tests.asgi_support import flavours, layered, module_flavour
from tests.idempotency_support import Answer, Backend, CreateApp, call, environ_for, post

# every test runs against the WSGI middleware and its ASGI twin (apimw.asgi) on every store
pytest_generate_tests = flavours()
FLAVOUR = "wsgi"

_flavour = module_flavour()

BACKENDS = ["memory", "memcached", "redis"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    if request.param == "memory":
        return Backend("memory", f"memory://test-{uuid.uuid4().hex}", lease=0.5, retention=0.8)
    if request.param == "memcached":
        # memcached counts TTLs in whole seconds (and apimw never sends less than 2)
        return Backend("memcached", request.getfixturevalue("memcached_server").url, lease=2, retention=2)
    return Backend("redis", request.getfixturevalue("redis_server").url, lease=0.5, retention=0.8)


def token() -> str:
    return f"tok-{uuid.uuid4()}"


_OPEN: list[IdempotencyMiddleware] = []


@pytest.fixture(autouse=True)
def _close_stores() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def make(backend: Backend, app: Any = None, **overrides: Any) -> tuple[IdempotencyMiddleware, Any]:
    app = app if app is not None else CreateApp()
    mw = layered(FLAVOUR, app, (IdempotencyMiddleware, backend.options(**overrides)))
    _OPEN.append(mw)
    return mw, app


def wait_until(predicate: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return predicate()


class CountingStore:
    """The real store with a count of the calls made to it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if callable(attr):

            def counted(*args: Any, **kwargs: Any) -> Any:
                self.calls += 1
                return attr(*args, **kwargs)

            return counted
        return attr


# -- pass-through ------------------------------------------------------------------------


@pytest.mark.wsgi_only  # swaps a counting store object into the WSGI middleware
@pytest.mark.parametrize(
    "method, with_token",
    [pytest.param("POST", False, id="post-without-token"), pytest.param("GET", True, id="get-with-token"),
     pytest.param("DELETE", True, id="delete-with-token")],
)  # fmt: skip
def test_requests_outside_its_remit_never_touch_the_store(
    backend: Backend, method: str, with_token: bool
) -> None:
    mw, app = make(backend)
    counting = CountingStore(mw.store)
    mw.store = counting
    tok = token() if with_token else None
    for _ in range(2):
        answer = call(mw, environ_for(method=method, token=tok))
        assert answer.status == 201
        assert not answer.has("Idempotent-Replayed")
    assert app.calls == 2
    assert counting.calls == 0


def test_the_wrapped_app_can_be_an_instance_and_can_be_replaced() -> None:
    first, second = CreateApp(), CreateApp(status="202 Accepted")
    mw = IdempotencyMiddleware(first, store="memory://")
    _OPEN.append(mw)
    assert call(mw, environ_for(method="GET")).status == 201 and mw.app is first
    mw.app = second
    assert call(mw, environ_for(method="GET")).status == 202
    assert post(mw, token()).status == 202 and mw.app is second
    mw.app = first
    assert call(mw, environ_for(method="GET")).status == 201 and mw.app is first
    assert (first.calls, second.calls) == (2, 2)


# -- replay ------------------------------------------------------------------------------


def test_replay_is_the_first_answer_byte_for_byte(backend: Backend) -> None:
    mw, app = make(backend)
    tok = token()
    first = post(mw, tok)
    assert first.status == 201
    assert first.header("Set-Cookie")  # the first answer is untouched
    second = post(mw, tok)
    third = post(mw, tok)
    assert app.calls == 1
    for replay in (second, third):
        assert replay.status_line == "201 Created"
        assert replay.body == first.body
        assert replay.header("Idempotent-Replayed") == "true"
        assert replay.header("Content-Length") == str(len(first.body))
        for kept in ("Location", "Content-Type", "ETag", "OpenStack-API-Version"):
            assert replay.header(kept) == first.header(kept)
        for dropped in ("Set-Cookie", "Date"):
            assert not replay.has(dropped)
    assert not first.has("Idempotent-Replayed")
    # the request id is the one header whose value is new on each replay
    ids = [a.header("X-OpenStack-Request-Id") for a in (first, second, third)]
    assert len(set(ids)) == 3


def test_the_replay_flag_is_in_the_environ_for_outer_middlewares(backend: Backend) -> None:
    seen: list[Any] = []
    mw, _ = make(backend)

    def outer(environ: dict[str, Any], start_response: Any) -> Any:
        result = mw(environ, start_response)
        seen.append(environ.get(ENVIRON_REPLAYED))
        return result

    tok = token()
    call(outer, environ_for(token=tok))
    call(outer, environ_for(token=tok))
    assert seen == [False, True]


# -- request ids on a replay ------------------------------------------------------------------

REQUEST_ID = re.compile(r"req-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


class IronicRequestId(RequestId):
    """Ironic's own request_id middleware (ironic.api.app.IronicRequestId): oslo's, plus its
    historical ``openstack-request-id``.  Ironic loads apimw outside it (``[api] middleware``)."""

    compat_headers = ["openstack-request-id"]


def test_a_replay_gets_a_fresh_id_in_every_request_id_header_without_an_outer_middleware() -> None:
    """Under Ironic's hook no request-id middleware sits outside apimw: the stored answer's
    ids (both of Ironic's headers) would be the first request's on every replay."""
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        environ["wsgi.input"].read()
        start_response("201 Created", [("Content-Type", "application/json")])
        return [json.dumps({"uuid": str(uuid.uuid4())}).encode()]

    mw = IdempotencyMiddleware(IronicRequestId(app), scope="shared")
    tok = token()
    answers = [post(mw, tok) for _ in range(3)]
    assert [a.header("Idempotent-Replayed") for a in answers] == [None, "true", "true"]
    ids = []
    for answer in answers:
        request_id = answer.header("X-OpenStack-Request-Id")
        assert request_id is not None and REQUEST_ID.fullmatch(request_id), answer.headers
        assert answer.header("OpenStack-Request-Id") == request_id  # one id per answer, as Ironic's
        assert sum(k.lower() == "openstack-request-id" for k, _ in answer.headers) == 1
        ids.append(request_id)
    assert len(set(ids)) == 3  # new on each replay, never the first answer's


def test_a_replay_carries_the_outer_request_id_middlewares_id() -> None:
    """With oslo's request_id outside (the documented pipeline), the replay's ids are the one it
    put in the environ (the id its logs carry), once each."""
    seen: list[str] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        environ["wsgi.input"].read()
        request_id = environ[ENVIRON_REQUEST_ID]  # what the app logs
        start_response("201 Created", [("OpenStack-Request-Id", request_id)])
        return [b"{}"]

    mw = IdempotencyMiddleware(app, scope="shared")

    def recorded(environ: dict[str, Any], start_response: Any) -> Any:
        seen.append(environ[ENVIRON_REQUEST_ID])
        return mw(environ, start_response)

    pipeline = RequestId(recorded)
    tok = token()
    answers = [post(pipeline, tok) for _ in range(3)]
    assert answers[2].header("Idempotent-Replayed") == "true"
    for answer, logged in zip(answers, seen, strict=True):
        assert answer.header("X-OpenStack-Request-Id") == logged
        assert answer.header("OpenStack-Request-Id") == logged
        assert sum(k.lower() == "x-openstack-request-id" for k, _ in answer.headers) == 1
    assert len(set(seen)) == 3


def test_which_headers_carry_a_fresh_request_id_is_configurable() -> None:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        environ["wsgi.input"].read()
        start_response("201 Created", [("X-Trace-Id", "req-first"), ("X-OpenStack-Request-Id", "req-first")])
        return [b"{}"]

    mw = IdempotencyMiddleware(app, scope="shared", request_id_headers=["X-Trace-Id"])
    tok = token()
    post(mw, tok)
    replay = post(mw, tok)
    assert replay.header("Idempotent-Replayed") == "true"
    fresh = replay.header("X-Trace-Id")
    assert fresh is not None and REQUEST_ID.fullmatch(fresh)
    # not named: an ordinary header, replayed as stored
    assert replay.header("X-OpenStack-Request-Id") == "req-first"


VARIANTS = [
    pytest.param({"body": b'{"name": "node-2", "driver": "ipmi"}'}, id="body"),
    pytest.param({"path": "/v1/nodes?fields=uuid"}, id="query"),
    pytest.param({"path": "/v1/ports"}, id="path"),
    pytest.param({"method": "PUT"}, id="method"),
    pytest.param({"headers": {"OpenStack-API-Version": "baremetal 1.31"}}, id="microversion"),
    pytest.param({"headers": {"X-OpenStack-Ironic-API-Version": "1.31"}}, id="legacy-microversion"),
    pytest.param({"content_type": "application/x-www-form-urlencoded"}, id="content-type"),
]


@pytest.mark.parametrize("variant", VARIANTS)
def test_same_token_for_a_different_request_is_a_conflict(backend: Backend, variant: dict[str, Any]) -> None:
    mw, app = make(backend, methods=["POST", "PUT"])
    tok = token()
    base = {"headers": {"OpenStack-API-Version": "baremetal 1.2", "X-OpenStack-Ironic-API-Version": "1.2"}}
    assert post(mw, tok, **base).status == 201
    changed = {**base, **variant}
    if "headers" in variant:
        changed["headers"] = {**base["headers"], **variant["headers"]}
    answer = post(mw, tok, **changed)
    assert answer.status == 409
    assert answer.code == "idempotency.fingerprint-mismatch"
    assert app.calls == 1
    # the original request still replays
    assert post(mw, tok, **base).header("Idempotent-Replayed") == "true"


@pytest.mark.parametrize("names", [["X-Flavor-Class"], ["X-Flavor-*", "OpenStack-API-Version"]])
def test_only_the_named_fingerprint_headers_count(names: list[str]) -> None:
    """Exact names and patterns: a header that merely starts like one is not part of the request."""
    mw = IdempotencyMiddleware(CreateApp(), fingerprint_headers=names)
    tok = token()
    base = {"X-Flavor-Class": "gold", "X-Flavor-Class-Note": "a", "X-Other": "a"}
    assert post(mw, tok, headers=base).status == 201
    pattern = "*" in names[0]  # it covers every X-Flavor-... header
    note_changed = post(mw, tok, headers={**base, "X-Flavor-Class-Note": "b"})
    assert post(mw, tok, headers={**base, "X-Other": "b"}).header("Idempotent-Replayed") == "true"
    if pattern:
        assert note_changed.code == "idempotency.fingerprint-mismatch"
    else:
        assert note_changed.header("Idempotent-Replayed") == "true"
    changed = post(mw, tok, headers={**base, "X-Flavor-Class": "silver"})
    assert changed.code == "idempotency.fingerprint-mismatch"


def test_ietf_profile_answers_422_to_a_reused_key(backend: Backend) -> None:
    mw, _ = make(backend, mismatch_status=422)
    tok = token()
    post(mw, tok)
    answer = post(mw, tok, body=b'{"name": "other"}')
    assert (answer.status, answer.code) == (422, "idempotency.fingerprint-mismatch")


def test_reordered_json_keys_whitespace_and_query_order_still_match(backend: Backend) -> None:
    mw, app = make(backend)
    tok = token()
    first = post(mw, tok, path="/v1/nodes?a=1&b=2", body=b'{"name": "n", "extra": {"x": 1, "y": [1, 2]}}')
    again = post(mw, tok, path="/v1/nodes?b=2&a=1", body=b'{ "extra" : {"y":[1,2],"x":1},\n "name":"n"}')
    assert again.header("Idempotent-Replayed") == "true"
    assert again.body == first.body
    assert app.calls == 1


def test_idempotency_key_header_is_the_same_token_quoted_or_bare(backend: Backend) -> None:
    mw, app = make(backend)
    bare = str(uuid.uuid4())
    first = post(mw, bare)
    quoted = post(mw, None, headers={"Idempotency-Key": f'"{bare}"'})
    unquoted = post(mw, None, headers={"Idempotency-Key": bare})
    assert quoted.body == unquoted.body == first.body
    assert app.calls == 1


# -- scope -------------------------------------------------------------------------------


def test_tenants_never_see_each_other(backend: Backend) -> None:
    mw, app = make(backend)
    tok = token()
    a = post(mw, tok, project="project-a")
    b = post(mw, tok, project="project-b")
    assert (a.status, b.status) == (201, 201)
    assert app.calls == 2
    assert a.json["uuid"] != b.json["uuid"]
    assert post(mw, tok, project="project-a").body == a.body
    assert post(mw, tok, project="project-b").body == b.body
    # a different request of project B with A's token is B's own business: it is B's record that conflicts
    assert post(mw, tok, project="project-b", body=b"{}").code == "idempotency.fingerprint-mismatch"
    assert app.calls == 2


def test_legacy_tenant_header_scopes_like_the_project_header(backend: Backend) -> None:
    mw, app = make(backend)
    tok = token()
    first = post(mw, tok, project=None, headers={"X-Tenant-Id": "project-a"})
    assert post(mw, tok, project="project-a").body == first.body
    assert app.calls == 1


def test_per_user_scope(backend: Backend) -> None:
    mw, app = make(backend, scope="user")
    tok = token()
    alice = post(mw, tok, headers={"X-User-Id": "alice"})
    bob = post(mw, tok, headers={"X-User-Id": "bob"})
    assert app.calls == 2
    assert post(mw, tok, headers={"X-User-Id": "alice"}).body == alice.body
    assert alice.body != bob.body


def test_no_scope_is_rejected_or_shared(backend: Backend) -> None:
    strict, app = make(backend)
    answer = post(strict, token(), project=None)
    assert (answer.status, answer.code) == (400, "idempotency.scope-missing")
    assert app.calls == 0
    lenient, app = make(backend, missing_scope="shared")
    tok = token()
    first = post(lenient, tok, project=None)
    assert post(lenient, tok, project=None).body == first.body
    assert app.calls == 1


def test_shared_scope_ignores_client_supplied_project_headers(backend: Backend) -> None:
    mw, app = make(backend, scope="shared")
    tok = token()
    first = post(mw, tok, project="forged-a")
    assert post(mw, tok, project="forged-b").body == first.body
    assert app.calls == 1


# -- concurrency -------------------------------------------------------------------------


def test_32_threads_one_token_run_the_app_exactly_once(backend: Backend) -> None:
    mw, app = make(backend, app=CreateApp(delay=0.3), lease=max(backend.lease, 5))
    tok = token()
    barrier = threading.Barrier(32)
    answers: list[Answer] = []
    lock = threading.Lock()

    def worker() -> None:
        barrier.wait(10)
        answer = post(mw, tok)
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=worker) for _ in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(answers) == 32
    assert app.calls == 1
    originals = [a for a in answers if a.status == 201 and not a.has("Idempotent-Replayed")]
    assert len(originals) == 1
    for answer in answers:
        if answer.status == 409:
            assert answer.code == "idempotency.in-flight"
            assert answer.header("Retry-After") == "1"
        else:
            assert answer.status == 201
            assert answer.body == originals[0].body
    # once done, everyone gets the replay
    assert post(mw, tok).body == originals[0].body


def test_in_flight_conflict_then_replay(backend: Backend) -> None:
    release = threading.Event()
    entered = threading.Event()

    def slow(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        entered.set()
        release.wait(10)
        start_response("202 Accepted", [("Content-Type", "application/json")])
        return [b'{"ok": true}']

    mw, _ = make(backend, app=slow, lease=max(backend.lease, 5))
    tok = token()
    first: list[Answer] = []
    thread = threading.Thread(target=lambda: first.append(post(mw, tok)))
    thread.start()
    try:
        assert entered.wait(5)
        busy = post(mw, tok)
        assert busy.code == "idempotency.in-flight"
        assert busy.header("Retry-After") == "1"
        # a different request with the same token is a mismatch even while the first one runs
        assert post(mw, tok, body=b'{"x": 1}').code == "idempotency.fingerprint-mismatch"
    finally:
        release.set()
        thread.join(10)
    assert first[0].status == 202
    assert post(mw, tok).body == b'{"ok": true}'


# -- crashes, leases, fencing -----------------------------------------------------------------


def test_dead_workers_claim_blocks_until_the_lease_ends_then_one_execution(backend: Backend) -> None:
    """A worker that claimed and died: 409 while its lease lasts, then exactly one new execution.

    The dead worker's claim is the record its claim call left behind, written with
    the same store call a real worker makes, then abandoned.
    """
    mw, app = make(backend)
    tok = token()
    from apimw._idempotency_identity import fingerprint, store_key

    env = environ_for(token=tok)
    fp = fingerprint(method="POST", path="/v1/nodes", query="", content_type="application/json",
                     versions=[], body=env["wsgi.input"].read())  # fmt: skip
    dead = encode_pending(b"d" * 32, fp, "project-a", time.time())
    assert mw.store.claim(store_key(backend.prefix, "project-a", tok), dead, backend.lease) is None
    started = time.monotonic()
    blocked = post(mw, tok)
    assert (blocked.status, blocked.code) == (409, "idempotency.in-flight")
    assert app.calls == 0
    answer = wait_until(lambda: (a := post(mw, tok)).status != 409 and a, backend.lease + 3)
    assert answer.status == 201
    assert time.monotonic() - started >= backend.lease - 1.0
    assert app.calls == 1
    assert post(mw, tok).body == answer.body
    assert app.calls == 1


class Zombie:
    """An app whose first call hangs past its lease, then answers (or fails) when let go."""

    def __init__(self, *, fail: bool = False) -> None:
        self.go = threading.Event()
        self.entered = threading.Event()
        self.fail = fail
        self.calls = 0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        self.calls += 1
        serial = self.calls
        if serial == 1:
            self.entered.set()
            self.go.wait(20)
            if self.fail:
                raise RuntimeError("zombie failed")
        start_response("201 Created", [("Content-Type", "application/json")])
        return [json.dumps({"serial": serial}).encode()]


@pytest.mark.parametrize("fail", [False, True], ids=["complete", "release"])
def test_zombie_owner_cannot_overwrite_or_delete_its_successors_record(backend: Backend, fail: bool) -> None:
    zombie = Zombie(fail=fail)
    mw, _ = make(backend, app=zombie)
    tok = token()
    first: list[Any] = []

    def run_first() -> None:
        try:
            first.append(post(mw, tok))
        except RuntimeError as exc:
            first.append(exc)

    thread = threading.Thread(target=run_first)
    thread.start()
    try:
        assert zombie.entered.wait(5)
        # the zombie's lease runs out; a retry takes over and completes
        successor = wait_until(lambda: (a := post(mw, tok)).status == 201 and a, backend.lease + 3)
        assert successor.json == {"serial": 2}
    finally:
        zombie.go.set()
        thread.join(20)
    if fail:
        assert isinstance(first[0], RuntimeError)
    else:
        assert first[0].json == {"serial": 1}  # the zombie's client still gets its answer
    replay = post(mw, tok)
    assert replay.header("Idempotent-Replayed") == "true"
    assert replay.json == {"serial": 2}
    assert zombie.calls == 2


def test_retention_expiry_forgets_the_token(backend: Backend) -> None:
    mw, app = make(backend)
    tok = token()
    first = post(mw, tok)
    assert post(mw, tok).body == first.body
    again = wait_until(lambda: (a := post(mw, tok)).header("Idempotent-Replayed") is None and a,
                       backend.retention + 3)  # fmt: skip
    assert again.status == 201
    assert again.body != first.body
    assert app.calls == 2


# -- tokens ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [pytest.param("x" * 255, id="255-chars"), pytest.param("a", id="one-char"),
     pytest.param("~!#$%&'*+-.^_`|" + "0aZ", id="punctuation")],
)  # fmt: skip
def test_valid_tokens_replay(backend: Backend, value: str) -> None:
    mw, app = make(backend)
    first = post(mw, value)
    assert first.status == 201
    assert post(mw, value).body == first.body
    assert app.calls == 1


def test_a_255_character_token_replays(backend: Backend) -> None:
    mw, app = make(backend)
    tok = (uuid.uuid4().hex * 8)[:255]
    first = post(mw, tok)
    assert post(mw, tok).body == first.body
    assert app.calls == 1


@pytest.mark.parametrize(
    "raw",
    [pytest.param("x" * 256, id="256-chars"), pytest.param("caf\u00e9", id="latin-1"),
     pytest.param("\u00e2\u0082\u00ac", id="utf-8-bytes-euro"), pytest.param("a b", id="space"),
     pytest.param("a\tb", id="tab"), pytest.param("", id="empty"), pytest.param("a\x7fb", id="del")],
)  # fmt: skip
def test_bad_tokens_are_400_and_never_run_the_app(backend: Backend, raw: str) -> None:
    mw, app = make(backend)
    answer = post(mw, raw)
    assert (answer.status, answer.code) == (400, "idempotency.token-invalid")
    assert app.calls == 0


def test_two_different_tokens_in_one_request_are_400(backend: Backend) -> None:
    mw, app = make(backend)
    answer = post(mw, "one", headers={"Idempotency-Key": '"two"'})
    assert (answer.status, answer.code) == (400, "idempotency.token-ambiguous")
    assert app.calls == 0


def test_required_token(backend: Backend) -> None:
    mw, app = make(backend, require_token=True)
    answer = post(mw, None)
    assert (answer.status, answer.code) == (400, "idempotency.token-required")
    assert app.calls == 0


# -- outcomes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "status, stored",
    [pytest.param("400 Bad Request", True, id="400-stored"),
     pytest.param("404 Not Found", True, id="404-stored"),
     pytest.param("302 Found", True, id="302-stored"), pytest.param("409 Conflict", False, id="409-released"),
     pytest.param("429 Too Many Requests", False, id="429-released"),
     pytest.param("500 Internal Server Error", False, id="500-released"),
     pytest.param("503 Service Unavailable", False, id="503-released")],
)  # fmt: skip
def test_outcome_policy(backend: Backend, status: str, stored: bool) -> None:
    mw, app = make(backend, app=CreateApp(status=status))
    tok = token()
    first = post(mw, tok)
    second = post(mw, tok)
    assert first.status_line == second.status_line == status
    if stored:
        assert second.body == first.body and second.header("Idempotent-Replayed") == "true"
        assert app.calls == 1
    else:
        assert second.body != first.body and not second.has("Idempotent-Replayed")
        assert app.calls == 2


def test_store_5xx_gives_at_most_once(backend: Backend) -> None:
    mw, app = make(backend, app=CreateApp(status="500 Internal Server Error"), store_5xx=True)
    tok = token()
    first = post(mw, tok)
    assert post(mw, tok).body == first.body
    assert app.calls == 1


def test_an_app_exception_releases_the_claim(backend: Backend) -> None:
    calls: list[int] = []

    def flaky(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("database went away")
        start_response("201 Created", [("Content-Type", "text/plain")])
        return [b"made"]

    mw, _ = make(backend, app=flaky)
    tok = token()
    with pytest.raises(ConnectionError):
        post(mw, tok)
    assert post(mw, tok).body == b"made"
    assert post(mw, tok).header("Idempotent-Replayed") == "true"
    assert len(calls) == 2


def test_an_http_problem_raised_by_the_app_is_rendered_and_stored(backend: Backend) -> None:
    calls: list[int] = []

    def refusing(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        calls.append(1)
        write = start_response("201 Created", [("Content-Type", "text/plain")])
        write(b"half an answer")  # then it changes its mind
        raise HTTPProblem(400, "node.invalid-driver", "No such driver.")

    mw, _ = make(backend, app=refusing, error_profile="ironic")
    tok = token()
    first = post(mw, tok)
    assert first.status == 400
    assert first.json["errors"][0]["code"] == "node.invalid-driver"
    assert "faultstring" in json.loads(first.json["error_message"])
    assert post(mw, tok).body == first.body
    assert len(calls) == 1


# -- sizes -------------------------------------------------------------------------------


def test_request_body_over_the_cap_is_413(backend: Backend) -> None:
    mw, app = make(backend, max_request_bytes=1000)
    answer = post(mw, token(), body=b'{"pad": "' + b"x" * 1000 + b'"}')
    assert (answer.status, answer.code) == (413, "idempotency.body-too-large")
    assert app.calls == 0
    assert post(mw, None, body=b'{"pad": "' + b"x" * 1000 + b'"}').status == 201  # no token: not ours


def test_chunked_request_body_is_read_and_given_back_to_the_app(backend: Backend) -> None:
    mw, app = make(backend, max_request_bytes=64)
    tok = token()
    payload = b'{"name": "chunky"}'

    def chunked_env(data: bytes) -> dict[str, Any]:
        env = environ_for(token=tok, body=None)
        env.update({"wsgi.input": io.BytesIO(data), "HTTP_TRANSFER_ENCODING": "chunked",
                    "CONTENT_TYPE": "application/json"})  # fmt: skip
        env.pop("CONTENT_LENGTH", None)
        return env

    first = call(mw, chunked_env(payload))
    assert first.json["received"] == payload.decode()
    assert app.bodies == [payload]
    assert call(mw, chunked_env(payload)).body == first.body
    too_big = call(mw, chunked_env(b"x" * 65))
    assert (too_big.status, too_big.code) == (413, "idempotency.body-too-large")
    assert app.calls == 1


class BigApp:
    """A large answer, by iterable, by write(), or with a declared Content-Length."""

    def __init__(self, size: int, mode: str) -> None:
        self.size = size
        self.mode = mode
        self.calls = 0
        self.closed = 0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        self.calls += 1
        location = f"/v1/nodes/{uuid.uuid4()}"
        headers = [("Content-Type", "application/octet-stream"), ("Location", location)]
        if self.mode == "content-length":
            headers.append(("Content-Length", str(self.size)))
        write = start_response("201 Created", headers)
        if self.mode == "write":
            for _ in range(self.size // 1000):
                write(b"w" * 1000)
            return []
        app = self

        class Body:
            def __iter__(self) -> Iterator[bytes]:
                for _ in range(app.size // 1000):
                    yield b"i" * 1000

            def close(self) -> None:
                app.closed += 1

        return Body()


@pytest.mark.parametrize("mode", ["iterable", "write", "content-length"])
def test_oversized_answer_leaves_a_tombstone_and_is_never_run_twice(backend: Backend, mode: str) -> None:
    app = BigApp(20_000, mode)
    mw, _ = make(backend, app=app, max_response_bytes=8_000)
    tok = token()
    first = post(mw, tok)
    assert first.status == 201
    assert len(first.body) == 20_000  # streamed through in full
    if FLAVOUR == "wsgi":  # close() is PEP 3333's (the ASGI driver's answer has none)
        assert first.closed == 1
    retry = post(mw, tok)
    assert (retry.status, retry.code) == (409, "idempotency.replay-unavailable")
    assert retry.header("Location") == first.header("Location")
    assert retry.json["errors"][0]["original_status"] == 201
    assert app.calls == 1
    if mode != "write":
        assert app.closed == 1


@pytest.mark.wsgi_only  # wsgi.file_wrapper
def test_file_wrapper_answers_are_tombstoned_and_passed_to_the_server(backend: Backend) -> None:
    class FileWrapper:
        def __init__(self, filelike: Any, block_size: int = 8192) -> None:
            self.filelike = filelike

        def __iter__(self) -> Iterator[bytes]:
            yield self.filelike.read()

        def close(self) -> None:
            self.filelike.close()

    calls: list[int] = []

    def sender(environ: dict[str, Any], start_response: Any) -> Any:
        calls.append(1)
        start_response("201 Created", [("Content-Type", "text/plain"), ("Location", "/v1/files/1")])
        return environ["wsgi.file_wrapper"](io.BytesIO(b"file body"))

    mw, _ = make(backend, app=sender)
    tok = token()
    env = environ_for(token=tok)
    env["wsgi.file_wrapper"] = FileWrapper
    result_holder: list[Any] = []

    def spy(environ: dict[str, Any], start_response: Any) -> Any:
        result_holder.append(mw(environ, start_response))
        return result_holder[-1]

    first = call(spy, env)
    assert isinstance(result_holder[0], FileWrapper)
    assert first.body == b"file body"
    retry = post(mw, tok)
    assert (retry.status, retry.code, retry.header("Location")) == (409, "idempotency.replay-unavailable",
                                                                   "/v1/files/1")  # fmt: skip
    assert len(calls) == 1


# -- PEP 3333 corners ----------------------------------------------------------------------


def test_write_callable_answers_are_stored_and_replayed(backend: Backend) -> None:
    def writer(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        write = start_response("201 Created", [("Content-Type", "text/plain")])
        write(b"hello ")
        write(b"")
        return [b"world"]

    mw, _ = make(backend, app=writer)
    tok = token()
    assert post(mw, tok).body == b"hello world"
    replay = post(mw, tok)
    assert (replay.body, replay.header("Idempotent-Replayed")) == (b"hello world", "true")


def test_exc_info_replaces_the_headers_before_anything_is_sent(backend: Backend) -> None:
    calls: list[int] = []

    def recovering(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        calls.append(1)
        start_response("201 Created", [("Content-Type", "text/plain")])
        try:
            raise ValueError("late failure")
        except ValueError:
            import sys

            start_response("500 Internal Server Error", [("Content-Type", "text/plain")], sys.exc_info())
        return [b"sorry"]

    mw, _ = make(backend, app=recovering)
    tok = token()
    first = post(mw, tok)
    assert (first.status, first.body) == (500, b"sorry")
    assert post(mw, tok).status == 500
    assert len(calls) == 2  # a 500 released the claim, so the retry ran


@pytest.mark.wsgi_only  # PEP 3333's start_response rules
def test_start_response_twice_without_exc_info_is_an_error_and_releases(backend: Backend) -> None:
    def broken(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("201 Created", [])
        start_response("202 Accepted", [])
        return [b""]

    mw, _ = make(backend, app=broken)
    tok = token()
    with pytest.raises(RuntimeError, match="exc_info"):
        post(mw, tok)
    with pytest.raises(RuntimeError):  # released: the retry runs (and fails) again instead of 409
        post(mw, tok)


class Closing:
    """A lazy iterable: start_response on first iteration, optional failure, counts close()."""

    def __init__(self, start_response: Any, fail: bool) -> None:
        self.start_response = start_response
        self.fail = fail
        self.closed = 0

    def __iter__(self) -> Iterator[bytes]:
        self.start_response("201 Created", [("Content-Type", "text/plain")])
        yield b"part1"
        if self.fail:
            raise OSError("disk gone")
        yield b"part2"

    def close(self) -> None:
        self.closed += 1


@pytest.mark.parametrize("fail", [False, True], ids=["ok", "failing-iterator"])
def test_close_is_called_exactly_once(backend: Backend, fail: bool) -> None:
    made: list[Closing] = []

    def lazy(environ: dict[str, Any], start_response: Any) -> Closing:
        made.append(Closing(start_response, fail and not made))
        return made[-1]

    mw, _ = make(backend, app=lazy)
    tok = token()
    if fail:
        with pytest.raises(OSError):
            post(mw, tok)
        answer = post(mw, tok)  # released: runs again
    else:
        answer = post(mw, tok)
        replay = post(mw, tok)
        assert replay.body == b"part1part2"
    assert answer.body == b"part1part2"
    assert [c.closed for c in made] == [1] * len(made)
    assert len(made) == (2 if fail else 1)


def test_replay_carries_the_same_answer_for_head_free_methods_with_error_profile(backend: Backend) -> None:
    mw, _ = make(backend, error_profile="ironic")
    answer = post(mw, "bad token")
    body = answer.json
    assert json.loads(body["error_message"])["faultstring"]
    assert body["errors"][0]["code"] == "idempotency.token-invalid"


def test_an_unreadable_record_is_a_conflict_never_absent(backend: Backend) -> None:
    mw, app = make(backend)
    tok = token()
    from apimw._idempotency_identity import store_key

    assert mw.store.claim(store_key(backend.prefix, "project-a", tok), b"garbage", 30) is None
    answer = post(mw, tok)
    assert (answer.status, answer.code) == (409, "idempotency.record-unreadable")
    assert app.calls == 0


@pytest.mark.wsgi_only  # wsgiref's PEP 3333 validator
@pytest.mark.parametrize("big", [False, True], ids=["stored", "streamed"])
def test_pep3333_validator_on_both_sides(backend: Backend, big: bool) -> None:
    """wsgiref's validator checks the middleware as a server (towards the app) and as an app."""
    from wsgiref.validate import validator

    inner = validator(BigApp(20_000, "iterable") if big else CreateApp())
    mw, _ = make(backend, app=inner, max_response_bytes=8_000)
    outer = validator(mw)
    tok = token()
    answers = [call(outer, environ_for(token=tok)) for _ in range(2)]
    answers.append(call(outer, environ_for(token=tok, body=b"{}")))
    answers.append(call(outer, environ_for(token="bad token")))
    assert [a.status for a in answers] == [201, 409 if big else 201, 409, 400]


class BrokenInput:
    def __init__(self, data: bytes, fail: bool) -> None:
        self.data = data
        self.fail = fail

    def read(self, size: int = -1) -> bytes:
        if self.fail:
            raise OSError("client disconnected")
        data, self.data = self.data[:size], self.data[size:]
        return data


@pytest.mark.parametrize("fail", [False, True], ids=["short-body", "disconnect"])
def test_an_incomplete_request_body_is_400_not_500(backend: Backend, fail: bool) -> None:
    mw, app = make(backend)
    env = environ_for(token=token())
    env["wsgi.input"] = BrokenInput(b'{"name": "x"}', fail)
    env["CONTENT_LENGTH"] = "100"
    answer = call(mw, env)
    assert (answer.status, answer.code) == (400, "idempotency.body-incomplete")
    assert app.calls == 0


@pytest.mark.wsgi_only  # wsgi.multiprocess
def test_a_process_local_store_under_a_multiprocess_server_is_logged_once(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    mw, _ = make(backend)
    for _ in range(2):
        env = environ_for(token=token())
        env["wsgi.multiprocess"] = True
        call(mw, env)
    warnings = [r for r in caplog.records if "lives in one process" in r.getMessage()]
    assert len(warnings) == (1 if backend.name == "memory" else 0)


def test_a_renewed_lease_keeps_a_slow_request_from_running_twice(backend: Backend) -> None:
    calls: list[int] = []

    def slow(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        calls.append(1)
        time.sleep(backend.lease * 2.5)  # well past the lease
        start_response("201 Created", [("Content-Type", "text/plain")])
        return [b"slow but once"]

    mw, _ = make(backend, app=slow, renew_lease=True)
    tok = token()
    first: list[Answer] = []
    thread = threading.Thread(target=lambda: first.append(post(mw, tok)))
    thread.start()
    retries: list[Answer] = []
    started = time.monotonic()
    while not calls and time.monotonic() - started < 30:  # the first request holds the claim
        time.sleep(0.01)
    try:
        while thread.is_alive() and len(retries) < 200:
            time.sleep(0.1)
            retries.append(post(mw, tok))
    finally:
        thread.join(30)
    assert first[0].body == b"slow but once"
    assert len(retries) > 3
    assert all(r.status == 409 or r.header("Idempotent-Replayed") == "true" for r in retries)
    assert post(mw, tok).body == b"slow but once"
    assert len(calls) == 1
