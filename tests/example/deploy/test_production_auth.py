"""HTTP basic auth (htpasswd + bcrypt) and the health check, over a real gunicorn with two workers.

The cluster runs ``BAREMETAL_AUTH_STRATEGY=http_basic`` on the session's PostgreSQL
and a Redis of its own (stopped and restarted by the health test).  The
middleware's own rules (malformed headers, file reload, cache) are checked in
memory at the end.
"""

from __future__ import annotations

import base64
import json
import secrets
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bcrypt
import psycopg
import pytest
import requests
from webob import Request

from apimw.errors import ConfigError
from baremetal_service.auth import BasicAuthMiddleware, load_htpasswd, strip_identity
from tests.example.conftest import drop_pg_database, new_pg_database, pg_url
from tests.example.production_support import LATEST, Gunicorn, burst, error_code, pid_of
from tests.servers import RedisServer, Server, baremetal_service, make_workdir

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(__name__)]  # module fixtures set up once

PASSWORDS = {"alice": "correct horse battery staple", "bob": "s3cret-bob"}


def write_htpasswd(path: Path, users: dict[str, str], rounds: int = 4) -> Path:
    lines = [
        f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=rounds)).decode()}"
        for user, password in users.items()
    ]
    path.write_text("# htpasswd -B\n" + "\n".join(lines) + "\n")
    return path


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture(scope="module")
def private_redis() -> Iterator[Server]:
    server = RedisServer(make_workdir("prod-auth-redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def auth_cluster(
    postgres_server: Server, pg_template: str, private_redis: Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gunicorn]:
    tmp = tmp_path_factory.mktemp("gunicorn-auth")
    name = new_pg_database(postgres_server, pg_template)
    env = {
        "BAREMETAL_DATABASE": pg_url(postgres_server, name),
        "BAREMETAL_STORE": private_redis.url,
        "BAREMETAL_ETAG_KEY": secrets.token_hex(32),
        "BAREMETAL_AUTH_STRATEGY": "http_basic",
        "BAREMETAL_HTPASSWD": str(write_htpasswd(tmp / "htpasswd", PASSWORDS)),
    }
    gun = Gunicorn(tmp, env, workers=2)
    gun.db = env["BAREMETAL_DATABASE"]
    try:
        gun.start()
        yield gun
    finally:
        gun.stop()
        drop_pg_database(postgres_server, name)


def test_no_or_wrong_credentials_get_401_with_a_challenge(auth_cluster: Gunicorn) -> None:
    url = auth_cluster.url + "/v1/nodes"
    wrong = [
        {},
        basic("alice", "wrong password"),
        basic("mallory", PASSWORDS["alice"]),
        basic("bob", PASSWORDS["alice"]),
        {"Authorization": "Bearer " + secrets.token_hex(16)},
        {"Authorization": "Basic not-base64!"},
        {"Authorization": "Basic " + base64.b64encode(b"no-colon").decode()},
        {"X-Project-Id": "p1", "X-Roles": "admin", "X-Identity-Status": "Confirmed", "X-User-Id": "alice"},
    ]
    for headers in wrong:
        resp = requests.get(url, headers={**LATEST, **headers}, timeout=10)
        assert resp.status_code == 401, (headers, resp.text)
        assert resp.headers["WWW-Authenticate"] == 'Basic realm="baremetal"'
        assert resp.headers["Content-Type"] == "application/json"
        assert error_code(resp) == "auth.unauthenticated"
        # the Ironic envelope clients parse
        assert "requires authentication" in json.loads(resp.json()["error_message"])["faultstring"]
    # a POST without credentials creates nothing
    resp = requests.post(url, json={"driver": "fake-hardware", "name": "nope"}, headers=LATEST, timeout=10)
    assert resp.status_code == 401


def test_right_credentials_pass_on_every_worker(auth_cluster: Gunicorn) -> None:
    # Sequential requests may all be accepted by one worker; concurrent bursts reach both.
    users = list(PASSWORDS.items())

    def get(i: int) -> requests.Response:
        user, password = users[i % len(users)]
        return requests.get(auth_cluster.url + "/v1/nodes", headers={**LATEST, **basic(user, password)},
                            timeout=10)  # fmt: skip

    pids = set()
    # a gevent worker accepts greedily: on a loaded machine one of them may take many bursts
    # in a row before the other gets a turn (bounded; stops as soon as both have answered)
    for _ in range(100):
        for resp in burst(16, get):
            assert resp.status_code == 200, resp.text
            assert "nodes" in resp.json()
            pids.add(pid_of(resp))
        if len(pids) == 2:
            break
    assert len(pids) == 2


def _count(db: str, name: str) -> int:
    with psycopg.connect(db.replace("postgresql+psycopg://", "postgresql://")) as conn:
        row = conn.execute("SELECT count(*), max(owner) FROM nodes WHERE name = %s", (name,)).fetchone()
    assert row is not None
    return int(row[0])


def test_client_sent_project_cannot_change_the_idempotency_scope(auth_cluster: Gunicorn) -> None:
    """Same token, same body, a different X-Project-Id: a replay, never a second node."""
    token = uuid.uuid4().hex
    name = f"scope-{token[:8]}"
    answers = []
    for project in ("project-a", "project-b", "project-c"):
        answers.append(
            requests.post(
                auth_cluster.url + "/v1/nodes",
                json={"driver": "fake-hardware", "name": name},
                headers={**LATEST, **basic("alice", PASSWORDS["alice"]), "X-Client-Token": token,
                         "X-Project-Id": project, "X-Tenant-Id": project},
                timeout=10,
            )  # fmt: skip
        )
    assert [a.status_code for a in answers] == [201, 201, 201], [a.text for a in answers]
    assert [a.headers.get("Idempotent-Replayed") for a in answers] == [None, "true", "true"]
    assert len({a.json()["uuid"] for a in answers}) == 1
    assert _count(auth_cluster.db, name) == 1
    # the spoofed project did not become the node's owner either
    node = requests.get(f"{auth_cluster.url}/v1/nodes/{answers[0].json()['uuid']}",
                        headers={**LATEST, **basic("bob", PASSWORDS["bob"])}, timeout=10).json()  # fmt: skip
    assert node["owner"] is None


@pytest.fixture(scope="module")
def tenant_cluster(auth_cluster: Gunicorn, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gunicorn]:
    """A second http_basic service on the same database, store and etag key, with every user
    pinned to the project ``tenant-a`` (``BAREMETAL_AUTH_PROJECT``); auth_cluster is its admin."""
    keys = ("BAREMETAL_DATABASE", "BAREMETAL_STORE", "BAREMETAL_ETAG_KEY", "BAREMETAL_AUTH_STRATEGY",
            "BAREMETAL_HTPASSWD")  # fmt: skip
    env = {**{key: auth_cluster.env[key] for key in keys}, "BAREMETAL_AUTH_PROJECT": "tenant-a"}
    gun = Gunicorn(tmp_path_factory.mktemp("gunicorn-tenant"), env, workers=1)
    gun.db = auth_cluster.db
    try:
        gun.start()
        yield gun
    finally:
        gun.stop()


def test_a_tenant_cannot_hand_nodes_away(auth_cluster: Gunicorn, tenant_cluster: Gunicorn) -> None:
    """Ironic's defaults under http_basic: a project-scoped caller cannot create a node for
    another project nor change an owner; a lessee cannot take the node, drop the lease,
    delete the node or add ports to it.  The unscoped htpasswd operator still can."""
    creds = {**LATEST, **basic("alice", PASSWORDS["alice"])}
    spoof = {"X-Project-Id": "tenant-b", "X-Tenant-Id": "tenant-b"}
    mac = "52:54:00:99:0a:01"

    def call(base: str, method: str, path: str, body: Any = None, **headers: str) -> requests.Response:
        return requests.request(method, base + path, json=body, headers={**creds, **headers}, timeout=10)

    tenant, admin = tenant_cluster.url, auth_cluster.url
    for extra in ({}, spoof):
        gift = call(tenant, "POST", "/v1/nodes", {"driver": "fake-hardware", "owner": "tenant-b"}, **extra)
        assert gift.status_code == 400, gift.text
        assert error_code(gift) == "baremetal.invalid-parameter"
    assert requests.get(admin + "/v1/nodes?owner=tenant-b", headers=creds, timeout=10).json()["nodes"] == []
    own = call(tenant, "POST", "/v1/nodes", {"driver": "fake-hardware"}, **spoof)
    assert own.status_code == 201, own.text
    assert own.json()["owner"] == "tenant-a"
    own_path = f"/v1/nodes/{own.json()['uuid']}"
    for extra in ({}, spoof):
        to_b = [{"op": "replace", "path": "/owner", "value": "tenant-b"}]
        moved = call(tenant, "PATCH", own_path, to_b, **extra)
        assert moved.status_code == 403, moved.text
        assert error_code(moved) == "baremetal.forbidden"
    assert call(tenant, "GET", own_path).json()["owner"] == "tenant-a"

    body = {"driver": "fake-hardware", "owner": "tenant-b", "lessee": "tenant-a"}
    leased = call(admin, "POST", "/v1/nodes", body)
    assert leased.status_code == 201, leased.text
    leased_path = f"/v1/nodes/{leased.json()['uuid']}"
    assert call(tenant, "GET", leased_path).status_code == 200
    denied = [
        call(tenant, "PATCH", leased_path, [{"op": "replace", "path": "/owner", "value": "tenant-a"}]),
        call(tenant, "PATCH", leased_path, [{"op": "remove", "path": "/lessee"}]),
        call(tenant, "DELETE", leased_path),
        call(tenant, "POST", "/v1/ports", {"node_uuid": leased_path.rsplit("/", 1)[1], "address": mac}),
    ]
    assert [r.status_code for r in denied] == [403, 403, 403, 403], [r.text for r in denied]
    assert {error_code(r) for r in denied} == {"baremetal.forbidden"}
    after = call(admin, "GET", leased_path).json()
    assert (after["owner"], after["lessee"]) == ("tenant-b", "tenant-a")

    # the unscoped operator may give any node to anyone
    given = call(admin, "PATCH", own_path, [{"op": "replace", "path": "/owner", "value": "tenant-b"}])
    assert given.status_code == 200 and given.json()["owner"] == "tenant-b"
    assert call(tenant, "GET", own_path).status_code == 404


def _health(url: str, method: str = "GET") -> requests.Response:
    return requests.request(method, url + "/healthcheck", headers={"Accept": "application/json"}, timeout=10)


def _wait_health(url: str, status: int, timeout: float = 20.0) -> requests.Response:
    deadline = time.monotonic() + timeout
    resp = _health(url)
    while resp.status_code != status and time.monotonic() < deadline:
        time.sleep(0.2)
        resp = _health(url)
    return resp


def test_health_reports_database_and_store_without_credentials(
    auth_cluster: Gunicorn, private_redis: Server
) -> None:
    ok = _health(auth_cluster.url)
    assert ok.status_code == 200, ok.text
    assert ok.json()["reasons"] == ["database: OK; idempotency store: OK"]
    assert _health(auth_cluster.url, "HEAD").status_code == 204
    private_redis.stop()
    try:
        down = _wait_health(auth_cluster.url, 503)
        assert down.status_code == 503, down.text
        assert down.json()["reasons"] == ["database: OK; idempotency store: UNAVAILABLE"]
        assert "127.0.0.1" not in down.text and "redis://" not in down.text
        # meanwhile a token-bearing create is refused (fail-closed), not run unprotected
        refused = requests.post(
            auth_cluster.url + "/v1/nodes", json={"driver": "fake-hardware"},
            headers={**LATEST, **basic("alice", PASSWORDS["alice"]), "X-Client-Token": uuid.uuid4().hex},
            timeout=10,
        )  # fmt: skip
        assert refused.status_code == 503
        assert error_code(refused) == "idempotency.store-unavailable"
    finally:
        private_redis.start()
    back = _wait_health(auth_cluster.url, 200)
    assert back.status_code == 200, back.text
    assert back.json()["reasons"] == ["database: OK; idempotency store: OK"]


# -- the middleware in memory -----------------------------------------------------------------------


def _seen(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    keys = {k: v for k, v in environ.items() if k.startswith("HTTP_X_") or k == "HTTP_AUTHORIZATION"}
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(keys).encode()]


@pytest.fixture
def htpasswd(tmp_path: Path) -> Path:
    return write_htpasswd(tmp_path / "htpasswd", PASSWORDS)


def test_verified_identity_replaces_client_headers(htpasswd: Path) -> None:
    app = BasicAuthMiddleware(_seen, user_file=str(htpasswd), project_id="proj-1", roles=["member", "reader"])
    req = Request.blank("/v1/nodes", headers={
        **basic("bob", PASSWORDS["bob"]), "X-Project-Id": "evil", "X-Roles": "admin", "X-User-Id": "root",
        "X-Service-Roles": "service", "X-Is-Admin-Project": "True", "X-Client-Token": "t1",
    })  # fmt: skip
    seen = json.loads(req.get_response(app).body)
    assert seen == {
        "HTTP_X_IDENTITY_STATUS": "Confirmed", "HTTP_X_USER_ID": "bob", "HTTP_X_USER_NAME": "bob",
        "HTTP_X_USER": "bob", "HTTP_X_ROLES": "member,reader", "HTTP_X_PROJECT_ID": "proj-1",
        "HTTP_X_CLIENT_TOKEN": "t1",
    }  # fmt: skip


def test_strip_identity_leaves_other_headers() -> None:
    environ = {"HTTP_X_PROJECT_ID": "a", "HTTP_X_TENANT_ID": "a", "HTTP_X_CLIENT_TOKEN": "t",
               "HTTP_X_OPENSTACK_IRONIC_API_VERSION": "1.1", "HTTP_X_SERVICE_PROJECT_ID": "s"}  # fmt: skip
    strip_identity(environ)
    assert environ == {"HTTP_X_CLIENT_TOKEN": "t", "HTTP_X_OPENSTACK_IRONIC_API_VERSION": "1.1"}


def test_htpasswd_file_changes_are_picked_up(htpasswd: Path) -> None:
    app = BasicAuthMiddleware(_seen, user_file=str(htpasswd), cache_ttl=60)
    good = basic("alice", PASSWORDS["alice"])
    assert Request.blank("/", headers=good).get_response(app).status_int == 200
    write_htpasswd(htpasswd, {"bob": PASSWORDS["bob"]})  # alice removed
    app._checked_at -= 2  # the file is re-read at most once a second
    assert Request.blank("/", headers=good).get_response(app).status_int == 401


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("alice:$apr1$abc$0123456789abcdefghijk\n", id="md5"),
        pytest.param("alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n", id="sha1"),
        pytest.param("alice:plain\n", id="plain"),
        pytest.param("no-colon-here\n", id="malformed"),
    ],
)
def test_htpasswd_without_bcrypt_is_refused_at_startup(tmp_path: Path, content: str) -> None:
    path = tmp_path / "htpasswd"
    path.write_text(content)
    with pytest.raises(ConfigError, match="htpasswd|bcrypt|user:"):
        BasicAuthMiddleware(_seen, user_file=str(path))
    assert "W6ph5" not in str(_error(path))


def _error(path: Path) -> str:
    try:
        load_htpasswd(str(path))
    except ConfigError as exc:
        return str(exc)
    return ""


def test_missing_htpasswd_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the htpasswd file"):
        BasicAuthMiddleware(_seen, user_file=str(tmp_path / "absent"))


# -- the paste.deploy sample of docs/example/production.md, through the real command ----------------------


DOCS = Path(__file__).resolve().parents[3] / "docs" / "example" / "production.md"


def _docs_ini(marker: str) -> str:
    text = DOCS.read_text()
    blocks = [b.split("```", 1)[0] for b in text.split("```ini\n")[1:]]
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"one ini block with {marker} expected in {DOCS}"
    return found[0]


def test_docs_http_basic_paste_sample_serves(tmp_path: Path, redis_server: Server) -> None:
    htpasswd = write_htpasswd(tmp_path / "htpasswd", PASSWORDS)
    ini = _docs_ini("[filter:http_basic]")
    assert "user_file = /etc/baremetal/htpasswd" in ini
    (tmp_path / "api-paste.ini").write_text(ini.replace("/etc/baremetal/htpasswd", str(htpasswd)))
    with baremetal_service(
        tmp_path, "--paste", str(tmp_path / "api-paste.ini"), "--database", f"sqlite:///{tmp_path / 'bm.db'}",
        "--store", redis_server.url, host=False, ready_path="/healthcheck",
    ) as service:  # fmt: skip
        url = service.url
        health = _health(url)
        assert health.status_code == 200
        assert health.json()["reasons"] == ["database: OK; idempotency store: OK"]
        denied = requests.get(url + "/v1/nodes", headers={**LATEST, "X-Project-Id": "p"}, timeout=10)
        assert denied.status_code == 401
        assert error_code(denied) == "auth.unauthenticated"
        token = uuid.uuid4().hex
        answers = [
            requests.post(url + "/v1/nodes", json={"driver": "fake-hardware", "name": f"docs-{token[:8]}"},
                          headers={**LATEST, **basic("alice", PASSWORDS["alice"]), "X-Client-Token": token,
                                   "X-Project-Id": project}, timeout=10)
            for project in ("a", "b")
        ]  # fmt: skip
        assert [a.status_code for a in answers] == [201, 201]
        assert answers[1].headers["Idempotent-Replayed"] == "true"


def test_a_cached_login_never_lets_another_password_in(htpasswd: Path) -> None:
    app = BasicAuthMiddleware(_seen, user_file=str(htpasswd), cache_ttl=60)
    right, wrong = basic("alice", PASSWORDS["alice"]), basic("alice", PASSWORDS["alice"] + "x")
    assert Request.blank("/", headers=right).get_response(app).status_int == 200  # now cached
    assert Request.blank("/", headers=wrong).get_response(app).status_int == 401
    assert Request.blank("/", headers=basic("bob", PASSWORDS["alice"])).get_response(app).status_int == 401
    uncached = BasicAuthMiddleware(_seen, user_file=str(htpasswd), cache_ttl=0)
    for _ in range(2):
        assert Request.blank("/", headers=right).get_response(uncached).status_int == 200
    assert Request.blank("/", headers=wrong).get_response(uncached).status_int == 401


@pytest.mark.parametrize(
    ("env", "message"),
    [
        pytest.param({"BAREMETAL_AUTH_STRATEGY": "kerberos"}, "BAREMETAL_AUTH_STRATEGY must be one of",
                     id="strategy"),
        pytest.param({"BAREMETAL_AUTH_STRATEGY": "keystone"}, "keystone: no configuration file",
                     id="keystone-without-configuration"),
        pytest.param({"BAREMETAL_CONDUCTOR_WORKERS": "two"}, "must be an integer", id="conductors"),
        pytest.param({"BAREMETAL_HEALTHCHECK": "maybe"}, "must be true or false", id="flag"),
        pytest.param({"BAREMETAL_STORE": "memory://", "BAREMETAL_WORKER_PROCESSES": "3"},
                     "cannot be used with 3 worker processes", id="memory-store"),
        pytest.param({"BAREMETAL_AUTH_STRATEGY": "http_basic", "BAREMETAL_HTPASSWD": "/nonexistent/htpasswd"},
                     "cannot read the htpasswd file", id="htpasswd"),
    ],
)  # fmt: skip
def test_wsgi_configuration_errors_are_one_sentence(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    from baremetal_service.deploy import make_application

    # a database that would be created if anything got that far: it must not be
    database = tmp_path / "never.db"
    with pytest.raises(ConfigError, match=message):
        make_application({"BAREMETAL_DATABASE": f"sqlite:///{database}", **env})
    assert not database.exists()


def test_health_reports_the_database_down_and_back(tmp_path: Path) -> None:
    """A private PostgreSQL, killed under a running worker: 503 naming the database, then OK again."""
    from baremetal_service.db.engine import create_engine
    from baremetal_service.db.migrate import upgrade
    from tests.servers import PostgresServer

    pg = PostgresServer(make_workdir("prod-health-pg"))
    pg.start()
    gun = None
    try:
        url = f"postgresql+psycopg://postgres@127.0.0.1:{pg.port}/postgres"
        engine = create_engine(url)
        try:
            upgrade(engine)
        finally:
            engine.dispose()
        env = {"BAREMETAL_DATABASE": url, "BAREMETAL_STORE": "memory://"}
        gun = Gunicorn(tmp_path, env, workers=1).start()
        assert _health(gun.url).json()["reasons"] == ["database: OK; idempotency store: OK"]
        pg.kill()  # a crash (a SIGTERM "smart" shutdown would wait for the pool's sessions)
        down = _wait_health(gun.url, 503)
        assert down.status_code == 503, down.text
        assert down.json()["reasons"] == ["database: UNAVAILABLE; idempotency store: OK"]
        assert "postgres" not in down.text
        pg.start()
        back = _wait_health(gun.url, 200)
        assert back.status_code == 200, back.text
        listed = requests.get(gun.url + "/v1/nodes", headers=LATEST, timeout=10)
        assert listed.status_code == 200, listed.text
    finally:
        if gun is not None:
            gun.stop()
        pg.stop()
        shutil.rmtree(pg.workdir, ignore_errors=True)


def test_wsgi_builds_from_a_paste_ini(tmp_path: Path, redis_server: Server) -> None:
    """BAREMETAL_PASTE_INI: the docs' http_basic pipeline, served by deploy.application."""
    from baremetal_service.deploy import make_application

    htpasswd = write_htpasswd(tmp_path / "htpasswd", PASSWORDS)
    ini = tmp_path / "api-paste.ini"
    ini.write_text(_docs_ini("[filter:http_basic]").replace("/etc/baremetal/htpasswd", str(htpasswd)))
    app = make_application({
        "BAREMETAL_PASTE_INI": str(ini), "BAREMETAL_DATABASE": f"sqlite:///{tmp_path / 'bm.db'}",
        "BAREMETAL_STORE": redis_server.url, "BAREMETAL_CONDUCTOR_WORKERS": "0",
    })  # fmt: skip
    try:
        health = Request.blank("/healthcheck", headers={"Accept": "application/json"}).get_response(app)
        assert health.status_int == 200
        assert health.json["reasons"] == ["database: OK; idempotency store: OK"]
        denied = Request.blank("/v1/nodes", headers={"X-Project-Id": "p"}).get_response(app)
        assert denied.status_int == 401
        allowed = Request.blank("/v1/nodes", headers=basic("bob", PASSWORDS["bob"])).get_response(app)
        assert allowed.status_int == 200
    finally:
        app.close()
