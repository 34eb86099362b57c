"""/v1/conductors (Ironic 1.49): the in-process conductor, from its heartbeat record."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Api, Server


@pytest.fixture
def registry(service_server: Server) -> Any:
    conductors = service_server.app.service.conductors
    conductors.heartbeat()  # the tables were emptied for this test: beat now
    return conductors


def test_the_live_conductor_is_listed_and_alive(api: Api, registry: Any) -> None:
    listed = api.get("/v1/conductors").json()["conductors"]
    assert [c["hostname"] for c in listed] == [registry.hostname]
    assert set(listed[0]) == {"hostname", "conductor_group", "alive", "links"}
    assert listed[0]["alive"] is True
    detail = api.get("/v1/conductors", params={"detail": "true"}).json()["conductors"][0]
    assert "fake-hardware" in detail["drivers"] and detail["created_at"] and detail["updated_at"]
    one = api.get(f"/v1/conductors/{registry.hostname}").json()
    assert one["alive"] is True and one["conductor_group"] == ""
    # a node names its conductor (1.49), and that conductor is listed
    node = api.node(name="c1")
    assert node["conductor"] == registry.hostname


def test_a_conductor_that_stopped_is_not_alive(api: Api, registry: Any) -> None:
    registry.heartbeat(online=False)
    try:
        assert api.get(f"/v1/conductors/{registry.hostname}").json()["alive"] is False
    finally:
        registry.heartbeat()
    assert api.get(f"/v1/conductors/{registry.hostname}").json()["alive"] is True


def test_version_gate_unknown_host_and_fields(api: Api, registry: Any) -> None:
    assert api.get("/v1/conductors", version="1.48").status_code == 404
    assert "conductors" not in api.get("/v1/", version="1.48").json()
    assert api.get("/v1/conductors/nope.example").status_code == 404
    only = api.get("/v1/conductors", params={"fields": "hostname"}).json()["conductors"][0]
    assert set(only) == {"hostname", "links"}
    assert api.get("/v1/conductors", params={"fields": "bogus"}).status_code == 400
    assert api.get("/v1/conductors", params={"sort_key": "alive"}).status_code == 400
