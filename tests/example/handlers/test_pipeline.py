"""The code-built stack and the api-paste.ini pipeline give the same answers; the CLI starts."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import requests

from tests.servers import baremetal_service, free_port

from .conftest import Api, Server, error_of, reset

_VOLATILE = {"x-openstack-request-id", "date", "server", "content-length", "location"}


def _scenario(api: Api, token: str) -> list[tuple[Any, ...]]:
    """A little of everything; returns what a client would compare (minus ids and times)."""
    out: list[tuple[Any, ...]] = []

    def record(resp: requests.Response) -> requests.Response:
        headers = {k.lower(): v for k, v in resp.headers.items() if k.lower() not in _VOLATILE}
        headers.pop("etag", None)
        body: Any = None
        if resp.content:
            body = resp.json()
            if isinstance(body, dict):
                body = sorted(body)  # key sets (values hold uuids and times)
        out.append((resp.request.method, resp.status_code, sorted(headers.items()), body))
        return resp

    record(api.get("/", version=None))
    record(api.get("/v1", version="latest"))
    node = record(api.post("/v1/nodes", {"driver": "fake-hardware", "name": "same"})).json()
    record(api.post("/v1/nodes", {"driver": "fake-hardware", "name": "same"}))
    record(api.post("/v1/nodes", {"driver": "fake-hardware", "name": "old"}, version="1.1"))
    record(api.request("POST", "/v1/nodes", data=b'{"driver": '))
    record(api.get("/v1/nodes", version="99.99"))
    record(api.get("/v1/nodes", version="spam"))
    record(api.get(f"/v1/nodes/{node['uuid']}", version="1.1"))
    record(api.patch(f"/v1/nodes/{node['uuid']}", [{"op": "add", "path": "/extra/a", "value": 1}]))
    first = record(
        api.post("/v1/nodes", {"driver": "fake-hardware", "name": "tok"}, headers={"X-Client-Token": token})
    )
    again = record(
        api.post("/v1/nodes", {"driver": "fake-hardware", "name": "tok"}, headers={"X-Client-Token": token})
    )
    assert first.json()["uuid"] == again.json()["uuid"]
    record(api.request("PUT", "/v1/resource_classes/CUSTOM_SAME"))
    record(api.request("PUT", "/v1/resource_classes/CUSTOM_SAME"))
    record(api.delete(f"/v1/nodes/{node['uuid']}"))
    return out


def test_paste_pipeline_answers_like_the_code_built_one(fresh_servers: tuple[Server, Server]) -> None:
    code, paste = fresh_servers
    in_code = _scenario(Api(code.url), f"t-{uuid.uuid4()}")
    reset(code.app)  # both servers share one database
    from_ini = _scenario(Api(paste.url), f"t-{uuid.uuid4()}")
    assert len(in_code) == 15
    assert in_code == from_ini


def test_baremetal_service_command_serves_and_stops(tmp_path: Path) -> None:
    with baremetal_service(tmp_path, host=False, ready_path="/v1/nodes") as service:
        resp = requests.get(f"{service.url}/v1/nodes", timeout=10)
        assert resp.status_code == 200, service.output()
        assert resp.json() == {"nodes": []}
        assert resp.headers["X-OpenStack-Ironic-API-Maximum-Version"] == "1.117"
        assert (tmp_path / "baremetal.sqlite").exists()  # the default database is a file in cwd
    assert service.proc is not None and service.proc.returncode == 0, service.output()


def test_bad_database_url_fails_fast_with_a_clear_message(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "baremetal_service.cli",
        "--port",
        str(free_port()),
        "--database",
        "mysql://nope",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert done.returncode == 2
    assert "cannot start" in done.stderr and "database URL" in done.stderr


# -- one pipeline order: request_id -> microversion -> auth -> idempotency -> etag -> app -------------


def test_both_stacks_judge_the_version_before_the_caller(fresh_servers: tuple[Server, Server]) -> None:
    """microversion sits outside auth (README "Pipeline order"), in code and in api-paste.ini alike."""
    for server in fresh_servers:
        api = Api(server.url)
        bad_project = {"X-Project-Id": "not a project!"}
        resp = api.get("/v1/nodes", version="99.99", headers=bad_project)
        assert resp.status_code == 406, (server.url, resp.text)
        assert error_of(resp)["code"] == "microversion.unsupported"
        # the auth layer's own refusal carries the served version, as every answer does
        resp = api.get("/v1/nodes", version="1.50", headers=bad_project)
        assert resp.status_code == 400
        assert error_of(resp)["code"] == "auth.invalid-project"
        assert resp.headers["X-OpenStack-Ironic-API-Version"] == "1.50"
        assert resp.headers["X-OpenStack-Ironic-API-Maximum-Version"] == "1.117"


def _wsgi_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "BAREMETAL_DATABASE": f"sqlite:///{tmp_path / 'wsgi.db'}",
        "BAREMETAL_STORE": "memory://",
        "BAREMETAL_CONDUCTOR_WORKERS": "0",
        **extra,
    }


def test_http_basic_401_comes_after_the_version_check(tmp_path: Path) -> None:
    import bcrypt
    from webob import Request

    from baremetal_service.deploy import make_application
    from tests.wsgi import run

    htpasswd = tmp_path / "htpasswd"
    htpasswd.write_text(f"alice:{bcrypt.hashpw(b'pw', bcrypt.gensalt(rounds=4)).decode()}\n")
    app = make_application(
        _wsgi_env(tmp_path, BAREMETAL_AUTH_STRATEGY="http_basic", BAREMETAL_HTPASSWD=str(htpasswd))
    )
    try:
        resp = run(app, Request.blank("/v1/nodes", headers={"X-OpenStack-Ironic-API-Version": "99.99"}))
        assert resp.status_int == 406
        resp = run(app, Request.blank("/v1/nodes", headers={"X-OpenStack-Ironic-API-Version": "1.50"}))
        assert resp.status_int == 401
        assert resp.headers["X-OpenStack-Ironic-API-Version"] == "1.50"
        assert resp.headers["WWW-Authenticate"] == 'Basic realm="baremetal"'
    finally:
        app.close()


def test_etag_key_from_the_environment_reaches_the_paste_pipeline(tmp_path: Path) -> None:
    """BAREMETAL_ETAG_KEY with BAREMETAL_PASTE_INI: two processes give one state one etag."""
    from webob import Request

    from baremetal_service.deploy import PASTE_INI, make_application
    from tests.wsgi import run

    env = _wsgi_env(tmp_path, BAREMETAL_PASTE_INI=str(PASTE_INI), BAREMETAL_ETAG_KEY="k" * 32)
    first = make_application(env)
    try:
        second = make_application(env)  # another worker process on the same database
        try:
            latest = {"X-OpenStack-Ironic-API-Version": "latest"}

            def patch(app: Any, uuid_: str, value: int) -> str:
                req = Request.blank(
                    f"/v1/nodes/{uuid_}", method="PATCH", headers=latest,
                    json=[{"op": "add", "path": "/extra/x", "value": value}],
                )  # fmt: skip
                resp = run(app, req)
                assert resp.status_int == 200, resp.text
                return str(resp.headers["ETag"])

            req = Request.blank("/v1/nodes", method="POST", headers=latest, json={"driver": "fake-hardware"})
            node = run(first, req).json
            one = patch(first, node["uuid"], 1)
            two = patch(second, node["uuid"], 2)
            again = patch(second, node["uuid"], 1)  # back to the state `first` tagged
            assert two != one
            assert again == one
            # the shipped ini starts with the healthcheck filter: served (once) from the ini
            assert run(second, Request.blank("/healthcheck")).status_int == 200
        finally:
            second.close()
    finally:
        first.close()
