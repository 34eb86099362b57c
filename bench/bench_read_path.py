"""Where the time of GET /v1/nodes/{uuid} and GET /v1/nodes/detail goes, piece by piece.

    PYTHONPATH=examples/baremetal_service/src:. python bench/bench_read_path.py [--rounds 5]

In-process (no HTTP server), on a fresh SQLite file with 100 nodes: the whole pipeline as
``deploy.build_app`` builds it, then the pieces of each request on their own -- the Flask
app alone (the served microversion put in the environ, as the middleware does), a plain Flask
app of one constant route (the Flask floor), the data API, the same SELECT on the pooled
DBAPI connection, SQLAlchemy's ``execute(...).all()``, rows -> documents, rendering and
orjson.  CPU time of this thread (``time.thread_time_ns``: what other processes on the
machine do counts less), best of the rounds; docs/example/performance.md ("The read path of GET
node and GET detail") explains the figures.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._timing import per_call_us  # noqa: E402


def _environ(path: str, version: Any = None) -> dict[str, Any]:
    from apimw.microversion import ENVIRON_VERSION

    environ = {
        "REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "6385", "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(b""), "CONTENT_LENGTH": "0", "wsgi.errors": sys.stderr,
        "wsgi.version": (1, 0), "wsgi.multithread": True, "wsgi.multiprocess": False,
        "wsgi.run_once": False, "HTTP_X_OPENSTACK_IRONIC_API_VERSION": "1.116",
        "REMOTE_ADDR": "127.0.0.1",
    }  # fmt: skip
    if version is not None:
        environ[ENVIRON_VERSION] = version
    return environ


def _get(app: Any, path: str, version: Any = None) -> bytes:
    status: list[str] = []

    def start_response(line: str, headers: Any, exc_info: Any = None) -> None:
        status.append(line)

    body = b"".join(app(_environ(path, version), start_response))
    assert status[0].startswith("200"), (status, body[:200])
    return body


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    from flask import Flask, Response

    from apimw import Version
    from baremetal_service.db.kinds import KINDS, node_filter_shapes
    from baremetal_service.deploy import build_app, create_app
    from baremetal_service.handlers import common, serialize

    workdir = Path(tempfile.mkdtemp(prefix="apimw-bench-read-"))
    app = build_app(f"sqlite:///{workdir / 'bench.db'}", "memory://", run_conductor=False)
    svc, db, kind = app.service, app.service.db, KINDS["node"]
    for i in range(100):
        svc.create_node({"driver": "fake-hardware", "name": f"n{i}"})
    uuid = svc.list_nodes(limit=100)[50]["uuid"]
    version = Version(1, 116)
    flask_app = create_app(svc)

    # the framework's own floor: a Flask app of one constant route (the example's app refuses a
    # route its access rules do not know)
    floor_app = Flask(__name__)

    @floor_app.route("/bench/constant")
    def constant() -> Response:
        return Response(b"{}", status=200, headers=[("Content-Type", "application/json")])

    # the statements the data API runs, on the pooled DBAPI connection and through Core
    one = kind.lookups[("uuid", False, False)]
    one_sql = one.compile(dialect=db.engine.dialect).string
    shape, params = node_filter_shapes({"children": False}, lambda _uuid: 0)
    key, bound = db.list_shape(kind, shape, None, None, 1000, None, "id", "asc", None, False, params)
    page = db.list_query(kind, key)
    compiled = page.compile(dialect=db.engine.dialect)
    page_sql = compiled.string
    page_args = tuple(bound.get(name, compiled.params.get(name)) for name in compiled.positiontup or ())

    def dbapi(sql: str, values: tuple[Any, ...], fetch: str) -> Callable[[], Any]:
        def call() -> Any:
            with db.reader.connect() as conn:
                cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
                cursor.execute(sql, values)
                rows = getattr(cursor, fetch)()
                cursor.close()
                return rows

        return call

    def core_all() -> Any:
        with db.reader.connect() as conn:
            return conn.execute(page, bound).all()

    def core_docs() -> Any:
        with db.reader.connect() as conn:
            return kind.to_docs(conn.execute(page, bound))

    def chunked() -> Any:
        first = svc.list_nodes(filters={"children": False}, limit=25)
        return svc.list_nodes(filters={"children": False}, limit=975, marker=first[-1]["uuid"])

    node = svc.get_node(uuid)
    docs = svc.list_nodes(filters={"children": False}, limit=1000)
    render = serialize.node_renderer(version, "http://127.0.0.1:6385", None, iso_strings=True)
    flask = flask_app.wsgi_app
    cases: dict[str, tuple[Callable[[], Any], int]] = {
        "GET node: the whole stack": (lambda: _get(app, f"/v1/nodes/{uuid}"), 1000),
        "GET node: the Flask app alone": (lambda: _get(flask, f"/v1/nodes/{uuid}", version), 1000),
        "Flask floor (a constant route)": (lambda: _get(floor_app.wsgi_app, "/bench/constant"), 1000),
        "GET node: Database.get": (lambda: db.get("node", uuid, internal=False), 1000),
        "GET node: the SELECT on the DBAPI": (dbapi(one_sql, (uuid,), "fetchone"), 1000),
        "GET node: node_doc": (lambda: serialize.node_doc(node, version, "http://x"), 1000),
        "detail: the whole stack": (lambda: _get(app, "/v1/nodes/detail"), 50),
        "detail: reads as collect_page does": (chunked, 50),
        "detail: the 100 rows in one read": (lambda: svc.list_nodes(filters={"children": False}), 50),
        "detail: fetchall on the DBAPI": (dbapi(page_sql, page_args, "fetchall"), 50),
        "detail: Core execute(...).all()": (core_all, 50),
        "detail: Core + Kind.to_docs": (core_docs, 50),
        "detail: render 100": (lambda: [render(doc) for doc in docs], 50),
        "detail: render + orjson 100": (lambda: [common.encode_json(render(doc)) for doc in docs], 50),
    }  # fmt: skip
    best: dict[str, float] = {}
    try:
        for _round in range(args.rounds):
            for name, (call, number) in cases.items():
                us = per_call_us(call, number=number, repeat=3, clock=time.thread_time_ns)
                best[name] = min(best.get(name, us), us)
    finally:
        app.close()
    print(json.dumps({"rounds": args.rounds}))
    for name, us in best.items():
        print(f"{name:40} {us:9.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
