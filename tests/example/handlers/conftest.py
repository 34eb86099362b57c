"""The bare-metal service over real HTTP on 127.0.0.1, on SQLite and on a real PostgreSQL.

``api`` is an :class:`Api` bound to a running service (the whole middleware stack,
conductor worker on).  For speed, one server per backend serves the session and its
tables are emptied before each test (a server per test costs ~1 s more each);
``fresh_servers`` starts both shapes of the stack (code and api-paste.ini) on the
domain tests' ``database_url`` fixture instead.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
import sqlalchemy as sa

from baremetal_service.db.models import Base
from baremetal_service.deploy import build_app, load_paste_app

LATEST = "latest"


class Server:
    """A threaded HTTP/1.1 server (werkzeug) in a thread, serving *app* on an ephemeral loopback port.

    The production command serves with waitress (tested in test_pipeline); here the
    server must start and stop cleanly many times per session.
    """

    def __init__(self, app: Any) -> None:
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
        self.app = app
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="http-server", daemon=True)

    def start(self) -> Server:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
        self.app.close()


class Api:
    """A tiny client: ``api.get("/v1/nodes", version="1.5")`` -> requests.Response."""

    def __init__(self, url: str, *, version: str | None = LATEST, project: str | None = None) -> None:
        self.url = url
        self.version = version
        self.project = project
        self.session = requests.Session()

    def close(self) -> None:
        self.session.close()

    def __del__(self) -> None:
        # Tests make an Api per project or thread and drop it: close its pooled sockets
        # explicitly, or the garbage collector reports them unclosed (at interpreter exit,
        # where pytest turns the ResourceWarning into a failed run).
        self.session.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        version: str | None = "",
        json: Any = None,
        data: bytes | str | None = None,
        headers: dict[str, str] | None = None,
        params: dict[str, Any] | None = None,
    ) -> requests.Response:
        hdrs: dict[str, str] = {}
        chosen = self.version if version == "" else version
        if chosen is not None:
            hdrs["X-OpenStack-Ironic-API-Version"] = chosen
        if self.project:
            hdrs["X-Project-Id"] = self.project
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        return self.session.request(
            method, self.url + path, json=json, data=data, headers=hdrs, params=params, timeout=10
        )

    def get(self, path: str, **kw: Any) -> requests.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> requests.Response:
        return self.request("POST", path, json=body, **kw)

    def patch(self, path: str, body: Any = None, **kw: Any) -> requests.Response:
        return self.request("PATCH", path, json=body, **kw)

    def put(self, path: str, body: Any = None, **kw: Any) -> requests.Response:
        return self.request("PUT", path, json=body, **kw)

    def delete(self, path: str, **kw: Any) -> requests.Response:
        return self.request("DELETE", path, **kw)

    def as_project(self, project: str | None) -> Api:
        return Api(self.url, version=self.version, project=project)

    def node(self, **fields: Any) -> dict[str, Any]:
        body = {"driver": "fake-hardware", **fields}
        resp = self.post("/v1/nodes", body)
        assert resp.status_code == 201, resp.text
        return resp.json()

    def wait_for(
        self,
        path: str,
        predicate: Callable[[dict[str, Any]], bool],
        timeout: float = 10.0,
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        doc: dict[str, Any] = {}
        while time.monotonic() < deadline:
            doc = self.get(path).json()
            if predicate(doc):
                return doc
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting on {path}; last: {doc}")


def error_of(resp: requests.Response) -> dict[str, Any]:
    """The decoded Ironic error: faultstring and the stable code."""
    import json

    body = resp.json()
    inner = json.loads(body["error_message"])
    return {"faultstring": inner["faultstring"], "code": body["errors"][0]["code"]}


BACKENDS = ("sqlite", "postgresql")


def reset(app: Any) -> None:
    """Empty every table: one migrated database per backend serves the whole session.

    The service's background threads (conductor workers, heartbeat, allocations) keep
    writing meanwhile, so on PostgreSQL the TRUNCATE can deadlock with one of their
    transactions (it takes its table locks one by one): PostgreSQL aborts one of the
    two, and the reset is tried again.
    """
    from apimw.etag_db import is_retryable, write_attempts

    engine = app.service.db.engine
    for attempt in write_attempts(10, 0.01):
        try:
            with engine.begin() as conn:
                if engine.dialect.name == "postgresql":
                    names = ", ".join(t.name for t in Base.metadata.sorted_tables)
                    conn.execute(sa.text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
                else:
                    for table in reversed(Base.metadata.sorted_tables):
                        conn.execute(table.delete())
            return
        except sa.exc.DBAPIError as error:
            if attempt == 10 or not is_retryable(error):
                raise


def fresh_api(server: Server) -> Iterator[Api]:
    """A client of *server* on an emptied database, closed afterwards (``yield from`` it in a
    fixture)."""
    reset(server.app)
    client = Api(server.url)
    yield client
    client.close()


@pytest.fixture(scope="session", params=BACKENDS)
def backend_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A database per backend for the session: a SQLite file, or a database on the real PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('api-db') / 'api.db'}"
        return
    server = request.getfixturevalue("postgres_server")
    name = f"api_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(server.url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f"CREATE DATABASE {name}"))
        yield server.url.rsplit("/", 1)[0] + "/" + name
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    finally:
        admin.dispose()


@pytest.fixture(scope="session")
def session_server(backend_url: str) -> Iterator[Server]:
    server = Server(build_app(database_url=backend_url, store_url="memory://")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def service_server(session_server: Server) -> Server:
    """The code-built stack over HTTP, on an emptied database (SQLite and PostgreSQL)."""
    reset(session_server.app)
    return session_server


@pytest.fixture
def service_url(service_server: Server) -> str:
    return service_server.url


@pytest.fixture
def fresh_servers(database_url: str) -> Iterator[tuple[Server, Server]]:
    """Both shapes of the stack -- built in code and from api-paste.ini -- on this test's clean
    database from the domain tests' ``database_url`` fixture (SQLite and PostgreSQL)."""
    code = Server(build_app(database_url=database_url, store_url="memory://")).start()
    try:
        paste = Server(load_paste_app(database_url=database_url, store_url="memory://")).start()
        try:
            yield code, paste
        finally:
            paste.stop()
    finally:
        code.stop()


@pytest.fixture
def api(service_url: str) -> Iterator[Api]:
    client = Api(service_url)
    yield client
    client.close()
