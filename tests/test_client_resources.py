"""apimw.client_resources over real HTTP: etag'd resources, 412 diffs and retries, safe create retries.

The service is the example bare-metal service (the whole middleware stack, SQLite) on
127.0.0.1; faults come from :class:`FaultProxy`, a small threaded HTTP proxy on loopback
that forwards requests and, per a plan, drops answers, delays them or answers 5xx itself.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from apimw import IdempotencyMiddleware
from apimw.client import VersionedSession
from apimw.client_resources import (
    MISSING,
    Change,
    Conflict,
    ConnectionFailed,
    EtagConflict,
    EtagUnsupported,
    FeatureUnsupported,
    HTTPError,
    MissingEtag,
    NotFound,
    Resource,
    ResourceClient,
    ResourceManager,
    RetryPolicy,
    diff_documents,
    format_diff,
    patch_conflicts,
)

pytest.importorskip("baremetal_service")
from baremetal_service.deploy import build_app  # noqa: E402
from tests.example.handlers.conftest import Server, reset  # noqa: E402

LEGACY = "X-OpenStack-Ironic-API-Version"
FAST = RetryPolicy(attempts=4, backoff=0.02, max_backoff=0.2, jitter=0.0)


# -- the fault-injecting proxy ----------------------------------------------------------


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    action: str = "pass"


Plan = Callable[[Seen, int], Any]


@dataclass
class FaultProxy:
    """A threaded HTTP/1.1 proxy on 127.0.0.1 in front of *upstream*.

    ``plan(request, n)`` (``n``: how many requests with this method and path came before)
    returns what to do: ``"pass"``; ``"drop"`` (forward, wait for the answer, close the
    client's connection without a byte); ``("abandon", event)`` (forward, wait until *event*
    says the server started, close the client's connection, let the server finish);
    ``"refuse"`` (close without forwarding);
    ``("status", 502)`` (forward, then answer 502 instead); ``("fake", 503, retry_after)``
    (answer 503 without forwarding); ``("delay", seconds)`` (forward, answer late).
    """

    upstream: str
    plan: Plan = field(default=lambda req, n: "pass")
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        host, port = self.upstream.removeprefix("http://").split(":")
        self._up = (host, int(port))
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._acceptor = threading.Thread(target=self._accept, name="fault-proxy", daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(10)
            with self._lock:
                self._conns.append(conn)
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            with self._lock:
                self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as reader:
            while not self._stop.is_set():
                try:
                    line = reader.readline()
                except OSError:
                    return
                if not line.strip():
                    return
                method, path, _ = line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while True:
                    hline = reader.readline().decode("latin-1")
                    if hline in ("\r\n", "\n", ""):
                        break
                    name, _, value = hline.partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = reader.read(int(headers.get("content-length", "0") or 0))
                req = Seen(method, path, headers, body)
                with self._lock:
                    n = self._counts.get((method, path.split("?")[0]), 0)
                    self._counts[(method, path.split("?")[0])] = n + 1
                    self.seen.append(req)
                action = self.plan(req, n)
                req.action = action if isinstance(action, str) else action[0]
                if action == "refuse":
                    return
                if isinstance(action, tuple) and action[0] == "fake":
                    extra = f"Retry-After: {action[2]}\r\n" if len(action) > 2 else ""
                    payload = b'{"message": "injected"}'
                    conn.sendall(f"HTTP/1.1 {action[1]} Injected\r\nContent-Type: application/json\r\n"
                                 f"{extra}Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
                    continue
                if isinstance(action, tuple) and action[0] == "abandon":
                    # the server has the request (action[1], an Event, says it started), then
                    # the client loses its connection while the server carries on
                    started: threading.Event = action[1]

                    def lose_client(started: threading.Event = started, conn: socket.socket = conn) -> None:
                        started.wait(10)
                        conn.shutdown(socket.SHUT_RDWR)

                    self._forward(req, before_answer=lose_client)
                    return
                status, reason, rheaders, rbody = self._forward(req)
                if action == "drop":
                    return
                if isinstance(action, tuple) and action[0] == "status":
                    status, reason, rbody = action[1], "Injected", b'{"message": "injected"}'
                    rheaders = [("Content-Type", "application/json")]
                if isinstance(action, tuple) and action[0] == "delay":
                    time.sleep(action[1])
                head = f"HTTP/1.1 {status} {reason}\r\n"
                for name, value in rheaders:
                    if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                        head += f"{name}: {value}\r\n"
                head += f"Content-Length: {len(rbody)}\r\n\r\n"
                try:
                    conn.sendall(head.encode("latin-1") + rbody)
                except OSError:
                    return

    def _forward(
        self, req: Seen, before_answer: Callable[[], object] | None = None
    ) -> tuple[int, str, list[tuple[str, str]], bytes]:
        up = http.client.HTTPConnection(*self._up, timeout=30)
        try:
            headers = {k: v for k, v in req.headers.items() if k not in ("host", "connection")}
            up.request(req.method, req.path, body=req.body or None, headers=headers)
            if before_answer is not None:
                before_answer()
            resp = up.getresponse()
            return resp.status, resp.reason, resp.getheaders(), resp.read()
        finally:
            up.close()

    def requests_to(self, method: str, path: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.method == method and s.path.split("?")[0] == path]

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        self._acceptor.join(timeout=5)
        with self._lock:
            conns, threads = list(self._conns), list(self._threads)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(timeout=10)
        for conn in conns:  # a serving thread still blocked upstream: its client socket goes now
            conn.close()


# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("client-res") / "svc.db"
    server = Server(build_app(database_url=f"sqlite:///{db}", store_url="memory://")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def service(module_server: Server) -> str:
    reset(module_server.app)
    return module_server.url


Clients = list[ResourceClient]


@pytest.fixture
def make_client() -> Iterator[Callable[..., ResourceClient]]:
    made: Clients = []

    def make(url: str, *, version: str | None = None, timeout: float = 10.0, **kwargs: Any) -> ResourceClient:
        session = VersionedSession(url, service_type="baremetal", max_version="1.117",
                                   legacy_header=LEGACY, version=version, timeout=timeout)
        kwargs.setdefault("retry", FAST)
        client = ResourceClient(session, **kwargs)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def proxies() -> Iterator[Callable[..., FaultProxy]]:
    made: list[FaultProxy] = []

    def make(upstream: str, plan: Plan) -> FaultProxy:
        proxy = FaultProxy(upstream, plan)
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.close()


def nodes_of(client: ResourceClient) -> ResourceManager[Resource]:
    return client.manager("/v1/nodes", "nodes", kind="node", etag_version="1.116",
                          diff_ignore=("etag", "updated_at", "driver_internal_info"))


def count_nodes(url: str) -> int:
    resp = requests.get(f"{url}/v1/nodes", headers={LEGACY: "1.117"}, timeout=10)
    with resp:
        return len(resp.json()["nodes"])


def first_create(seen: Seen, n: int) -> bool:
    return seen.method == "POST" and seen.path == "/v1/nodes" and n == 0


# -- etags: the spec workflow -----------------------------------------------------------


def test_update_with_etag_sends_if_match_and_returns_the_fresh_etag(service, make_client, proxies):
    proxy = proxies(service, lambda req, n: "pass")
    nodes = nodes_of(make_client(proxy.url))
    node = nodes.create({"driver": "fake-hardware", "name": "etag-1"})
    assert node.etag and node.etag.startswith('W/"')
    same = nodes.get("etag-1")
    assert same.etag == node.etag

    new = same.update([{"op": "add", "path": "/extra/owner", "value": "ops"}], etag=True)

    patches = proxy.requests_to("PATCH", f"/v1/nodes/{node.uuid}")
    assert [p.headers.get("if-match") for p in patches] == [node.etag]
    assert new.extra == {"owner": "ops"}
    assert new.etag and new.etag != node.etag
    assert nodes.get(node.uuid).etag == new.etag  # what the server holds now


def test_two_clients_race_one_wins_the_other_gets_the_diff(service, make_client):
    first, second = nodes_of(make_client(service)), nodes_of(make_client(service))
    uuid_ = first.create({"driver": "fake-hardware", "name": "race"}).uuid
    mine, theirs = first.get(uuid_), second.get(uuid_)
    assert mine.etag == theirs.etag

    barrier = threading.Barrier(2)
    results: dict[str, Any] = {}

    def go(name: str, node: Resource, value: str) -> None:
        barrier.wait(timeout=10)
        try:
            results[name] = node.update([{"op": "add", "path": "/extra/owner", "value": value}], etag=True)
        except EtagConflict as exc:
            results[name] = exc

    threads = [threading.Thread(target=go, args=("a", mine, "alice")),
               threading.Thread(target=go, args=("b", theirs, "bob"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)

    winners = [k for k, v in results.items() if isinstance(v, Resource)]
    losers = [k for k, v in results.items() if isinstance(v, EtagConflict)]
    assert len(winners) == 1 and len(losers) == 1, results
    won, lost = results[winners[0]], results[losers[0]]
    winner_value = won.extra["owner"]
    # the diff is exactly the winner's change, local (what the loser read) -> remote (the server now)
    assert lost.diff == [Change("/extra/owner", MISSING, winner_value)]
    assert lost.status == 412 and lost.code == "etag.precondition-failed"
    assert lost.remote["extra"] == {"owner": winner_value}
    assert lost.local["extra"] == {}
    assert f"/extra/owner: (absent) -> \"{winner_value}\"" in str(lost)
    assert first.get(uuid_).extra == {"owner": winner_value}  # the loser changed nothing


def test_conflict_retry_reapplies_the_patch_on_top_of_the_winner(service, make_client, proxies):
    proxy = proxies(service, lambda req, n: "pass")
    a, b = nodes_of(make_client(service)), nodes_of(make_client(proxy.url))
    uuid_ = a.create({"driver": "fake-hardware"}).uuid
    stale = b.get(uuid_)
    a.get(uuid_).update([{"op": "add", "path": "/extra/owner", "value": "alice"}], etag=True)

    new = stale.update([{"op": "add", "path": "/properties/cpus", "value": 8}], etag=True, retries=2)

    assert new.extra == {"owner": "alice"} and new.properties == {"cpus": 8}
    patches = proxy.requests_to("PATCH", f"/v1/nodes/{uuid_}")
    assert len(patches) == 2
    assert patches[0].headers["if-match"] == stale.etag
    assert patches[1].headers["if-match"] != stale.etag  # the re-fetched etag
    assert json.loads(patches[0].body) == json.loads(patches[1].body)  # the same patch


def test_conflict_retry_refuses_a_patch_that_overlaps_the_other_change(service, make_client):
    a, b = nodes_of(make_client(service)), nodes_of(make_client(service))
    uuid_ = a.create({"driver": "fake-hardware"}).uuid
    stale = b.get(uuid_)
    a.get(uuid_).update([{"op": "add", "path": "/extra/owner", "value": "alice"}], etag=True)

    with pytest.raises(EtagConflict) as err:
        stale.update([{"op": "add", "path": "/extra/owner", "value": "bob"}], etag=True, retries=3)

    assert err.value.attempts == 1
    assert "not retried" in str(err.value) and "/extra/owner" in str(err.value)
    assert a.get(uuid_).extra == {"owner": "alice"}  # the winner's value is kept


def test_conflict_retry_is_bounded(service, make_client, proxies):
    """Another writer changes the node just before every attempt reaches the server: the retries stop."""
    a = nodes_of(make_client(service))
    uuid_ = a.create({"driver": "fake-hardware"}).uuid

    def interfere(req: Seen, n: int) -> str:
        if req.method == "PATCH":
            a.update(uuid_, [{"op": "add", "path": f"/extra/n{n}", "value": n}])
        return "pass"

    proxy = proxies(service, interfere)
    stale = nodes_of(make_client(proxy.url)).get(uuid_)
    with pytest.raises(EtagConflict) as err:
        stale.update([{"op": "add", "path": "/properties/cpus", "value": 8}], etag=True, retries=2)
    assert err.value.attempts == 3
    assert "gave up after 3 attempts" in str(err.value)
    assert len(proxy.requests_to("PATCH", f"/v1/nodes/{uuid_}")) == 3
    assert "cpus" not in a.get(uuid_).properties


def test_delete_with_stale_etag_keeps_the_resource_and_explains(service, make_client):
    a, b = nodes_of(make_client(service)), nodes_of(make_client(service))
    node = a.create({"driver": "fake-hardware", "name": "del-me"})
    stale = b.get("del-me")
    a.get("del-me").update([{"op": "replace", "path": "/name", "value": "renamed"}], etag=True)

    with pytest.raises(EtagConflict) as err:
        stale.delete(etag=True)
    assert err.value.diff == [Change("/name", "del-me", "renamed")]
    assert a.get(node.uuid).name == "renamed"

    a.get(node.uuid).delete(etag=True)
    with pytest.raises(NotFound):
        a.get(node.uuid)


def test_etag_below_the_etag_microversion_is_a_client_side_error(service, make_client, proxies):
    proxy = proxies(service, lambda req, n: "pass")
    nodes = nodes_of(make_client(proxy.url, version="1.50"))
    node = nodes.create({"driver": "fake-hardware"})
    assert node.etag is None

    with pytest.raises(EtagUnsupported) as err:
        node.update([{"op": "add", "path": "/extra/a", "value": 1}], etag=True)
    assert "1.116" in str(err.value) and "1.50" in str(err.value)
    with pytest.raises(EtagUnsupported):
        nodes.delete(node.uuid, etag='W/"abc"')
    assert proxy.requests_to("PATCH", f"/v1/nodes/{node.uuid}") == []  # nothing was sent
    assert proxy.requests_to("DELETE", f"/v1/nodes/{node.uuid}") == []
    # without etags the update goes through
    assert node.update([{"op": "add", "path": "/extra/a", "value": 1}]).extra == {"a": 1}


def test_resource_without_etag_at_an_etag_version_fails_clearly(service, make_client):
    nodes = nodes_of(make_client(service))
    uuid_ = nodes.create({"driver": "fake-hardware"}).uuid
    [partial] = nodes.list()  # list entries show no etag
    assert partial.uuid == uuid_ and partial.etag is None
    with pytest.raises(MissingEtag, match="carries no etag although microversion 1.117 has etags"):
        partial.update([{"op": "add", "path": "/extra/a", "value": 1}], etag=True)


def test_other_resource_types_carry_etags_too(service, make_client):
    client = make_client(service)
    chassis = client.manager("/v1/chassis", "chassis", kind="chassis", etag_version="1.116")
    ports = client.manager("/v1/ports", "ports", kind="port", etag_version="1.116")
    portgroups = client.manager("/v1/portgroups", "portgroups", kind="portgroup",
                                etag_version="1.116", min_version="1.23")
    node = nodes_of(client).create({"driver": "fake-hardware"})
    ch = chassis.create({"description": "rack 1"})
    pg = portgroups.create({"node_uuid": node.uuid, "address": "52:54:00:00:00:10"})
    port = ports.create({"node_uuid": node.uuid, "address": "52:54:00:00:00:11"})
    for res, path in ((ch, "/description"), (pg, "/extra/x"), (port, "/extra/x")):
        assert res.etag
        stale = res.manager.get(res.ident)
        new = res.update([{"op": "add", "path": path, "value": "v"}], etag=True)
        assert new.etag != res.etag
        with pytest.raises(EtagConflict):
            stale.update([{"op": "add", "path": path, "value": "w"}], etag=True)
        new.delete(etag=True)
        with pytest.raises(NotFound):
            res.manager.get(res.ident)


def test_a_collection_newer_than_the_session_is_refused_before_sending(service, make_client):
    client = make_client(service, version="1.20")
    portgroups = client.manager("/v1/portgroups", "portgroups", min_version="1.23")
    expected = (r"portgroups need microversion 1.23 or later; this session uses 1.20 "
                r"and the server supports \[1.1, 1.117\]")
    with pytest.raises(FeatureUnsupported, match=expected):
        portgroups.list()


def test_list_follows_next_links(service, make_client, proxies):
    proxy = proxies(service, lambda req, n: "pass")
    nodes = nodes_of(make_client(proxy.url))
    made = {nodes.create({"driver": "fake-hardware"}).uuid for _ in range(5)}

    assert {n.uuid for n in nodes.list(page_size=2)} == made
    assert len(proxy.requests_to("GET", "/v1/nodes")) == 3  # pages of 2, 2 and 1
    assert len(nodes.list(limit=3)) == 3
    detailed = nodes.list(detail=True, provision_state="enroll")
    assert {n.uuid for n in detailed} == made and all(n.etag for n in detailed)


# -- creates: client tokens and safe retries --------------------------------------------


def test_create_retried_after_a_lost_answer_makes_exactly_one_node(service, make_client, proxies):
    proxy = proxies(service, lambda req, n: "drop" if first_create(req, n) else "pass")
    nodes = nodes_of(make_client(proxy.url))

    node = nodes.create({"driver": "fake-hardware"})

    sent = proxy.requests_to("POST", "/v1/nodes")
    assert [s.action for s in sent] == ["drop", "pass"]
    tokens = {s.headers.get("x-client-token") for s in sent}
    assert tokens == {node.client_token} and node.client_token  # the same token, twice
    assert node.replayed is True and node.replay_guaranteed is True
    assert count_nodes(service) == 1


def test_the_same_lost_answer_without_a_token_makes_two_nodes(service, make_client, proxies):
    """Why the token matters: without one the client does not retry, and a caller who retries
    by hand makes a second node."""
    proxy = proxies(service, lambda req, n: "drop" if first_create(req, n) else "pass")
    nodes = nodes_of(make_client(proxy.url))

    with pytest.raises(ConnectionFailed) as err:
        nodes.create({"driver": "fake-hardware"}, client_token=None)
    assert err.value.attempts == 1 and err.value.client_token is None
    assert len(proxy.requests_to("POST", "/v1/nodes")) == 1  # never retried
    nodes.create({"driver": "fake-hardware"}, client_token=None)  # the caller's own retry

    assert count_nodes(service) == 2
    assert all("x-client-token" not in s.headers for s in proxy.requests_to("POST", "/v1/nodes"))


def test_given_token_is_reused_across_retries_and_calls(service, make_client, proxies):
    proxy = proxies(service, lambda req, n: ("status", 502) if first_create(req, n) else "pass")
    nodes = nodes_of(make_client(proxy.url))

    node = nodes.create({"driver": "fake-hardware"}, client_token="my-token-1")
    again = nodes.create({"driver": "fake-hardware"}, client_token="my-token-1")

    assert node.uuid == again.uuid and node.replayed and again.replayed
    assert [s.headers["x-client-token"] for s in proxy.requests_to("POST", "/v1/nodes")] == ["my-token-1"] * 3
    assert count_nodes(service) == 1
    with pytest.raises(Conflict, match="already used for a different request"):
        nodes.create({"driver": "fake-hardware", "name": "other"}, client_token="my-token-1")


@pytest.mark.parametrize("status", [502, 503, 504])
def test_gateway_errors_before_the_server_are_retried(service, make_client, proxies, status):
    proxy = proxies(service, lambda req, n: ("fake", status, 0) if req.method == "POST" and n < 2 else "pass")
    nodes = nodes_of(make_client(proxy.url))
    node = nodes.create({"driver": "fake-hardware"})
    assert [s.action for s in proxy.requests_to("POST", "/v1/nodes")] == ["fake", "fake", "pass"]
    assert node.replayed is False
    assert count_nodes(service) == 1


def test_read_timeout_is_retried_with_the_same_token(service, make_client, proxies):
    proxy = proxies(service, lambda req, n: ("delay", 2.5) if first_create(req, n) else "pass")
    client = make_client(proxy.url, timeout=1.0)
    client.session.negotiate()  # learn the range first; only the create meets the slow answer
    node = nodes_of(client).create({"driver": "fake-hardware"})
    sent = proxy.requests_to("POST", "/v1/nodes")
    assert len(sent) == 2 and sent[0].headers["x-client-token"] == sent[1].headers["x-client-token"]
    assert node.replayed is True
    assert count_nodes(service) == 1


def test_retries_are_bounded(service, make_client, proxies):
    proxy = proxies(service, lambda req, n: "refuse" if req.method == "POST" else "pass")
    nodes = nodes_of(make_client(proxy.url))
    with pytest.raises(ConnectionFailed) as err:
        nodes.create({"driver": "fake-hardware"}, client_token="tok-bounded")
    assert err.value.attempts == FAST.attempts
    assert "tok-bounded" in str(err.value) and err.value.client_token == "tok-bounded"
    assert len(proxy.requests_to("POST", "/v1/nodes")) == FAST.attempts


def test_giving_up_on_a_retried_status_says_so_and_names_the_token(service, make_client, proxies):
    """A create whose retries all meet a 502/503/504 may or may not have been made (a gateway's
    502 says nothing about the server): the error says the client gave up after N attempts and
    names the token to learn the outcome with, as a lost answer's ConnectionFailed does."""
    proxy = proxies(service, lambda req, n: ("fake", 503, 0) if req.method == "POST" else "pass")
    nodes = nodes_of(make_client(proxy.url))
    with pytest.raises(HTTPError) as err:
        nodes.create({"driver": "fake-hardware"}, client_token="tok-503")
    assert err.value.status == 503 and err.value.client_token == "tok-503"
    assert len(proxy.requests_to("POST", "/v1/nodes")) == FAST.attempts
    message = str(err.value)
    assert f"gave up after {FAST.attempts} attempts" in message
    assert "client token tok-503 (retry with it to learn the outcome)" in message
    assert "\n" not in message


def test_giving_up_on_a_create_still_in_flight_says_so_and_names_the_token(service, make_client, proxies):
    proxy = proxies(service, lambda req, n: ("fake", 409, 1) if req.method == "POST" else "pass")
    sleeps: list[float] = []
    policy = RetryPolicy(attempts=4, backoff=0.02, jitter=0.0, in_flight_timeout=2.0, sleep=sleeps.append)
    nodes = nodes_of(make_client(proxy.url, retry=policy))
    with pytest.raises(Conflict) as err:
        nodes.create({"driver": "fake-hardware"}, client_token="tok-409")
    assert sleeps == [1.0, 1.0]  # Retry-After honoured, bounded by in_flight_timeout
    message = str(err.value)
    assert "still in progress after waiting 2 s" in message
    assert "client token tok-409 (retry with it to learn the outcome)" in message


def test_patch_and_delete_are_never_retried(service, make_client, proxies):
    proxy = proxies(service, lambda req, n: "drop" if req.method in ("PATCH", "DELETE") else "pass")
    nodes = nodes_of(make_client(proxy.url))
    node = nodes.create({"driver": "fake-hardware"})
    with pytest.raises(ConnectionFailed):
        node.update([{"op": "add", "path": "/extra/a", "value": 1}])
    with pytest.raises(ConnectionFailed):
        node.delete()
    assert len(proxy.requests_to("PATCH", f"/v1/nodes/{node.uuid}")) == 1
    assert len(proxy.requests_to("DELETE", f"/v1/nodes/{node.uuid}")) == 1


def test_gets_are_retried(service, make_client, proxies):
    proxy = proxies(service, lambda req, n: ("fake", 503, 0) if req.method == "GET" and n == 0 else "pass")
    nodes = nodes_of(make_client(proxy.url))
    assert nodes.list() == []


def test_idempotency_key_header_when_configured(service, make_client, proxies):
    proxy = proxies(service, lambda req, n: "drop" if first_create(req, n) else "pass")
    nodes = nodes_of(make_client(proxy.url, token_header="Idempotency-Key"))
    node = nodes.create({"driver": "fake-hardware"})
    sent = proxy.requests_to("POST", "/v1/nodes")
    assert [s.headers.get("idempotency-key") for s in sent] == [f'"{node.client_token}"'] * 2
    assert "x-client-token" not in sent[0].headers
    assert node.replayed and count_nodes(service) == 1


def test_server_without_replay_gets_the_token_a_warning_and_no_retry(service, make_client, proxies, caplog):
    proxy = proxies(service, lambda req, n: "drop" if first_create(req, n) else "pass")
    nodes = nodes_of(make_client(proxy.url, replay=lambda server: False))
    with caplog.at_level(logging.WARNING, logger="apimw.client_resources"), pytest.raises(ConnectionFailed):
        nodes.create({"driver": "fake-hardware"})
    assert "replay is not guaranteed" in caplog.text
    sent = proxy.requests_to("POST", "/v1/nodes")
    assert len(sent) == 1 and sent[0].headers.get("x-client-token")
    node = nodes.create({"driver": "fake-hardware"})
    assert node.replay_guaranteed is False and node.client_token


# -- 409 in flight: a slow create behind the real IdempotencyMiddleware -----------------


class SlowCreates:
    """A tiny service whose creates take 1.5 s; counts the resources it made; ``started`` is
    set when a create begins (the middleware has claimed its token by then)."""

    def __init__(self) -> None:
        self.made: list[str] = []
        self.started = threading.Event()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        if environ["REQUEST_METHOD"] == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            environ["wsgi.input"].read(length)
            self.started.set()
            time.sleep(1.5)
            ident = str(uuid.uuid4())
            self.made.append(ident)
            body = json.dumps({"uuid": ident}).encode()
            start_response("201 Created", [("Content-Type", "application/json"),
                                           ("Content-Length", str(len(body)))])
            return [body]
        body = json.dumps({"things": [{"uuid": u} for u in self.made]}).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


class _WsgiServer:
    def __init__(self, app: Any) -> None:
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def test_in_flight_409_waits_per_retry_after_then_gets_the_replay(make_client, proxies):
    app = SlowCreates()
    server = _WsgiServer(IdempotencyMiddleware(app, store="memory://", scope="project",
                                               missing_scope="shared", retry_after=1))
    try:
        proxy = proxies(server.url, lambda req, n: ("abandon", app.started) if n == 0 and req.method == "POST"
                        else "pass")
        client = make_client(proxy.url)
        things = client.manager("/things", "things", kind="thing")
        start = time.monotonic()
        thing = things.create({"size": 1})
        elapsed = time.monotonic() - start
        sent = proxy.requests_to("POST", "/things")
        assert len(sent) >= 3  # abandoned, 409 in flight (at least once), replayed
        assert len({s.headers["x-client-token"] for s in sent}) == 1
        assert app.made == [thing.uuid] and thing.replayed
        assert elapsed >= 0.9  # waited the Retry-After second
    finally:
        server.stop()


def test_in_flight_wait_is_bounded(make_client, proxies):
    app = SlowCreates()
    server = _WsgiServer(IdempotencyMiddleware(app, store="memory://", scope="project",
                                               missing_scope="shared", retry_after=1))
    try:
        proxy = proxies(server.url, lambda req, n: ("abandon", app.started) if n == 0 and req.method == "POST"
                        else "pass")
        policy = RetryPolicy(attempts=4, backoff=0.02, jitter=0.0, in_flight_timeout=0.0)
        client = make_client(proxy.url, retry=policy)
        with pytest.raises(Conflict, match="in progress"):
            client.manager("/things", "things").create({"size": 1})
    finally:
        server.stop()


# -- sans-IO helpers --------------------------------------------------------------------


def test_diff_documents_walks_objects_and_compares_lists_whole():
    local = {"a": 1, "b": {"c": [1, 2], "d": "x"}, "etag": "1", "gone": True}
    remote = {"a": 1, "b": {"c": [1, 3], "e": None}, "etag": "2", "new": 0}
    assert diff_documents(local, remote) == [
        Change("/b/c", [1, 2], [1, 3]),
        Change("/b/d", "x", MISSING),
        Change("/b/e", MISSING, None),
        Change("/gone", True, MISSING),
        Change("/new", MISSING, 0),
    ]
    assert diff_documents({"a/b": 1, "t~": 1}, {"a/b": 2, "t~": 2}) == [
        Change("/a~1b", 1, 2), Change("/t~0", 1, 2)]
    assert diff_documents({"x": 1}, {"x": True}) == [Change("/x", 1, True)]
    assert format_diff([]) == "no field differs"
    assert format_diff([Change("/x", MISSING, "y")]) == '/x: (absent) -> "y"'


def test_patch_conflicts():
    local = {"extra": {"a": 1}, "name": "n"}
    remote = {"extra": {"a": 1, "b": 2}, "name": "n"}
    assert patch_conflicts([{"op": "add", "path": "/extra/c", "value": 3}], local, remote) is None
    removed = patch_conflicts([{"op": "remove", "path": "/extra/b"}], local, remote)
    assert "touches /extra/b" in (removed or "")
    assert "touches /extra/b" in (
        patch_conflicts([{"op": "replace", "path": "/extra", "value": {}}], local, remote) or "")
    assert "no longer applies" in (
        patch_conflicts([{"op": "test", "path": "/name", "value": "m"}], local, remote) or "")
