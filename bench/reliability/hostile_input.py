"""Hostile and schema-driven input, at volume, against the service under gunicorn.

The service runs under gunicorn (2 worker processes, 4 threads each) on PostgreSQL with
Redis as the replay store.  Seven families of requests are sent to it:

* **create bodies**, **patch bodies**, **random requests**, **headers**: the Hypothesis
  strategies of the hardening suite (``tests/example/handlers/test_hostile_input.py``), imported
  and drawn from at volume: bad JSON (truncated, ``NaN``, ``1e999``, raw bytes, a BOM), wrong
  types for every field, huge numbers, 3,000-deep nesting, lone surrogates and control
  characters, JSON Patch documents with bogus operations and paths, random methods, paths,
  suffixes and query strings, and random version, etag, token, content-type and project
  headers.  A patch case is followed by a valid patch of the same resource (whatever the
  hostile one stored can still be read and patched).
* **edge cases**: a fixed list written for this harness: path traversal (raw and
  percent-encoded ``..``), bad and out-of-range microversions, bad client tokens (empty,
  long, non-ASCII bytes, a replay with another body), bad and stale etags in ``If-Match``,
  invalid UTF-8 and UTF-16 bodies, a body one byte over the 1 MiB limit, 100,000-deep
  nesting, 50,000 keys, a JSON Patch of 10,000 operations and a "copy bomb" patch (each
  ``copy`` doubles the document), bad query arguments (negative and 100-digit limits,
  unknown sort keys), and well-formed requests whose chunked body is broken (a bad chunk
  size, a missing chunk terminator, a body cut short), which gunicorn hands to the
  application.
* **HTTP protocol**: malformed requests on a raw socket (garbage request line, over-long
  request line and header, too many headers, bad or conflicting ``Content-Length`` and
  ``Transfer-Encoding``, a control character in a header).  gunicorn answers these before
  the application sees them, so their error bodies are gunicorn's (HTML), not JSON; they
  are shown, not held against the API, but must not be a 5xx either.
* **schemathesis**: the schema-driven fuzzer against the service's own
  ``GET /v1/openapi.json``, at several microversions, every operation in valid (positive)
  and invalid (negative) mode, a bounded number of cases each, with the resources the paths
  name created first (as in ``tests/example/test_fuzz_schema.py``).  Each answer is checked
  against the document: documented status code, content type, headers and body schema.

What it proves: the figures that must be zero are zero.  No 5xx; no answer whose body
carries a Python traceback (``Traceback``, ``File "``) or an exception class name that the
request itself did not contain (``KeyError``, ``IntegrityError``, ...); every API error is a
JSON body (``non-JSON 4xx``); every schemathesis answer conforms to the document; and
gunicorn's log (both workers) holds no traceback.  ``conn. errors`` counts requests that got
no HTTP answer at all (the server closed the connection), which should also be 0.

How to read it: one row per family; the status columns say how the input was refused (most
of it is 400, 404, 405, 406 or 412, as it should be); the plot shows the share of each
status code per family.  The counts of requests are exact; the seconds are the wall time on
a shared machine (most of the run's time goes to drawing the Hypothesis examples and to
schemathesis building its strategies, not to the requests).  ``HOSTILE_SQLITE=1`` in the
environment runs every family a second time against SQLite (same service, same gunicorn
shape).  The short version (``--quick``, the test suite's) sends a few hundred requests to
the service on SQLite.

Found by this scenario and fixed: a well-formed request with a malformed chunked body was
a 500 with a traceback in the log (gunicorn raises its ``ParseException`` subclasses, not
``OSError``, from ``wsgi.input.read()``), or, with ``X-Client-Token``, gunicorn's HTML 400
(apimw's idempotency middleware let the exception through).  Both are now a JSON 400
(``request.body-incomplete``, ``idempotency.body-incomplete``).
"""

from __future__ import annotations

import builtins
import json
import os
import re
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from bench.reliability._harness import LATEST, Client, Context
from tests.servers import HOST

TITLE = "Hostile and schema-driven input"

#: examples drawn per Hypothesis family (full, quick); a patch example is two requests
EXAMPLES = {"create bodies": (2500, 25), "patch bodies": (1500, 15), "random requests": (2500, 30),
            "headers": (2000, 20)}
#: schemathesis: cases per operation and mode, and the microversions (full, quick)
SCHEMA_EXAMPLES = (6, 1)
SCHEMA_VERSIONS = (("1.1", "1.116", LATEST), (LATEST,))
#: client threads sending the hostile families
THREADS = 4
LEGACY = "X-OpenStack-Ironic-API-Version"

# -- what must never appear in an answer ----------------------------------------------------------
_EXCEPTIONS = sorted(
    {name for name, obj in vars(builtins).items()
     if isinstance(obj, type) and issubclass(obj, BaseException) and not issubclass(obj, Warning)}
    | {"JSONDecodeError", "IntegrityError", "OperationalError", "DataError", "ProgrammingError",
       "StatementError", "InterfaceError", "InternalError", "DBAPIError", "NoResultFound",
       "RedisError", "HTTPException", "JsonPatchException", "JsonPointerException"}
)  # fmt: skip
_NAMES = "|".join(map(re.escape, _EXCEPTIONS))
_LEAK = re.compile(rf"Traceback|File \\*\"|\b(?:{_NAMES})\b|\bsqlalchemy\.|\bpsycopg\.|\bwerkzeug\.")


def leaked(body: bytes, sent: bytes) -> str:
    """The first traceback marker or exception name in *body* that *sent* (the request) lacks."""
    text = body.decode("utf-8", "replace")
    sent_text = sent.decode("utf-8", "replace")
    sent_text += unquote(sent_text)
    for match in _LEAK.finditer(text):
        if match.group(0) not in sent_text:
            return match.group(0)
    return ""


# -- one request and the tally ----------------------------------------------------------------------
@dataclass
class Req:
    method: str
    path: str
    body: bytes | None = None
    headers: dict[str, Any] = field(default_factory=dict)

    def sent(self) -> bytes:
        hdrs = " ".join(f"{k}: {v!s}" for k, v in self.headers.items())
        return f"{self.method} {self.path} {hdrs} ".encode("utf-8", "surrogatepass") + (self.body or b"")


class Tally:
    """Counts of one family (thread-safe)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.statuses: Counter[int] = Counter()
        self.tracebacks: list[str] = []
        self.non_json: list[str] = []
        self.nonconformant: list[str] = []
        self.seconds = 0.0
        self._lock = threading.Lock()

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    def count(self, status: int) -> int:
        return sum(n for s, n in self.statuses.items() if s // 100 == status)

    def record(self, method: str, path: str, status: int, content_type: str, body: bytes, sent: bytes,
               *, json_errors: bool = True) -> None:
        where = f"{method} {path[:120]} -> {status}"
        leak = leaked(body, sent)
        bad_json = False
        if json_errors and status >= 400 and method != "HEAD":
            try:
                bad_json = not content_type.startswith("application/json") or not isinstance(
                    json.loads(body), dict)
            except ValueError:
                bad_json = True
        with self._lock:
            self.statuses[status] += 1
            if leak:
                self.tracebacks.append(f"{where}: {leak!r} in {body[:300]!r}")
            if bad_json:
                self.non_json.append(f"{where}: {content_type!r} {body[:200]!r}")

    def send(self, client: Client, req: Req) -> int:
        reply = client.request(req.method, req.path, req.body, headers=req.headers)
        self.record(req.method, req.path, reply.status, reply.headers.get("content-type", ""), reply.body,
                    req.sent())
        return reply.status

    def row(self) -> list[Any]:
        return [self.name, self.requests, self.count(2), self.count(3), self.count(4), self.count(5),
                self.statuses.get(0, 0), len(self.tracebacks), len(self.non_json), len(self.nonconformant),
                round(self.seconds, 1)]  # fmt: skip


COLUMNS = ["family", "requests", "2xx", "3xx", "4xx", "5xx", "conn. errors", "tracebacks",
           "non-JSON 4xx", "schema non-conformant", "seconds"]  # fmt: skip


# -- drawing examples from the hardening suite's strategies ----------------------------------------
def draw(strategy: Any, n: int) -> list[Any]:
    """*n* examples of *strategy* (derandomized: the same ones every run)."""
    from hypothesis import HealthCheck, Phase, given, settings

    out: list[Any] = []

    @settings(max_examples=n, deadline=None, database=None, derandomize=True,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(example: Any) -> None:
        out.append(example)

    collect()
    return out


def _fill(path: str, world: dict[str, str]) -> str:
    for key, value in world.items():
        path = path.replace("{" + key + "}", value)
    return path


def hostile_cases(world: dict[str, str], examples: dict[str, int]) -> dict[str, list[list[Req]]]:
    """The hardening suite's four properties as request sequences, per family."""
    from hypothesis import strategies as st

    from tests.example.handlers import test_hostile_input as h

    json_ct = {"Content-Type": "application/json"}
    version = {LEGACY: LATEST, **json_ct}
    cases: dict[str, list[list[Req]]] = {}

    def create(example: tuple[str, bytes, bool]) -> list[Req]:
        kind, body, base = example
        if base and body.startswith(b"{") and body.endswith(b"}") and len(body) > 2:
            valid = {"nodes": '"driver": "fake-hardware"', "ports": f'"node_uuid": "{world["node"]}"',
                     "portgroups": f'"node_uuid": "{world["node"]}"'}.get(kind)  # fmt: skip
            if valid:
                body = b"{" + valid.encode() + b", " + body[1:]
        return [Req("POST", f"/v1/{kind}", body, dict(version))]

    cases["create bodies"] = [create(e) for e in draw(st.tuples(
        st.sampled_from(["nodes", "ports", "portgroups", "chassis", "resource_classes"]), h.raw_bodies,
        st.booleans()), examples["create bodies"])]

    def patch(example: tuple[str, bytes]) -> list[Req]:
        kind, body = example
        path = f"/v1/{'chassis' if kind == 'chassis' else kind + 's'}/{world[kind]}"
        ok = json.dumps([{"op": "add", "path": "/extra/ok", "value": 1}]).encode()
        return [Req("PATCH", path, body, dict(version)), Req("PATCH", path, ok, dict(version))]

    cases["patch bodies"] = [patch(e) for e in draw(st.tuples(
        st.sampled_from(["node", "port", "portgroup", "chassis"]), h.patches), examples["patch bodies"])]

    def random_request(example: tuple[str, str, str, str, str, bytes | None]) -> list[Req]:
        method, collection, segment, suffix, query, body = example
        path = _fill(f"/v1/{collection}{segment}{suffix}", world).replace("/v1/v1", "/v1")
        hdrs = dict(version) if body is not None else {LEGACY: LATEST}
        return [Req(method, f"{path}?{query}" if query else path, body, hdrs)]

    cases["random requests"] = [random_request(e) for e in draw(st.tuples(
        h.methods, h.collections, st.one_of(st.just(""), h.path_segments.map(lambda s: "/" + s)), h.suffixes,
        h.query_strings, st.one_of(st.none(), h.raw_bodies)), examples["random requests"])]

    def with_headers(example: tuple[dict[str, str], str, str, bytes | None]) -> list[Req]:
        hdrs, method, target, body = example
        sent = {**(json_ct if body is not None else {}), **hdrs}  # no version header unless drawn
        return [Req(method, _fill(target, world), body, sent)]

    cases["headers"] = [with_headers(e) for e in draw(st.tuples(
        h.headers, st.sampled_from(["GET", "POST", "PATCH", "DELETE"]),
        st.sampled_from(["/v1/nodes", "/v1/nodes/{node}", "/v1/ports/{port}", "/v1", "/"]),
        st.one_of(st.none(), h.raw_bodies)), examples["headers"])]
    return cases


# -- the fixed edge cases -----------------------------------------------------------------------------
def edge_cases(world: dict[str, str], etag: str, stale: str, victim: str) -> list[list[Req]]:
    """Path traversal, versions, tokens, etags, unicode, sizes, patch abuse, query arguments."""
    v = {LEGACY: LATEST, "Content-Type": "application/json"}
    node = f"/v1/nodes/{world['node']}"
    out: list[list[Req]] = []

    def one(method: str, path: str, body: bytes | None = None, **headers: Any) -> None:
        out.append([Req(method, path, body, {**v, **{k.replace("_", "-"): x for k, x in headers.items()}})])

    for path in ("/v1/nodes/../../etc/passwd", "/v1/nodes/..%2F..%2Fetc%2Fpasswd",
                 "/v1/%2e%2e/%2e%2e/etc/passwd",
                 "/../../etc/passwd", "//v1//nodes", "/v1/nodes/%2e%2e", f"{node}/../ports", "/v1/./nodes",
                 "/v1/nodes/..%5c..%5cwindows%5cwin.ini", "/v1/openapi.json/../../", "/v1/nodes;/../",
                 "/v1/nodes%00.json", "/v1/nodes/%252e%252e%252f", "/v1/nodes/....//....//etc",
                 f"{node}/%2e%2e/%2e%2e/ports", "/v1/nodes/%c0%ae%c0%ae/%c0%ae%c0%ae", "/%2F%2Fetc/passwd",
                 "/v1/nodes/" + "../" * 200, "/v1/" + "a/" * 2000):  # fmt: skip
        for method in ("GET", "DELETE", "PATCH"):
            one(method, path, b"[]" if method == "PATCH" else None)
    for version in ("", " ", "1", "1.", ".1", "1.1.1", "1.-1", "-1.1", "1.999999999999999999999", "99.99",
                    "0.0", "1.0", "1.01", "latest ", "LATEST", "1.1,1.2", "١.١", "1.1\u00a0", "nan", "1e3",
                    "0x1.1", "1.9" * 100):  # fmt: skip
        for target in ("/v1/nodes", node, "/v1/openapi.json", "/v1"):
            out.append([Req("GET", target, None, {LEGACY: version.encode("utf-8")})])
            out.append([Req("GET", target, None, {"OpenStack-API-Version": f"baremetal {version}".encode()})])
    create = json.dumps({"driver": "fake-hardware"}).encode()
    for token in (b"", b" ", b"x" * 4000, "nœud-ü".encode(), "nœud".encode("latin-1", "replace"),
                  b"\xff\xfe", b"a,b", b'"quoted"', b"tok\ten", b"../../etc", b"%00", b"\x80"):
        one("POST", "/v1/nodes", create, X_Client_Token=token)
    replay = uuid.uuid4().hex  # the same token with another body: refused, never a second resource
    one("POST", "/v1/nodes", create, X_Client_Token=replay)
    one("POST", "/v1/nodes", json.dumps({"driver": "fake-hardware", "name": "other"}).encode(),
        X_Client_Token=replay)
    one("POST", "/v1/nodes", b"{bad", X_Client_Token=replay)
    ok_patch = json.dumps([{"op": "add", "path": "/extra/e", "value": 1}]).encode()
    for value in ("garbage", '"x"', 'W/"x"', "W/" + etag, etag + ", " + etag, '"' * 50, stale,
                  f'"{"a" * 5000}"',
                  "\u00e9t\u00e9".encode("latin-1"), ",", ", ,", '"unterminated'):  # fmt: skip
        one("PATCH", node, ok_patch, If_Match=value)
        one("GET", node, None, If_None_Match=value)
        one("DELETE", f"/v1/nodes/{victim}", None, If_Match=value)
    one("PATCH", node, ok_patch, If_None_Match="*")
    one("PATCH", node, ok_patch, If_Match=stale, If_None_Match=etag)
    for body in (b"\xff\xfe{\x00}\x00", '{"driver": "fake-hardware"}'.encode("utf-16"),
                 b'{"driver": "\xc0\xaf"}',
                 b'{"driver": "fake-hardware", "name": "\xed\xa0\x80"}', b"\xef\xbb\xbf\xef\xbb\xbf{}",
                 b'{"driver": "fake-hardware", "name": "a\\u0000b"}', b'{"driver": "fake\\ud800"}',
                 b'{"driver": "fake-hardware", "extra": {"\\udfff": 1}}', b"\x00" * 100):  # fmt: skip
        one("POST", "/v1/nodes", body)
        one("POST", "/v1/nodes", body, Content_Type="application/json; charset=utf-16")
    for path in ("/v1/nodes/%ED%A0%80", "/v1/nodes/%FF%FE", "/v1/nodes/%C0%AF", "/v1/nodes?name=%ED%A0%80",
                 "/v1/nodes?fields=%FF", "/v1/%E2%80%AEnodes", "/v1/nodes/%F0%9F%92%A9"):
        one("GET", path)
    # values that cannot go into a Location header (the row was written, then a 500),
    # a trailing newline after a valid value (Python's "$" let it through every pattern), names
    # no URL reaches, a body that says it is not JSON, a Host that is not a host
    for name in ("CUSTOM_X%0A", "CUSTOM_X%0D", "CUSTOM_X%0D%0ALocation:%20x", "CUSTOM_%C3%A9", "CUSTOM_X%7F"):
        one("PUT", f"/v1/resource_classes/{name}")
        one("PUT", f"{node}/traits/{name}")
    for doc in ({"name": "CUSTOM_X\n"}, {"name": "CUSTOM_X\r\nLocation: x"}):
        one("POST", "/v1/resource_classes", json.dumps(doc).encode())
    for name in ("n\n", ".", "..", "detail", "validate"):
        one("POST", "/v1/nodes", json.dumps({"driver": "fake-hardware", "name": name}).encode())
    for key, value in (("conductor_group", "g\n"), ("instance_uuid", str(uuid.uuid4()) + "\n")):
        one("POST", "/v1/nodes", json.dumps({"driver": "fake-hardware", key: value}).encode())
    mac = {"node_uuid": world["node"], "address": "52:54:00:ac:21:01\n"}
    one("POST", "/v1/ports", json.dumps(mac).encode())
    one("POST", "/v1/nodes", create, Content_Type="text/plain")
    for host in (b"a b", b"x/y", b"u@x", b"\xe9", b'"x"'):
        one("POST", "/v1/resource_classes", json.dumps({"name": "CUSTOM_HOSTILE_HOST"}).encode(), Host=host)
    limit = 1024 * 1024
    filler = b'{"driver": "fake-hardware", "description": "' + b"x" * limit + b'"}'
    one("POST", "/v1/nodes", filler[: limit + 1])
    one("POST", "/v1/nodes", b'{"driver": "fake-hardware", "extra": {"a": "' + b"y" * (limit - 60) + b'"}}')
    one("POST", "/v1/nodes", b"[" * 100_000 + b"]" * 100_000)
    one("POST", "/v1/nodes",
        b'{"driver": "fake-hardware", "extra": ' + b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"}")
    one("POST", "/v1/nodes", json.dumps({"driver": "fake-hardware",
                                         "extra": {f"k{i}": i for i in range(50_000)}}).encode())
    one("POST", "/v1/nodes", json.dumps({"driver": "fake-hardware", "extra": {"n": 10**4000}}).encode()
        .replace(b"Infinity", b"1" * 4000))
    one("PATCH", node, json.dumps([{"op": "add", "path": f"/extra/k{i}", "value": i} for i in range(10_000)])
        .encode())
    bomb = [{"op": "add", "path": "/extra/b", "value": ["x" * 100] * 10}]
    bomb += [{"op": "copy", "from": "/extra/b", "path": f"/extra/b/{i}"} for i in range(40)]
    one("PATCH", node, json.dumps(bomb).encode())
    one("PATCH", node, json.dumps([{"op": "move", "from": "/extra", "path": "/extra/child"}]).encode())
    one("PATCH", node, json.dumps([{"op": "add", "path": "/extra" + "/a" * 5000, "value": 1}]).encode())
    one("PATCH", node, json.dumps([{"op": "test", "path": "/uuid", "value": "x"}]).encode())
    one("PATCH", node, json.dumps([{"op": "replace", "path": "/uuid", "value": str(uuid.uuid4())}]).encode())
    one("PATCH", node, json.dumps([{"op": "remove", "path": "/driver"}]).encode())
    one("PATCH", node, json.dumps([{"op": "add", "path": "/extra/~2", "value": 1}]).encode())
    one("PATCH", node, json.dumps({"op": "add", "path": "/extra/a", "value": 1}).encode())
    one("PATCH", node, json.dumps([[{"op": "add"}]]).encode())
    one("PATCH", node, ok_patch, Content_Type="application/json-patch+json")
    one("PATCH", node, ok_patch, Content_Type="application/merge-patch+json")
    one("PATCH", node, ok_patch, Content_Type="text/plain")
    for query in ("limit=-1", "limit=0", "limit=" + "9" * 100, "limit=1e3", "limit=0x10",
                  "marker=" + "f" * 36,
                  "marker=%00", "sort_key=__class__", "sort_key=uuid;DROP", "sort_dir=sideways",
                  "fields=uuid,__dict__", "fields=" + ",".join(["uuid"] * 500), "detail=maybe",
                  "maintenance=2", "associated=%FF", "limit=1&limit=2", "driver=" + "d" * 5000,
                  "a" * 3000 + "=1", "=" * 100, "&&&", "fields=", "limit"):  # fmt: skip
        for target in ("/v1/nodes", "/v1/nodes/detail", "/v1/ports", "/v1/portgroups", "/v1/chassis"):
            one("GET", f"{target}?{query}")
    return out


# -- the raw-socket protocol family ------------------------------------------------------------------
def _protocol_cases() -> list[bytes]:
    host = f"Host: {HOST}\r\n".encode()
    return [
        b"GARBAGE\r\n\r\n",
        b"GET\r\n\r\n",
        b"GET /v1/nodes HTTP/9.9\r\n" + host + b"\r\n",
        b"GET /v1/nodes\r\n\r\n",
        b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n" + host + b"\r\n",
        b"GET /v1/nodes HTTP/1.1\r\n" + host + b"X-Big: " + b"b" * 9000 + b"\r\n\r\n",
        b"GET /v1/nodes HTTP/1.1\r\n" + host + b"".join(b"X-H%d: 1\r\n" % i for i in range(150)) + b"\r\n",
        b"POST /v1/nodes HTTP/1.1\r\n" + host + b"Content-Length: -1\r\n\r\n",
        b"POST /v1/nodes HTTP/1.1\r\n" + host + b"Content-Length: abc\r\n\r\n",
        b"POST /v1/nodes HTTP/1.1\r\n" + host + b"Content-Length: 5\r\nContent-Length: 6\r\n\r\n{}{}{}",
        b"POST /v1/nodes HTTP/1.1\r\n" + host
        + b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /v1/nodes HTTP/1.1\r\n" + host + b"Transfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n",
        b"POST /v1/nodes HTTP/1.1\r\n" + host + b"Transfer-Encoding: gzip\r\n\r\n{}",
        b"POST /v1/nodes HTTP/1.1\r\n" + host + b"Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
        b"GET /v1/nodes HTTP/1.1\r\n" + host + b"Bad Header: 1\r\n\r\n",
        b"GET /v1/nodes HTTP/1.1\r\n" + host + b"X-Null: a\x00b\r\n\r\n",
        b"GET /v1/nodes HTTP/1.1\r\n" + host + b" folded: continuation\r\n\r\n",
        b"GET /v1/nodes HTTP/1.1\n" + host.replace(b"\r", b"") + b"\n",
        b"GET /v1/\xff\xfe HTTP/1.1\r\n" + host + b"\r\n",
        b"GET /v1/nodes HTTP/1.1\r\n" + host + b"X-OpenStack-Ironic-API-Version: \xff\xfe\r\n\r\n",
        b"POST /v1/nodes HTTP/1.1\r\n" + host + b"X-Client-Token: \x7f\r\nContent-Length: 2\r\n\r\n{}",
    ]  # fmt: skip


def raw_request(port: int, raw: bytes) -> tuple[int, str, bytes]:
    """Send *raw* on a fresh loopback socket, half-close it and read the whole answer.

    Returns (status, content type, body); status -1 if the server closed without an answer.
    """
    data = b""
    try:
        with socket.create_connection((HOST, port), timeout=10) as sock:
            sock.sendall(raw)
            sock.shutdown(socket.SHUT_WR)
            while len(data) < 1 << 20:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError:
        pass
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    parts = lines[0].split()
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else -1
    content_type = ""
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-type":
            content_type = value.strip().decode("latin-1")
    return status, content_type, body


def protocol(port: int, tally: Tally, repeat: int) -> None:
    """Each malformed request on a fresh socket (the answer is gunicorn's when it refuses the request)."""
    for _ in range(repeat):
        for raw in _protocol_cases():
            status, content_type, body = raw_request(port, raw)
            tally.record("RAW", raw[:40].decode("latin-1"), status, content_type, body, raw,
                         json_errors=False)


#: a bad chunk size, a missing chunk terminator, a body cut short, a NUL in a chunk extension
BROKEN_CHUNKS = (b"ZZ\r\n{}\r\n0\r\n\r\n", b"2\r\n{}XX0\r\n\r\n", b"20\r\n{}", b"2;\x00\r\n{}\r\n0\r\n\r\n")


def _chunked_cases() -> list[bytes]:
    """Well-formed requests whose chunked body is broken: gunicorn hands these to the application."""
    head = (f"Host: {HOST}\r\n{LEGACY}: {LATEST}\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n").encode()
    out = []
    for target in (b"POST /v1/nodes", b"PATCH /v1/nodes/n0", b"POST /v1/ports", b"PUT /v1/nodes/n0/traits"):
        for token in (b"", b"X-Client-Token: " + uuid.uuid4().hex.encode() + b"\r\n"):
            for chunks in BROKEN_CHUNKS:
                out.append(target + b" HTTP/1.1\r\n" + head + token + b"\r\n" + chunks)
    return out


# -- schemathesis ------------------------------------------------------------------------------------
def schemathesis_family(url: str, versions: tuple[str, ...], examples: int, tally: Tally,
                        positive_only: bool = False, every: int = 1) -> dict[str, int]:
    """The schema-driven fuzzer on each version's document (every *every*-th operation, all by default).

    Returns the number of operations fuzzed per version."""
    import requests
    import schemathesis

    from tests.example import test_fuzz_schema as fz

    checks = [c for c in fz.CHECKS if c is not fz.not_a_server_error]
    modes = [schemathesis.GenerationMode.POSITIVE]
    if not positive_only:
        modes.append(schemathesis.GenerationMode.NEGATIVE)
    operations: dict[str, int] = {}
    with requests.Session() as session:
        for version in versions:
            doc = session.get(url + "/v1/openapi.json", headers={LEGACY: version}, timeout=30).json()
            served = doc["info"]["version"]
            seeds = fz.seed_resources(session, url, served, doc)
            schema = schemathesis.openapi.from_dict(doc)
            ops = sorted((r.ok() for r in schema.get_all_operations()), key=fz.operation_order)[::every]
            operations[served] = len(ops)
            for op in ops:
                for mode in modes:
                    _fuzz_one(op, mode, url, session, served, seeds, examples, tally, checks)
    return operations


def _fuzz_one(op: Any, mode: Any, url: str, session: Any, served: str, seeds: dict[str, str], examples: int,
              tally: Tally, checks: list[Any]) -> None:
    import requests
    from hypothesis import HealthCheck, Phase, given, settings

    from tests.example import test_fuzz_schema as fz

    @given(case=op.as_strategy(generation_mode=mode))
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    def one(case: Any) -> None:
        fz.prepare_case(case, seeds, served)
        try:
            response = case.call(base_url=url, session=session, timeout=30)
        except requests.RequestException as exc:
            tally.record(case.method, case.formatted_path, 0, "", str(exc).encode(), b"")
            return
        req = response.request
        sent = f"{req.method} {req.url} {dict(req.headers)} ".encode() + _bytes(req.body)
        content_type = (response.headers.get("content-type") or [""])[0]  # lower-case keys, list values
        tally.record(req.method or "", req.path_url, response.status_code, content_type, response.content,
                     sent)
        try:
            case.validate_response(response, checks=checks)
        except (Exception, BaseExceptionGroup) as exc:  # a non-conformance (schemathesis raises a group)
            with tally._lock:
                tally.nonconformant.append(
                    f"{served} {req.method} {req.path_url[:120]} -> {response.status_code}: "
                    f"{str(exc)[:600]}")

    one()


def _bytes(body: Any) -> bytes:
    if body is None:
        return b""
    return body if isinstance(body, bytes) else str(body).encode("utf-8", "surrogatepass")


# -- the run --------------------------------------------------------------------------------------------
def _world(client: Client) -> tuple[dict[str, str], str, str, str]:
    """A node, port, portgroup and chassis the hostile paths name; the node's etag, a stale one, a victim."""
    def post(path: str, body: dict[str, Any]) -> Any:
        reply = client.post(path, body)
        assert reply.status == 201, (path, reply.status, reply.body[:300])
        return reply

    node = post("/v1/nodes", {"driver": "fake-hardware", "name": "n0"}).json()
    pg = post("/v1/portgroups", {"node_uuid": node["uuid"], "address": "52:54:00:ac:00:01"}).json()
    port = post("/v1/ports", {"node_uuid": node["uuid"], "address": "52:54:00:ac:00:02"}).json()
    chassis = post("/v1/chassis", {}).json()
    victim = post("/v1/nodes", {"driver": "fake-hardware"}).json()["uuid"]
    path = f"/v1/nodes/{node['uuid']}"
    stale = client.get(path).headers.get("etag", '"none"')
    client.request("PATCH", path, [{"op": "add", "path": "/extra/v", "value": 1}])
    etag = client.get(path).headers.get("etag", '"none"')
    world = {"node": node["uuid"], "port": port["uuid"], "portgroup": pg["uuid"], "chassis": chassis["uuid"]}
    return world, etag, stale, victim


def send_all(url: str, cases: list[list[Req]], tally: Tally, threads: int) -> None:
    local = threading.local()
    made: list[Client] = []
    lock = threading.Lock()

    def client() -> Client:
        c = getattr(local, "client", None)
        if c is None:
            c = local.client = Client(url)
            c.base.clear()  # every header comes from the case
            with lock:
                made.append(c)
        return c

    def run(case: list[Req]) -> None:
        c = client()
        for req in case:
            tally.send(c, req)

    started = time.monotonic()
    try:
        with ThreadPoolExecutor(threads) as pool:
            for _ in pool.map(run, cases):
                pass
    finally:
        for c in made:
            c.close()
    tally.seconds += time.monotonic() - started


@dataclass
class Backend:
    """One service run: the families' tallies, and what the service's own log says."""

    name: str
    tallies: list[Tally]
    log_tracebacks: int
    log_excerpt: str
    alive: int


def run_backend(ctx: Context, kind: str, label: str, progress: Callable[[str], None]) -> Backend:
    db = ctx.database(kind)
    store = ctx.store_url("redis")
    gun = ctx.gunicorn(db, store, workers=2, threads=4)
    examples = {name: ctx.pick(*n) for name, n in EXAMPLES.items()}
    with Client(gun.url) as setup:
        world, etag, stale, victim = _world(setup)
    tallies: list[Tally] = []

    def done(tally: Tally) -> None:
        progress(f"{tally.name}: {tally.requests} requests in {tally.seconds:.1f} s")
        tallies.append(tally)

    for name, cases in hostile_cases(world, examples).items():
        tally = Tally(f"{name}{label}")
        send_all(gun.url, cases, tally, THREADS)
        done(tally)
    tally = Tally(f"edge cases{label}")
    send_all(gun.url, edge_cases(world, etag, stale, victim)[::ctx.pick(1, 4)], tally, THREADS)
    started = time.monotonic()
    for raw in _chunked_cases():  # these reach the application: its answer must be JSON
        status, content_type, body = raw_request(gun.port, raw)
        tally.record("RAW", raw[:40].decode("latin-1"), status, content_type, body, raw)
    tally.seconds += time.monotonic() - started
    done(tally)
    tally = Tally(f"HTTP protocol{label}")
    started = time.monotonic()
    protocol(gun.port, tally, ctx.pick(5, 1))
    tally.seconds = time.monotonic() - started
    done(tally)
    tally = Tally(f"schemathesis{label}")
    started = time.monotonic()
    operations = schemathesis_family(gun.url, ctx.pick(*SCHEMA_VERSIONS), ctx.pick(*SCHEMA_EXAMPLES), tally,
                                     positive_only=ctx.quick, every=ctx.pick(1, 8))
    tally.seconds = time.monotonic() - started
    tally.name += f" ({', '.join(f'{v}: {n} ops' for v, n in operations.items())})"
    done(tally)
    # the service still answers, and the log of both workers holds no traceback
    with Client(gun.url) as check:
        alive = check.get("/v1/nodes?limit=1").status
    gun.stop()
    log = gun.output()
    first = log.find("Traceback")
    excerpt = log[first:first + 3000] if first >= 0 else ""
    return Backend(kind, tallies, log.count("Traceback"), excerpt, alive)


def run(ctx: Context) -> dict[str, Any]:
    def progress(line: str) -> None:
        if not ctx.quick:
            print(f"   {line}", flush=True)

    # quick: SQLite (no PostgreSQL to start; the short version only keeps the scenario working)
    backends = [run_backend(ctx, ctx.pick("postgresql", "sqlite"), "", progress)]
    if os.environ.get("HOSTILE_SQLITE") == "1" and not ctx.quick:
        backends.append(run_backend(ctx, "sqlite", " [SQLite]", progress))
    tallies = [t for b in backends for t in b.tallies]
    api = [t for t in tallies if not t.name.startswith("HTTP protocol")]
    total = sum(t.requests for t in tallies)
    errors_5xx = sum(t.count(5) for t in tallies)
    tracebacks = sum(len(t.tracebacks) for t in tallies)
    non_json = sum(len(t.non_json) for t in api)
    nonconformant = sum(len(t.nonconformant) for t in tallies)
    unanswered = sum(t.statuses.get(0, 0) for t in tallies)
    log_tracebacks = sum(b.log_tracebacks for b in backends)
    problems: list[str] = []
    for t in tallies:
        problems += [f"{t.name}: 5xx {s} x{n}" for s, n in sorted(t.statuses.items()) if s >= 500]
        problems += [f"{t.name}: traceback/exception text: {x}" for x in t.tracebacks[:5]]
        problems += [f"{t.name}: no HTTP answer x{t.statuses[0]}"] if t.statuses.get(0) else []
        problems += [f"{t.name}: schema: {x}" for x in t.nonconformant[:5]]
        if t in api:
            problems += [f"{t.name}: non-JSON error body: {x}" for x in t.non_json[:5]]
    for b in backends:
        if b.log_tracebacks:
            problems.append(f"{b.name}: gunicorn logged {b.log_tracebacks} traceback(s); the first: "
                            f"{b.log_excerpt}")
        if b.alive != 200:
            problems.append(f"{b.name}: the service no longer answered GET /v1/nodes at the end ({b.alive})")
    dead = sum(b.alive != 200 for b in backends)
    ok = not (errors_5xx or tracebacks or non_json or nonconformant or unanswered or log_tracebacks or dead)
    summary = (f"{total:,} hostile and schema-driven requests in {len(tallies)} families: {errors_5xx} 5xx, "
               f"{tracebacks} tracebacks or exception names in bodies, {non_json} non-JSON API errors, "
               f"{nonconformant} schema non-conformances, {unanswered} unanswered, "
               f"{log_tracebacks} tracebacks in the service log")
    rows = [t.row() for t in tallies]
    rows.append(["all", total, *[sum(r[i] for r in rows) for i in range(2, len(COLUMNS) - 1)],
                 round(sum(t.seconds for t in tallies), 1)])
    return {
        "ok": ok,
        "summary": summary,
        "table": {"columns": COLUMNS, "rows": rows},
        "problems": problems,
        "data": {
            # a list: results.json sorts the keys of mappings, and the families' order is the plot's
            "families": [{"name": t.name, "requests": t.requests,
                          "statuses": {str(s): n for s, n in sorted(t.statuses.items())}} for t in tallies],
            "backends": [b.name for b in backends],
            "requests": total, "5xx": errors_5xx, "tracebacks": tracebacks, "non_json_4xx": non_json,
            "nonconformant": nonconformant, "unanswered": unanswered, "log_tracebacks": log_tracebacks,
        },
    }


def _color(code: int, rank: int) -> Any:
    """2xx greens, 3xx blues, 4xx oranges/purples/browns/greys (never red), 5xx and no answer red."""
    import matplotlib.pyplot as plt

    if code >= 500 or code == 0:
        return "red"
    if code < 300:
        return plt.get_cmap("Greens")(0.45 + 0.15 * (rank % 4))
    if code < 400:
        return plt.get_cmap("Blues")(0.5 + 0.15 * (rank % 3))
    return plt.get_cmap("tab20")([2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 0, 1][rank % 16])


def plot(result: dict[str, Any], out_dir: Path) -> list[str]:
    import matplotlib.pyplot as plt

    families = {f["name"]: f for f in result["data"]["families"]}
    names = list(families)
    labels = [n.split(" (")[0] for n in names]
    codes = sorted({int(s) for f in families.values() for s in f["statuses"]})
    fig, ax = plt.subplots(figsize=(11, 0.55 * len(names) + 1.8))
    left = [0.0] * len(names)
    ranks: Counter[int] = Counter()
    for code in codes:
        shares = [families[n]["statuses"].get(str(code), 0) / max(1, families[n]["requests"]) * 100
                  for n in names]
        label = {-1: "closed", 0: "no answer"}.get(code, str(code))
        color = _color(code, ranks[code // 100])
        ranks[code // 100] += 1
        ax.barh(range(len(names)), shares, left=left, label=label, color=color, edgecolor="white",
                linewidth=0.5)
        left = [a + b for a, b in zip(left, shares, strict=True)]
    for y, name in enumerate(names):
        ax.text(101, y, f"{families[name]['requests']:,}", va="center", fontsize=8)
    ax.set_xlim(0, 110)
    ax.set_yticks(range(len(names)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("share of the family's requests (%); the number of requests at the right")
    errors = result["data"]["5xx"]
    ax.set_title(f"Hostile and schema-driven input: status codes per family ({errors} 5xx)")
    ax.legend(title="status", fontsize=7, title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              ncol=1 + len(codes) // 14)
    fig.tight_layout()
    name = "hostile_input-statuses.png"
    fig.savefig(out_dir / name, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return [name]
